package relay

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"
)

// pollersRunning counts the relay's pollers that have an epoll instance
// (and so a goroutine).
func pollersRunning(r *Relay) int {
	r.polls.mu.Lock()
	list := r.polls.pollers
	r.polls.mu.Unlock()
	n := 0
	for _, p := range list {
		p.mu.Lock()
		if p.inst != nil {
			n++
		}
		p.mu.Unlock()
	}
	return n
}

// Many sessions on the pollers: a burst on every socket at once is
// relayed both ways (rounds that serve many ready sockets), closing the
// sessions while packets still arrive is clean (run with -race), the
// pollers' goroutines end once no socket is left, and a new session
// starts them again.
func TestPollerSessions(t *testing.T) { forEachPollerMode(t, testPollerSessions) }

// forEachPollerMode runs test with the pollers of one P (parked on Go's
// netpoller) and of two and three (blocking in their own epoll_wait),
// whatever this machine's GOMAXPROCS.
func forEachPollerMode(t *testing.T, test func(*testing.T)) {
	for _, procs := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			saved := procsForPollers
			procsForPollers = func() int { return procs }
			t.Cleanup(func() { procsForPollers = saved })
			test(t)
		})
	}
}

func testPollerSessions(t *testing.T) {
	r := newRelay(t, Config{})
	const n = 40
	sessions := make([]*Session, n)
	pas, pbs := make([]*phone, n), make([]*phone, n)
	for i := range n {
		pas[i], pbs[i] = newPhone(t, phoneA), newPhone(t, phoneB)
		s, toBoxA, toBoxB := call(t, r, pas[i], pbs[i], []string{"0 PCMU"}, []string{"0 PCMU"})
		sessions[i] = s
		if !s.pairs[A].polled || !s.pairs[B].polled {
			t.Fatal("session sockets are not polled by default")
		}
		pas[i].send(toBoxA, 0, []byte{byte(i)})
		pbs[i].send(toBoxB, 0, []byte{byte(i)})
	}
	if got := pollersRunning(r); got == 0 {
		t.Fatal("no poller running with sessions up")
	}
	for i := range n {
		if p := pbs[i].recv(); len(p.payload) != 1 || p.payload[0] != byte(i) {
			t.Fatalf("session %d: B got %v", i, p.payload)
		}
		if p := pas[i].recv(); len(p.payload) != 1 || p.payload[0] != byte(i) {
			t.Fatalf("session %d: A got %v", i, p.payload)
		}
	}
	// Close every session while A keeps sending.
	stop := make(chan struct{})
	var senders sync.WaitGroup
	for i := range n {
		dst := netip.AddrPortFrom(sessions[i].pairs[A].addr, uint16(sessions[i].pairs[A].port))
		senders.Go(func() {
			pkt := pas[i].packet(0, make([]byte, 160))
			for k := 0; k < 2000; k++ { // bounded
				select {
				case <-stop:
					return
				default:
				}
				_, _ = pas[i].rtp.WriteToUDPAddrPort(pkt, dst)
			}
		})
	}
	var closers sync.WaitGroup
	for _, s := range sessions {
		closers.Go(func() { s.Close() })
	}
	closers.Wait()
	close(stop)
	senders.Wait()
	if got := pollersRunning(r); got != 0 {
		t.Errorf("%d pollers still running with no session", got)
	}
	if got := r.PortsInUse(); got != 0 {
		t.Errorf("%d ports in use after Close", got)
	}
	// A new session starts a poller again and relays.
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	_, toBoxA, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
	pa.send(toBoxA, 0, []byte{7})
	if p, err := pb.tryRecv(5 * time.Second); err != nil || len(p.payload) != 1 || p.payload[0] != 7 {
		t.Fatalf("after restart: %v %v", p.payload, err)
	}
}

// Closing a poller's last session while its socket never drains (a sender
// keeps it busy) returns: the epoll instance is closed outside the lock
// that a round in progress waits for, and a round holds that lock for one
// epoll_wait's sockets only. Repeated, since the bad interleaving is a race.
func TestPollerCloseWhileBusy(t *testing.T) { forEachPollerMode(t, testPollerCloseWhileBusy) }

func testPollerCloseWhileBusy(t *testing.T) {
	r := newRelay(t, Config{})
	for round := range 20 {
		pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
		s, toBoxA, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
		pa.send(toBoxA, 0, make([]byte, 160))
		waitFor(t, "the first packet relayed", func() bool { return s.Stats()[A].Relayed >= 1 })
		stop := make(chan struct{})
		var sender sync.WaitGroup
		sender.Go(func() {
			pkt := pa.packet(0, make([]byte, 160))
			for range 200000 { // bounded
				select {
				case <-stop:
					return
				default:
				}
				_, _ = pa.rtp.WriteToUDPAddrPort(pkt, toBoxA)
			}
		})
		closed := make(chan struct{})
		go func() { s.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Close did not return within 10 s while the socket was busy", round)
		}
		close(stop)
		sender.Wait()
		if got := pollersRunning(r); got != 0 {
			t.Fatalf("round %d: %d pollers running after the last Close", round, got)
		}
	}
}

