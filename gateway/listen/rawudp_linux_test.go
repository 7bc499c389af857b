package listen

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

// The raw UDP socket reads and writes like net's, over IPv4, IPv6 and a
// dual-stack wildcard socket (IPv4 peers v4-mapped), honours deadlines and
// reports its closing as net.ErrClosed (sipgo's reader stops on it).
func TestRawUDP(t *testing.T) {
	for _, tc := range []struct{ listen, client, dial string }{
		{"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1"},
		{"[::1]:0", "[::1]:0", "::1"},
		{":0", "127.0.0.1:0", "127.0.0.1"}, // dual stack
	} {
		pc, err := net.ListenPacket("udp", tc.listen)
		if err != nil {
			t.Logf("%s: %v (no IPv6 here?)", tc.listen, err)
			continue
		}
		c := rawUDPConn(pc, nil)
		if _, ok := c.(*rawUDP); !ok {
			t.Fatalf("%s: not wrapped", tc.listen)
		}
		cl, err := net.ListenPacket("udp", tc.client)
		if err != nil {
			t.Fatal(err)
		}
		to := &net.UDPAddr{IP: net.ParseIP(tc.dial), Port: c.LocalAddr().(*net.UDPAddr).Port}
		if _, err := cl.WriteTo([]byte("ping"), to); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, from, err := c.ReadFrom(buf)
		if err != nil || string(buf[:n]) != "ping" {
			t.Fatalf("%s: read %q %v", tc.listen, buf[:n], err)
		}
		if ua := UDPAddrOf(from); ua == nil || ua.Port != cl.LocalAddr().(*net.UDPAddr).Port || !ua.IP.Equal(net.ParseIP(tc.dial)) {
			t.Fatalf("%s: from %v, want %s port %d", tc.listen, from, tc.dial, cl.LocalAddr().(*net.UDPAddr).Port)
		}
		if want := UDPAddrOf(from).String(); from.String() != want {
			t.Fatalf("%s: source text %q, want %q", tc.listen, from, want)
		}
		if _, err := c.WriteTo([]byte("pong"), from); err != nil {
			t.Fatalf("%s: write: %v", tc.listen, err)
		}
		cl.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, _, err := cl.ReadFrom(buf); err != nil || string(buf[:n]) != "pong" {
			t.Fatalf("%s: answer %q %v", tc.listen, buf[:n], err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, _, err := c.ReadFrom(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: read past the deadline: %v", tc.listen, err)
		}
		c.SetReadDeadline(time.Time{})
		c.Close()
		if _, _, err := c.ReadFrom(buf); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("%s: read after close: %v", tc.listen, err)
		}
		if _, err := c.WriteTo([]byte("late"), from); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("%s: write after close: %v", tc.listen, err)
		}
		cl.Close()
	}
}

