package listen

import (
	"bytes"
	"crypto/tls"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/outpost/outpost/gateway/trace"
)

// TCP limits: sipgo keeps a goroutine and a 32 KiB read buffer per
// connection and never times one out, so without limits a peer that opens
// connections and stays silent, or trickles a message it never finishes,
// would exhaust a small box.
const (
	maxTCPConns      = 1024 // ~32 MiB of read buffers at most
	maxTCPConnsPerIP = 64   // one site's NAT with many TCP phones fits
)

// DefaultTCPMessageTimeout is how long a TCP connection may take to send
// a complete SIP message when Options leaves it 0: a phone sends its
// REGISTER or INVITE at once after connecting, and a message of a few
// kilobytes takes milliseconds even on a poor link.
const DefaultTCPMessageTimeout = 10 * time.Second

// limitedListener refuses connections beyond the limits (in all, and per
// source: sourceKey) and times out the connections it accepts (timedConn).
type limitedListener struct {
	net.Listener
	idle time.Duration // silence allowed between messages; 0 = any
	msg  time.Duration // time allowed for one message (timedConn)
	tap  *trace.Tap    // nil = connections are not traced
	tls  *tls.Config   // nil = plain TCP; else each connection is a TLS server

	mu    sync.Mutex
	total int
	perIP map[string]int // by sourceKey
}

func newLimitedListener(ln net.Listener, idle, msg time.Duration, tap *trace.Tap, tc *tls.Config) *limitedListener {
	if msg <= 0 {
		msg = DefaultTCPMessageTimeout
	}
	return &limitedListener{Listener: ln, idle: idle, msg: msg, tap: tap, tls: tc, perIP: map[string]int{}}
}

func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := remoteKey(c)
		l.mu.Lock()
		ok := l.total < maxTCPConns && l.perIP[key] < maxTCPConnsPerIP
		if ok {
			l.total++
			l.perIP[key]++
		}
		l.mu.Unlock()
		if !ok {
			c.Close()
			continue
		}
		if l.tls != nil {
			// The handshake runs on the first read, under the first
			// message's deadline: a peer that never completes it is
			// closed like one that never completes a message.
			c = tls.Server(c, l.tls)
		}
		tc := &timedConn{Conn: c, l: l, key: key, since: time.Now()}
		if l.tap != nil {
			return trace.WrapConn(tc, l.tap), nil
		}
		return tc, nil
	}
}

func (l *limitedListener) release(key string) {
	l.mu.Lock()
	l.total--
	if l.perIP[key]--; l.perIP[key] <= 0 {
		delete(l.perIP, key)
	}
	l.mu.Unlock()
}

func remoteKey(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return sourceKey(a.AddrPort().Addr())
	}
	return c.RemoteAddr().String()
}

// sourceKey is what the per-source limit counts: an IPv4 address (mapped
// or not), or the /64 of an IPv6 address. A /64 is the smallest network
// an IPv6 site or host is given (RFC 4291 §2.5.1 interface identifiers,
// SLAAC, privacy addresses): one host can take as many addresses in it as
// it likes, so counting addresses would not limit it at all.
func sourceKey(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	p, err := a.Prefix(64)
	if err != nil {
		return a.String()
	}
	return p.String()
}

// timedConn sets its read deadline before every read: while a message is
// incomplete (the first one from the accept, a later one from its first
// byte) the message's deadline, l.msg after its start, so a connection
// that never completes one is closed at that time whatever it trickles;
// between messages (CRLF keep-alives included) l.idle of silence. A read
// error ends sipgo's reader, which closes the connection. It gives its
// slot back once when closed.
type timedConn struct {
	net.Conn
	l      *limitedListener
	key    string
	f      framer
	since  time.Time // start of the message being waited for
	seen   bool      // a complete message came through
	closed sync.Once
}

func (c *timedConn) Read(b []byte) (int, error) {
	c.Conn.SetReadDeadline(c.deadline(time.Now()))
	n, err := c.Conn.Read(b)
	if n > 0 {
		wasIn := c.f.inMessage()
		if c.f.feed(b[:n]) > 0 {
			c.seen = true
		}
		if c.seen && !wasIn && c.f.inMessage() {
			c.since = time.Now() // a later message: timed from its first byte
		}
	}
	return n, err
}

// deadline is the read deadline at now (zero: none).
func (c *timedConn) deadline(now time.Time) time.Time {
	var d time.Time
	if c.l.idle > 0 {
		d = now.Add(c.l.idle)
	}
	if !c.seen || c.f.inMessage() {
		if m := c.since.Add(c.l.msg); d.IsZero() || m.Before(d) {
			d = m
		}
	}
	return d
}

func (c *timedConn) Close() error {
	err := c.Conn.Close()
	c.closed.Do(func() { c.l.release(c.key) })
	return err
}

// framer follows SIP message boundaries in a TCP byte stream (RFC 3261
// §18.3: headers up to an empty line, then Content-Length bytes of body),
// only to tell when a message is complete; sipgo does the parsing. CR and
// LF between messages are keep-alives (RFC 5626 §3.5.1). Lines end in
// CRLF or a bare LF, as sipgo accepts. A header section longer than
// maxHead stops being searched for Content-Length (sipgo refuses such a
// message anyway).
type framer struct {
	state int    // between, head, body
	head  []byte // the header section so far (at most maxHead)
	tail  [3]byte
	body  int // body bytes still to come
}

const (
	between = iota
	head
	body
	maxHead = 64 << 10
)

func (f *framer) inMessage() bool { return f.state != between }

// feed consumes p and returns the number of messages it completed.
func (f *framer) feed(p []byte) int {
	done := 0
	for len(p) > 0 {
		switch f.state {
		case between:
			i := bytes.IndexFunc(p, func(r rune) bool { return r != '\r' && r != '\n' })
			if i < 0 {
				return done
			}
			p = p[i:]
			f.state, f.head, f.tail = head, f.head[:0], [3]byte{}
		case head:
			i := 0
			for ; i < len(p); i++ {
				b := p[i]
				end := b == '\n' && (f.tail[2] == '\n' || f.tail[2] == '\r' && f.tail[1] == '\n')
				f.tail = [3]byte{f.tail[1], f.tail[2], b}
				if end {
					i++
					break
				}
			}
			if len(f.head) < maxHead {
				f.head = append(f.head, p[:min(i, maxHead-len(f.head))]...)
			}
			ended := f.tail[2] == '\n' && (f.tail[1] == '\n' || f.tail[1] == '\r' && f.tail[0] == '\n')
			p = p[i:]
			if !ended {
				return done
			}
			f.body = contentLength(f.head)
			f.state = body
		case body:
			n := min(f.body, len(p))
			f.body -= n
			p = p[n:]
		}
		if f.state == body && f.body == 0 {
			f.state = between
			done++
		}
	}
	return done
}

// contentLength reads Content-Length (or its compact form "l") from a
// header section; 0 when absent or bad.
func contentLength(h []byte) int {
	for line := range bytes.Lines(h) {
		name, val, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		name = bytes.TrimSpace(name)
		if bytes.EqualFold(name, []byte("content-length")) || bytes.EqualFold(name, []byte("l")) {
			n, err := strconv.Atoi(string(bytes.TrimSpace(val)))
			if err != nil || n < 0 {
				return 0
			}
			return n
		}
	}
	return 0
}
