package listen

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// serveEcho accepts on s until it is closed; each connection answers every
// read with "ok" and is closed when the peer closes it or it times out.
func serveEcho(t *testing.T, s *Socket) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := s.Listener.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 512)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					c.Write([]byte("ok"))
				}
			})
		}
	})
	t.Cleanup(func() { s.Close(); wg.Wait() })
}

// TCP connections beyond the per-source limit are refused; closing one
// gives its slot back.
func TestTCPConnectionLimit(t *testing.T) {
	s, err := Bind(Spec{"tcp", "127.0.0.1:0"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	serveEcho(t, s)
	addr := strings.TrimPrefix(s.Bound, "tcp:")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range maxTCPConnsPerIP {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// The connection over the limit is accepted by the kernel, then closed
	// by the listener without an answer.
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	extra.Write([]byte("hello"))
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := extra.Read(make([]byte, 100)); err == nil {
		t.Fatalf("connection over the limit answered %d bytes", n)
	}
	extra.Close()
	// The limited ones work, and a freed slot can be taken again.
	conns[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		again, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns[0] = again
		again.Write([]byte("hello"))
		again.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 16)
		n, err := again.Read(buf)
		if err == nil && string(buf[:n]) == "ok" {
			break
		}
		// the slot is released when the listener sees the close: retry briefly
		if time.Now().After(deadline) {
			t.Fatalf("freed slot not reusable: %v %q", err, buf[:n])
		}
		again.Close()
	}
}

// A TCP connection that stays silent for TCPIdle is closed.
func TestTCPIdleTimeout(t *testing.T) {
	s, err := Bind(Spec{"tcp", "127.0.0.1:0"}, Options{TCPIdle: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	serveEcho(t, s)
	c, err := net.Dial("tcp", strings.TrimPrefix(s.Bound, "tcp:"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 16)); !errors.Is(err, io.EOF) {
		t.Fatalf("silent connection: read %v, want EOF (closed by the listener)", err)
	}
}

// BindAll keeps the sockets of keep, binds the others, and on a failure
// closes only what it bound and names the spec.
func TestBindAll(t *testing.T) {
	keepSpec := Spec{"udp", "127.0.0.1:0"}
	keep, err := BindAll([]Spec{keepSpec}, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.CloseAll()

	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	newSpec := Spec{"udp", "127.0.0.2:0"}
	badSpec := Spec{"udp", busy.LocalAddr().String()}
	_, err = BindAll([]Spec{keepSpec, newSpec, badSpec}, Options{}, keep)
	if err == nil || !strings.Contains(err.Error(), badSpec.String()) {
		t.Fatalf("binding a busy port: %v", err)
	}
	if _, err := BindAll(nil, Options{}, nil); err != nil {
		t.Fatal(err)
	}
	// The kept socket is still open.
	if err := keep[keepSpec].PacketConn.SetReadDeadline(time.Now()); err != nil {
		t.Fatalf("a failed BindAll closed a kept socket: %v", err)
	}
	if _, err := BindAll([]Spec{{"sctp", "127.0.0.1:0"}}, Options{}, nil); err == nil {
		t.Fatal("an unknown transport was bound")
	}

	next, err := BindAll([]Spec{keepSpec, newSpec, {"tcp", "127.0.0.1:0"}}, Options{}, keep)
	if err != nil {
		t.Fatal(err)
	}
	if next[keepSpec] != keep[keepSpec] || len(next) != 3 {
		t.Fatalf("BindAll did not keep the socket: %v", next)
	}
	udp := next.UDPAddrs()
	if len(udp) != 2 || udp[0].Addr().String() != "127.0.0.1" || udp[1].Addr().String() != "127.0.0.2" {
		t.Fatalf("UDPAddrs = %v", udp)
	}
	next.CloseNew(keep)
	if err := next[newSpec].PacketConn.SetReadDeadline(time.Now()); !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrClosed) {
		t.Fatalf("CloseNew left a new socket open: %v", err)
	}
	if err := keep[keepSpec].PacketConn.SetReadDeadline(time.Now()); err != nil {
		t.Fatalf("CloseNew closed a kept socket: %v", err)
	}
}

// A TCP connection that has not sent a complete SIP message within
// TCPMessageTimeout of its accept is closed, however short its silences
// (TCPIdle is an hour here): a peer cannot hold a slot and a read buffer
// with a message it never finishes. Once a message is through, the next
// one again has TCPMessageTimeout from its first byte.
func TestTCPMessageTimeout(t *testing.T) {
	s, err := Bind(Spec{"tcp", "127.0.0.1:0"}, Options{TCPIdle: time.Hour, TCPMessageTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	serveEcho(t, s)
	addr := strings.TrimPrefix(s.Bound, "tcp:")
	closed := func(c net.Conn, what string) {
		t.Helper()
		// The deadline only bounds a failure; the read returns when the
		// listener closes the connection.
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			_, err := c.Read(make([]byte, 64))
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Fatalf("%s: read %v, want EOF (closed by the listener)", what, err)
			}
		}
	}

	// Half a message, then nothing: closed.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("OPTIONS sip:box SIP/2.0\r\nVia: SIP/2.0/TCP 127.0.0.1:5060;branch=z9hG4bK1\r\n"))
	closed(c, "unfinished first message")

	// Keep-alive CRLFs alone are no message.
	k, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	k.Write([]byte("\r\n\r\n"))
	closed(k, "CRLF keep-alives only")

	// A whole message, then half of the next: the second one is timed.
	m, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Write([]byte("MESSAGE sip:box SIP/2.0\r\nContent-Length: 5\r\n\r\nhello"))
	m.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := m.Read(make([]byte, 16)); err != nil {
		t.Fatalf("complete message: %v", err)
	}
	m.Write([]byte("MESSAGE sip:box SIP/2.0\r\nl: 5\r\n\r\nhel"))
	closed(m, "unfinished second message")
}

// The framer finds message ends across reads: header end, Content-Length
// (long and compact form, any case), bodies split anywhere, and CRLF
// keep-alives between messages.
func TestFramer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []string
		done   int  // complete messages
		inMsg  bool // in the middle of one at the end
	}{
		{"empty", nil, 0, false},
		{"keepalive", []string{"\r\n\r\n", "\r\n"}, 0, false},
		{"no body", []string{"OPTIONS sip:b SIP/2.0\r\nVia: x\r\n\r\n"}, 1, false},
		{"split header end", []string{"OPTIONS sip:b SIP/2.0\r\nVia: x\r", "\n\r", "\n"}, 1, false},
		{"body", []string{"MESSAGE sip:b SIP/2.0\r\ncontent-length : 3\r\n\r\nabc"}, 1, false},
		{"body split", []string{"MESSAGE sip:b SIP/2.0\r\nContent-Length: 3\r\n\r\na", "b", "cOPT"}, 1, true},
		{"compact", []string{"MESSAGE sip:b SIP/2.0\r\nl:2\r\n\r\nab\r\n\r\nINVITE sip:b SIP/2.0\r\nL: 0\r\n\r\n"}, 2, false},
		{"partial header", []string{"INVITE sip:b SIP/2.0\r\nContent-Le"}, 0, true},
		{"awaiting body", []string{"INVITE sip:b SIP/2.0\r\nContent-Length: 10\r\n\r\n12345"}, 0, true},
		{"bare LF", []string{"OPTIONS sip:b SIP/2.0\nl: 1\n\nx"}, 1, false},
	} {
		var f framer
		n := 0
		for _, c := range tc.chunks {
			n += f.feed([]byte(c))
		}
		if n != tc.done || f.inMessage() != tc.inMsg {
			t.Errorf("%s: %d messages, in a message %v; want %d, %v", tc.name, n, f.inMessage(), tc.done, tc.inMsg)
		}
	}
}

// The per-source limit counts an IPv4 address, and an IPv6 /64 (what one
// site or host is usually given: an attacker picks addresses inside it at
// will), as one source.
func TestSourceKey(t *testing.T) {
	for in, want := range map[string]string{
		"198.18.0.1":                 "198.18.0.1",
		"::ffff:198.18.0.1":          "198.18.0.1",
		"2001:db8:1:2:aaaa::1":       "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff:ffff:0:9": "2001:db8:1:2::/64",
		"2001:db8:1:3::1":            "2001:db8:1:3::/64",
		"::1":                        "::/64",
		"fe80::1%eth0":               "fe80::/64",
	} {
		if got := sourceKey(netip.MustParseAddr(in)); got != want {
			t.Errorf("sourceKey(%s) = %q, want %q", in, got, want)
		}
	}
}

// Over IPv6 the limit holds per /64: the connections of ::1 share one
// budget (on a real network, so do all the addresses of its /64).
func TestTCPConnectionLimitIPv6(t *testing.T) {
	s, err := Bind(Spec{"tcp", "[::1]:0"}, Options{})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	serveEcho(t, s)
	addr := strings.TrimPrefix(s.Bound, "tcp:")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range maxTCPConnsPerIP {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if i == 0 { // the listener took it: it answers
			c.Write([]byte("\r\n"))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 16)); err != nil {
				t.Fatalf("first IPv6 connection: %v", err)
			}
		}
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.Write([]byte("hello"))
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := extra.Read(make([]byte, 100)); err == nil {
		t.Fatalf("IPv6 connection over the /64's limit answered %d bytes", n)
	}
}