// A source's address is made once and handed out again for its next
// datagrams; another source gets its own.
func TestRawUDPSources(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := rawUDPConn(pc, nil)
	defer c.Close()
	var clients [2]net.PacketConn
	for i := range clients {
		if clients[i], err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		defer clients[i].Close()
	}
	buf := make([]byte, 100)
	read := func(from net.PacketConn) net.Addr {
		t.Helper()
		if _, err := from.WriteTo([]byte("x"), c.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, src, err := c.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		if src.String() != from.LocalAddr().String() {
			t.Fatalf("source %v, want %v", src, from.LocalAddr())
		}
		return src
	}
	a1, b1, a2 := read(clients[0]), read(clients[1]), read(clients[0])
	if a1 != a2 {
		t.Fatalf("one source, two addresses: %p %p", a1, a2)
	}
	if a1 == b1 {
		t.Fatal("two sources, one address")
	}
	if UDPAddrOf(b1).Port != clients[1].LocalAddr().(*net.UDPAddr).Port {
		t.Fatalf("second source's port: %v", b1)
	}
}

// Sends from many goroutines at once all leave, from the socket's own
// address; a Close among them ends them with net.ErrClosed, and none
// leaves afterwards through a socket that took the closed descriptor's
// number.
func TestRawUDPConcurrentSends(t *testing.T) {
	const senders, each = 8, 200
	rx, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	rx.SetReadBuffer(4 << 20)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := rawUDPConn(pc, nil)
	send := func(n int) chan error {
		errs := make(chan error, senders)
		for range senders {
			go func() {
				for i := 0; i < n; i++ {
					if _, err := c.WriteTo([]byte("x"), rx.LocalAddr()); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		return errs
	}
	errs := send(each)
	for range senders {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 16)
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := range senders * each {
		_, from, err := rx.ReadFrom(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if from.String() != c.LocalAddr().String() {
			t.Fatalf("datagram %d from %v, want %v", i, from, c.LocalAddr())
		}
	}

	// Senders run until Close; once a datagram of theirs arrives, close.
	errs = send(1 << 30)
	if _, _, err := rx.ReadFrom(buf); err != nil {
		t.Fatal(err)
	}
	c.Close()
	other, err := net.ListenPacket("udp", "127.0.0.1:0") // likely the closed descriptor's number
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for range senders {
		if err := <-errs; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("send during close: %v", err)
		}
	}
	rx.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	for {
		_, from, err := rx.ReadFrom(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if from.String() != c.LocalAddr().String() {
			t.Fatalf("a send after Close left from %v (the descriptor's new socket)", from)
		}
	}
}

// Datagrams queued before a read come out one per ReadFrom, in order,
// each with its own source, whatever the batch boundaries.
func TestRawUDPBatch(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := rawUDPConn(pc, nil)
	defer c.Close()
	var clients [3]net.PacketConn
	for i := range clients {
		if clients[i], err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		defer clients[i].Close()
	}
	const total = 3*readBatchLen + 5
	for i := range total {
		cl := clients[i%len(clients)]
		if _, err := cl.WriteTo([]byte(fmt.Sprintf("datagram %d", i)), c.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := range total {
		buf := make([]byte, 100+i) // a larger buffer mid-batch must not lose the batch
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if want := fmt.Sprintf("datagram %d", i); string(buf[:n]) != want {
			t.Fatalf("read %d: %q, want %q", i, buf[:n], want)
		}
		if want := clients[i%len(clients)].LocalAddr().String(); from.String() != want {
			t.Fatalf("read %d from %v, want %s", i, from, want)
		}
	}
	// A datagram longer than the reader's buffer is cut to it, as recvfrom does.
	clients[0].WriteTo([]byte("0123456789"), c.LocalAddr())
	buf := make([]byte, 4)
	if n, _, err := c.ReadFrom(buf); err != nil || string(buf[:n]) != "0123" {
		t.Fatalf("short read: %q %v", buf[:n], err)
	}
}

// With a sojourn function, each batch read reports how long its first
// datagram waited in the socket: at least the time it was left there, at
// most the time from before its sending to after its reading.
func TestRawUDPSojourn(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Duration, 4)
	c := rawUDPConn(pc, func(d time.Duration) { got <- d })
	defer c.Close()
	cl, err := net.Dial("udp", c.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	buf := make([]byte, 100)
	// The kernel turns receive timestamps on for the whole stack from a
	// work queue, some time after the first socket asks: until then it
	// stamps a datagram when it is read. Wait for stamps that are older.
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, err := cl.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := c.ReadFrom(buf); err != nil {
			t.Fatal(err)
		}
		if d := <-got; d >= 20*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the kernel never stamped a datagram on arrival")
		}
	}
	for _, left := range []time.Duration{0, 80 * time.Millisecond} {
		start := time.Now()
		if _, err := cl.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(left) // the datagram waits in the socket: what is measured
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := c.ReadFrom(buf); err != nil {
			t.Fatal(err)
		}
		total := time.Since(start)
		select {
		case d := <-got:
			if d < left || d > total {
				t.Errorf("left %v in the socket (%v from send to read): sojourn %v", left, total, d)
			}
		default:
			t.Fatalf("left %v: no sojourn reported", left)
		}
	}
}