// A blocking-mode poller keeps its P while it waits, but the rest of the
// process does not stall on it: with two Ps and the poller holding one, the
// collector stops the world, timers fire and other goroutines run, again
// and again; and the poller still relays afterwards.
func TestBlockingPollerYields(t *testing.T) {
	saved := procsForPollers
	procsForPollers = func() int { return 2 }
	t.Cleanup(func() { procsForPollers = saved })
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))

	r := newRelay(t, Config{})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	s, toBoxA, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
	defer s.Close()
	if pollersRunning(r) != 1 || !r.polls.pollers[0].blocking {
		t.Fatal("no blocking poller running")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 5 {
			runtime.GC()
			fired := make(chan struct{})
			time.AfterFunc(time.Millisecond, func() { close(fired) })
			<-fired
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() { runtime.Gosched() })
			}
			wg.Wait()
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("collections, timers and goroutines stalled behind the blocking poller")
	}
	pa.send(toBoxA, 0, []byte{9})
	if p, err := pb.tryRecv(5 * time.Second); err != nil || len(p.payload) != 1 || p.payload[0] != 9 {
		t.Fatalf("relay after the collections: %v %v", p.payload, err)
	}
}

// A poller that meets more than one read takes (a socket holding several
// batches, more ready sockets than one epoll_wait returns) relays all of
// it without waiting for a later datagram to wake it again, and without
// pacing itself before it is all served (at most once, after): the
// backlog queues while the test holds the poller's lock, so that its next
// round meets all of it at once.
func TestPollerDrainsBacklog(t *testing.T) { forEachPollerMode(t, testPollerDrainsBacklog) }

func testPollerDrainsBacklog(t *testing.T) {
	r := newRelay(t, Config{})
	const n, burst = 3*pollEvents + 1, 4*pollBatch + 1
	pas, pbs, toBox := make([]*phone, n), make([]*phone, n), make([]netip.AddrPort, n)
	for i := range n {
		pas[i], pbs[i] = newPhone(t, phoneA), newPhone(t, phoneB)
		_, toBox[i], _ = call(t, r, pas[i], pbs[i], []string{"0 PCMU"}, []string{"0 PCMU"})
	}
	if len(r.polls.pollers) != 1 {
		t.Fatalf("%d pollers, want 1", len(r.polls.pollers))
	}
	p := r.polls.pollers[0]
	paced := p.paced.Load()
	p.mu.Lock()
	for k := range burst {
		pas[0].send(toBox[0], 0, []byte{byte(k)})
	}
	p.mu.Unlock()
	for k := range burst {
		if got := pbs[0].recv(); len(got.payload) != 1 || got.payload[0] != byte(k) {
			t.Fatalf("burst datagram %d: B got %v", k, got.payload)
		}
	}
	if d := p.paced.Load() - paced; d > 1 {
		t.Errorf("the poller paced itself %d times serving one socket's backlog", d)
	}
	waitFor(t, "the poller to stop pacing", func() bool { return !p.pacing.Load() })
	paced = p.paced.Load()
	p.mu.Lock()
	for i := range n {
		pas[i].send(toBox[i], 0, []byte{byte(i)})
	}
	p.mu.Unlock()
	for i := range n {
		if got := pbs[i].recv(); len(got.payload) != 1 || got.payload[0] != byte(i) {
			t.Fatalf("session %d: B got %v", i, got.payload)
		}
	}
	// Serving the backlog ends with one pace; on a loaded machine (CI's
	// parallel packages) a second round may find the last sockets' reads
	// still in flight and pace once more. Without the backlog rule the
	// poller paced 3-4 times here.
	if d := p.paced.Load() - paced; d > 2 {
		t.Errorf("the poller paced itself %d times serving %d sockets' backlog", d, n)
	}
}

// A stream of more than a datagram a pace makes the poller pace itself
// (one wake-up a pace, not one a datagram); every datagram is relayed, in
// order, and once the stream stops the poller parks again: a lone datagram
// afterwards is relayed as well.
func TestPollerPaces(t *testing.T) { forEachPollerMode(t, testPollerPaces) }

func testPollerPaces(t *testing.T) {
	r := newRelay(t, Config{})
	pa, pb := newPhone(t, phoneA), newPhone(t, phoneB)
	_, toBox, _ := call(t, r, pa, pb, []string{"0 PCMU"}, []string{"0 PCMU"})
	p := r.polls.pollers[0]
	// Whether wake-ups come close enough together to pace is up to the
	// scheduler (with -race on a loaded machine a stream may be served in
	// one late wake-up): a few streams, not one.
	for attempt := 0; attempt < 5 && p.paced.Load() == 0; attempt++ {
		const groups, per = 20, 10
		for g := range groups {
			for k := range per {
				pa.send(toBox, 0, []byte{byte(g), byte(k)})
			}
			for t0 := time.Now(); time.Since(t0) < pace/4; { // a spin, not a timer: timers are coarser than pace
			}
		}
		for g := range groups {
			for k := range per {
				if got := pb.recv(); len(got.payload) != 2 || got.payload[0] != byte(g) || got.payload[1] != byte(k) {
					t.Fatalf("datagram %d.%d: B got %v", g, k, got.payload)
				}
			}
		}
	}
	if p.paced.Load() == 0 {
		t.Error("the poller never paced itself through five streams of ten datagrams every quarter pace")
	}
	waitFor(t, "the poller to stop pacing", func() bool { return !p.pacing.Load() })
	pa.send(toBox, 0, []byte{0xEE})
	if got := pb.recv(); len(got.payload) != 1 || got.payload[0] != 0xEE {
		t.Fatalf("after the stream: B got %v", got.payload)
	}
}
