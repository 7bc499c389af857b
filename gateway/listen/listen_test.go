package listen

import (
	"errors"
	"io"
	"net"
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
