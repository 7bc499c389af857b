package logsink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Config says where a Sink sends messages. Zero durations and QueueLen
// mean the defaults.
type Config struct {
	Network string      // "udp", "tcp" or "tls"
	Address string      // HOST:PORT of the collector
	TLS     *tls.Config // for "tls": the CA that signed the collector and its name
	Header  Header

	QueueLen     int           // records waiting for the network; default 1024
	MinBackoff   time.Duration // first wait before a reconnection; default 200 ms
	MaxBackoff   time.Duration // longest wait; default 30 s
	DialTimeout  time.Duration // default 5 s
	WriteTimeout time.Duration // a collector that does not read this long is dead; default 5 s
	FlushTimeout time.Duration // Run's flush after its context ends; default 2 s
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.QueueLen <= 0 {
		c.QueueLen = 1024
	}
	def(&c.MinBackoff, 200*time.Millisecond)
	def(&c.MaxBackoff, 30*time.Second)
	def(&c.DialTimeout, 5*time.Second)
	def(&c.WriteTimeout, 5*time.Second)
	def(&c.FlushTimeout, 2*time.Second)
}

// Sink queues formatted messages and, in Run, writes them to the
// collector. Queuing never blocks: a full queue drops the message and
// counts it.
type Sink struct {
	cfg     Config
	q       chan entry
	dropped atomic.Uint64 // dropped since the last delivered message, not yet reported
	lost    atomic.Uint64 // all messages ever lost (queue full or write failed)
}

type entry struct {
	b    []byte
	sdAt int
}

// New checks cfg and returns a Sink; nothing is dialled before Run.
func New(cfg Config) (*Sink, error) {
	switch cfg.Network {
	case "udp", "tcp":
	case "tls":
		if cfg.TLS == nil {
			return nil, errors.New("logsink: tls needs a TLS config")
		}
	default:
		return nil, fmt.Errorf("logsink: network %q: want udp, tcp or tls", cfg.Network)
	}
	if _, _, err := net.SplitHostPort(cfg.Address); err != nil {
		return nil, fmt.Errorf("logsink: address: %w", err)
	}
	cfg.defaults()
	return &Sink{cfg: cfg, q: make(chan entry, cfg.QueueLen)}, nil
}

// Lost is how many messages were dropped or failed to be written so far.
func (s *Sink) Lost() uint64 { return s.lost.Load() }

func (s *Sink) enqueue(r *Record) {
	b, sdAt := Append(nil, &s.cfg.Header, r)
	select {
	case s.q <- entry{b, sdAt}:
	default:
		s.dropped.Add(1)
		s.lost.Add(1)
	}
}

// Run writes queued messages until ctx ends, then flushes what is queued
// for at most FlushTimeout and closes the connection. It owns the
// connection: it dials, notices a dead collector, and reconnects with
// exponential backoff while the queue fills (and then drops).
//
// Writes run under a context that outlives ctx by FlushTimeout, so a
// message whose dial is in progress when the daemon stops is delivered
// with the rest, not lost with the aborted dial.
func (s *Sink) Run(ctx context.Context) {
	w := &writer{cfg: &s.cfg, s: s, backoff: s.cfg.MinBackoff}
	defer w.close()
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	// From the moment ctx ends, writes have FlushTimeout left (a backoff
	// wait or a dial in progress included).
	var deadline atomic.Pointer[time.Timer]
	stopArm := context.AfterFunc(ctx, func() { deadline.Store(time.AfterFunc(s.cfg.FlushTimeout, cancel)) })
	defer func() {
		if !stopArm() {
			if t := deadline.Load(); t != nil {
				t.Stop()
			}
		}
	}()
	for {
		select {
		case e := <-s.q:
			w.send(wctx, e)
			if ctx.Err() == nil {
				continue
			}
		case <-ctx.Done():
		}
		s.flush(wctx, w)
		return
	}
}

// flush writes what is queued until ctx ends.
func (s *Sink) flush(ctx context.Context, w *writer) {
	for ctx.Err() == nil {
		select {
		case e := <-s.q:
			w.send(ctx, e)
		default:
			return
		}
	}
}

// writer is Run's connection state; only Run's goroutine touches it.
type writer struct {
	cfg      *Config
	s        *Sink
	conn     net.Conn
	dead     chan struct{} // closed when the collector closed a stream connection
	readers  sync.WaitGroup
	backoff  time.Duration
	nextDial time.Time
	pending  uint64 // drops taken from s.dropped, not yet reported
}

// send writes one message, reconnecting as long as ctx lasts. A message
// that cannot be written is lost and counted.
func (w *writer) send(ctx context.Context, e entry) {
	for tries := 0; ; tries++ {
		if w.conn != nil && w.dead != nil {
			select {
			case <-w.dead: // the collector hung up: what we write now is lost
				w.closeConn()
			default:
			}
		}
		if w.conn == nil && !w.connect(ctx) {
			w.lose()
			return
		}
		w.pending += w.s.dropped.Swap(0)
		msg := e.b
		if w.pending > 0 {
			// [dropped@32473 count="N"] goes before the attributes, or
			// replaces "-" when there are none.
			m := make([]byte, 0, len(e.b)+40)
			m = appendDropElement(append(m, e.b[:e.sdAt]...), w.pending)
			rest := e.b[e.sdAt:]
			if len(rest) > 0 && rest[0] == '-' {
				rest = rest[1:]
			}
			msg = append(m, rest...)
		}
		if w.cfg.Network != "udp" {
			// RFC 6587 §3.4.1, RFC 5425 §4.3: MSG-LEN SP SYSLOG-MSG.
			msg = append(strconv.AppendInt(make([]byte, 0, len(msg)+8), int64(len(msg)), 10), append([]byte{' '}, msg...)...)
		}
		dl := time.Now().Add(w.cfg.WriteTimeout)
		if d, ok := ctx.Deadline(); ok && d.Before(dl) {
			dl = d
		}
		_ = w.conn.SetWriteDeadline(dl)
		if _, err := w.conn.Write(msg); err == nil {
			w.pending = 0
			w.backoff = w.cfg.MinBackoff
			return
		}
		if w.cfg.Network == "udp" || tries > 0 || ctx.Err() != nil {
			// UDP: the collector's port was unreachable (ICMP); the
			// socket stays. A stream gets one more try on a new
			// connection, as a write can fail half-way.
			if w.cfg.Network != "udp" {
				w.closeConn()
			}
			w.lose()
			return
		}
		w.closeConn()
	}
}

func (w *writer) lose() {
	w.pending++
	w.s.lost.Add(1)
}

// connect dials once the backoff has passed; false when ctx ended first
// or the dial failed.
func (w *writer) connect(ctx context.Context) bool {
	if wait := time.Until(w.nextDial); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	dctx, cancel := context.WithTimeout(ctx, w.cfg.DialTimeout)
	defer cancel()
	var (
		c   net.Conn
		err error
	)
	nd := &net.Dialer{}
	switch w.cfg.Network {
	case "tls":
		c, err = (&tls.Dialer{NetDialer: nd, Config: w.cfg.TLS}).DialContext(dctx, "tcp", w.cfg.Address)
	default:
		c, err = nd.DialContext(dctx, w.cfg.Network, w.cfg.Address)
	}
	if err != nil {
		// Exponential backoff with ±20 % jitter, so a fleet whose
		// collector restarts does not reconnect in step.
		j := time.Duration(float64(w.backoff) * (0.8 + 0.4*rand.Float64()))
		w.nextDial = time.Now().Add(j)
		w.backoff = min(2*w.backoff, w.cfg.MaxBackoff)
		return false
	}
	w.conn = c
	if w.cfg.Network != "udp" {
		// A collector never sends; a read that ends means it hung up.
		// Noticing that before writing saves the messages a write into
		// a half-closed connection would lose.
		dead := make(chan struct{})
		w.dead = dead
		w.readers.Go(func() {
			defer close(dead)
			buf := make([]byte, 256)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
			}
		})
	}
	return true
}

func (w *writer) closeConn() {
	if w.conn != nil {
		w.conn.Close()
		w.conn, w.dead = nil, nil
	}
	// The first reconnection waits the backoff too: a collector that
	// accepts and closes at once must not make us spin.
	w.nextDial = time.Now().Add(w.backoff)
	w.backoff = min(2*w.backoff, w.cfg.MaxBackoff)
}

func (w *writer) close() {
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
	w.readers.Wait()
}

// Default ports: 514 for UDP (RFC 5426) and plain TCP (customary), 6514
// for TLS (RFC 5425 §4.1).
var defaultPorts = map[string]string{"udp": "514", "tcp": "514", "tls": "6514"}

// ParseTarget reads a collector URL, udp://HOST[:PORT], tcp://… or
// tls://…, into a network and a HOST:PORT.
func ParseTarget(s string) (network, addr string, err error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", "", fmt.Errorf("syslog target %q: %w", s, err)
	}
	port, ok := defaultPorts[u.Scheme]
	if !ok || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", "", fmt.Errorf("syslog target %q: want udp://HOST[:PORT], tcp://HOST[:PORT] or tls://HOST[:PORT]", s)
	}
	if u.Port() != "" {
		port = u.Port()
	}
	return u.Scheme, net.JoinHostPort(u.Hostname(), port), nil
}

// TLSConfig verifies a collector at addr against the CA in caFile (the
// system roots when caFile is empty), TLS 1.2 or later.
func TLSConfig(caFile, addr string) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("syslog CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("syslog CA %s: no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}
