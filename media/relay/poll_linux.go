package relay

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pollSupported: this platform has the relay pollers.
const pollSupported = true

// Relay pollers: by default a session's four sockets are not read by four
// goroutines parked on Go's netpoller (one goroutine wake-up, one
// scheduler round trip and one extra recvmmsg that finds the socket empty
// per packet) but by one of the relay's pollers: an epoll instance of its
// own holding the sessions' raw descriptors (never in Go's netpoller,
// which would otherwise wake up for every packet too: bindRawPair) and
// one goroutine that waits for that instance to become readable through
// Go's netpoller (through an outer epoll instance registered there), then
// takes the ready sockets from it with a non-blocking epoll_wait, reads
// each with recvmmsg, forwards and sends with sendmmsg, all raw system
// calls, and asks again while one may hold more (round). One wake-up then
// serves every packet that arrived meanwhile, a busy poller wakes up once
// a pace at most (netpollLoop), and the read buffers belong to the
// poller, not to each socket.
// With one P (a sub-CPU quota) there is one poller, parked on Go's
// netpoller as described; with more, half as many pollers as Ps, each
// waiting in its own epoll_wait on a P it keeps (blockingLoop says why
// and what that costs). A session's sockets all go to one poller, in
// turn, so that a session's forwarders are used by one goroutine. The
// inner registrations are level-triggered: a socket with more than
// pollBatch datagrams queued is simply reported again, and the epoll
// instance signals Go's (edge-triggered) netpoller, or wakes the blocking
// wait, for every datagram that arrives.

// procsForPollers is runtime.GOMAXPROCS(0); tests set it to run both modes.
var procsForPollers = func() int { return runtime.GOMAXPROCS(0) }

// pollerCount is how many pollers a relay runs with procs Ps, and whether
// they wait in epoll_wait holding their P (blockingLoop). With one P (a
// CPU quota under one core) the poller must not hold it while it waits: it
// parks on Go's netpoller. With more, half of them (at least one) relay
// media, each on a P of its own while the relay has sessions; the other
// half are left to signalling, the API and the collector.
func pollerCount(procs int) (int, bool) {
	if procs < 2 {
		return 1, false
	}
	return procs / 2, true
}

// pollBatch is the most datagrams read from one socket per recvmmsg, and
// pollEvents the most ready sockets taken per epoll_wait.
const (
	pollBatch  = 8
	pollEvents = 64
)

// pollSet is a relay's pollers, created on first use.
type pollSet struct {
	mu      sync.Mutex
	pollers []*poller
	next    int
}

// poller is one epoll instance and, while it watches any socket, the
// goroutine that serves it.
type poller struct {
	mu     sync.Mutex // held while serving a round of ready sockets, and to add or remove sockets
	inst   *pollInstance
	socks  map[int32]polledSock
	events []unix.EpollEvent
	in     *mmsg
	out    *mmsg
	outFD  int
	served int // datagrams read in the current epoll_wait's sockets
	// For tests: how often the goroutine paced itself, and whether a
	// netpoller-mode one is pacing now (not parked).
	paced   atomic.Int64
	pacing  atomic.Bool
	sendFn  func(uintptr) bool // p.out.send, bound once
	flushFn func(*pair, bool)  // p.flush, bound once
	// blocking: the goroutine waits in epoll_wait itself instead of on
	// Go's netpoller (pollerCount).
	blocking bool
}

// pollInstance is one epoll descriptor and its goroutine: the goroutine
// ends when close stops it, which remove does once the poller watches no
// socket, and then closes done.
type pollInstance struct {
	f    *os.File // netpoller mode: the descriptor as Go's netpoller knows it
	fd   int
	wake int // blocking mode: an eventfd in the epoll set, written to stop the goroutine
	done chan struct{}
}

// polledSock is one watched socket: the session and leg it faces and
// whether it is the leg's RTCP socket.
type polledSock struct {
	s    *Session
	f    *forwarder
	rtcp bool
}

// forSession picks the poller of a new session's sockets.
func (ps *pollSet) forSession() *poller {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.pollers == nil {
		n, blocking := pollerCount(procsForPollers())
		for range n {
			ps.pollers = append(ps.pollers, &poller{socks: map[int32]polledSock{}, events: make([]unix.EpollEvent, pollEvents),
				in: newMmsg(pollBatch, maxPacket), out: newMmsg(pollBatch, 0), blocking: blocking})
		}
	}
	p := ps.pollers[ps.next%len(ps.pollers)]
	ps.next++
	return p
}

// bindRawPair binds a pair's two sockets as raw non-blocking descriptors
// that only a relay poller watches. Why not net.ListenUDP: a call binds
// two pairs, and each *net.UDPConn would be registered with Go's
// netpoller, duplicated out of it and closed again (nine system calls and
// the runtime's bookkeeping a socket instead of three: socket, the
// receive buffer, bind), which was a sixth of the set-up's share of an
// anchored call's CPU.
func bindRawPair(addr netip.Addr, port, buf int) (*pair, error) {
	pr := &pair{addr: addr, port: port, polled: true, fd: [2]int{-1, -1}}
	var sa unix.Sockaddr
	family := unix.AF_INET
	if addr.Is4() {
		sa = &unix.SockaddrInet4{Addr: addr.As4()}
	} else {
		family = unix.AF_INET6
		sa6 := &unix.SockaddrInet6{Addr: addr.As16()}
		if z := addr.Zone(); z != "" {
			ifi, err := net.InterfaceByName(z)
			if err != nil {
				return nil, fmt.Errorf("zone of %v: %w", addr, err)
			}
			sa6.ZoneId = uint32(ifi.Index)
		}
		sa = sa6
	}
	for i, size := range [2]int{buf, buf / 4} {
		fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
		if err != nil {
			closeRaw(pr)
			return nil, fmt.Errorf("socket: %w", err)
		}
		pr.fd[i] = fd
		if family == unix.AF_INET6 {
			_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1) // as net.ListenUDP("udp6")
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, size) // best effort, as in bindPair
		switch sa := sa.(type) {
		case *unix.SockaddrInet4:
			sa.Port = port + i
		case *unix.SockaddrInet6:
			sa.Port = port + i
		}
		if err := unix.Bind(fd, sa); err != nil {
			closeRaw(pr)
			return nil, fmt.Errorf("bind %v: %w", netip.AddrPortFrom(addr, uint16(port+i)), err)
		}
	}
	return pr, nil
}

// closeRaw closes a polled pair's descriptors (once).
func closeRaw(pr *pair) {
	for i, fd := range pr.fd {
		if fd >= 0 {
			_ = unix.Close(fd)
			pr.fd[i] = -1
		}
	}
}

// add watches the sockets of pair pr, read by forwarder f of session s.
func (p *poller) add(s *Session, f *forwarder, pr *pair) error {
	p.mu.Lock()
	err := p.addLocked(s, f, pr)
	var idle *pollInstance
	if err != nil {
		idle = p.stopIfIdle()
	}
	p.mu.Unlock()
	idle.close()
	return err
}

func (p *poller) addLocked(s *Session, f *forwarder, pr *pair) error {
	if p.inst == nil {
		inst, err := p.start()
		if err != nil {
			return err
		}
		p.inst = inst
	}
	for i, fd := range pr.fd {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(p.inst.fd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			if i == 1 {
				_ = unix.EpollCtl(p.inst.fd, unix.EPOLL_CTL_DEL, pr.fd[0], nil)
				delete(p.socks, int32(pr.fd[0]))
			}
			return fmt.Errorf("media/relay: poll socket: %w", err)
		}
		p.socks[int32(fd)] = polledSock{s: s, f: f, rtcp: i == 1}
	}
	return nil
}

// remove stops watching the sockets of pr. When it returns, the poller no
// longer uses them (a round in progress has ended), so they may be closed.
func (p *poller) remove(pr *pair) {
	p.mu.Lock()
	for _, fd := range pr.fd {
		if _, ok := p.socks[int32(fd)]; ok {
			_ = unix.EpollCtl(p.inst.fd, unix.EPOLL_CTL_DEL, fd, nil)
			delete(p.socks, int32(fd))
		}
	}
	idle := p.stopIfIdle()
	p.mu.Unlock()
	idle.close()
}

// stopIfIdle detaches the epoll instance from the poller when no socket
// is watched and returns it; the caller closes it once p.mu is released
// (closing waits for a round in progress, which needs p.mu). Called with
// p.mu held.
func (p *poller) stopIfIdle() *pollInstance {
	if len(p.socks) > 0 || p.inst == nil {
		return nil
	}
	inst := p.inst
	p.inst = nil
	return inst
}

// close stops the instance's goroutine and waits for it to end; the
// descriptors are closed by then. Nil does nothing. Netpoller mode:
// closing the epoll descriptor ends the goroutine's Read with an error.
// Blocking mode: the eventfd wakes the goroutine's epoll_wait, and the
// goroutine closes both descriptors itself once it no longer waits on
// them (a descriptor closed under a waiting epoll_wait would not wake it,
// and its number could be reused meanwhile).
func (inst *pollInstance) close() {
	if inst == nil {
		return
	}
	if inst.f != nil {
		_ = inst.f.Close()
	} else {
		one := [8]byte{1}
		_, _ = unix.Write(inst.wake, one[:])
	}
	<-inst.done
}

// start creates an epoll instance, registers it with Go's netpoller and
// starts its goroutine. Called with p.mu held.
func (p *poller) start() (*pollInstance, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("media/relay: epoll: %w", err)
	}
	if p.sendFn == nil {
		p.sendFn, p.flushFn = p.out.send, p.flush
	}
	if p.blocking {
		return p.startBlocking(fd)
	}
	// The netpoller is told about an outer instance that holds only fd,
	// so that the goroutine can detach fd from it while it paces
	// (netpollLoop).
	outer, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err == nil {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err = unix.EpollCtl(outer, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			_ = unix.Close(outer)
		}
	}
	if err == nil {
		if err = unix.SetNonblock(outer, true); err != nil { // os.NewFile registers only non-blocking descriptors
			_ = unix.Close(outer)
		}
	}
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("media/relay: epoll: %w", err)
	}
	inst := &pollInstance{f: os.NewFile(uintptr(outer), "relay-poller"), fd: fd, done: make(chan struct{})}
	rc, err := inst.f.SyscallConn()
	if err != nil {
		_ = inst.f.Close()
		_ = unix.Close(fd)
		return nil, fmt.Errorf("media/relay: epoll: %w", err)
	}
	go func() {
		defer close(inst.done)
		p.netpollLoop(inst, rc)
		_ = unix.Close(inst.fd)
	}()
	return inst, nil
}

// pace is the shortest time between two wake-ups of a busy poller.
const pace = time.Millisecond

// netpollLoop is a netpoller-mode poller goroutine. Idle, it parks on
// Go's netpoller until a datagram arrives and serves it at once. Busy (a
// wake-up that served datagrams within 2*pace of the previous one), it
// paces itself: it detaches the socket instance from the one the
// netpoller watches, sleeps pace, serves what came meanwhile, and goes on
// so until a round finds nothing; then it attaches it again and parks.
// Why: each wake-up of the process costs a context switch and a pass of
// the scheduler, which at 12 kpps were a third of the relay's CPU, once
// per datagram; paced, one per pace serves every datagram of that time,
// for at most pace of added delay, only while the relay is that busy.
func (p *poller) netpollLoop(inst *pollInstance, rc syscall.RawConn) {
	var last time.Time // the last wake-up that served datagrams
	for {
		var closing bool
		err := rc.Read(func(uintptr) bool { // true: closing, or busy
			var served int
			if served, closing = p.round(inst.fd); closing || served == 0 {
				return closing
			}
			return busyAgain(&last)
		})
		if err != nil || closing || !p.attach(rc, inst, false) {
			return
		}
		p.paced.Add(1)
		p.pacing.Store(true)
		for served := 1; served > 0; {
			time.Sleep(pace)
			if served, closing = p.round(inst.fd); closing {
				return
			}
		}
		last = time.Now()
		if !p.attach(rc, inst, true) {
			return
		}
		p.pacing.Store(false)
	}
}

// attach adds (on) or removes the socket instance of inst to or from the
// instance the netpoller watches; false when that is closed.
func (p *poller) attach(rc syscall.RawConn, inst *pollInstance, on bool) bool {
	var err error
	cerr := rc.Control(func(outer uintptr) {
		if on {
			ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(inst.fd)}
			err = unix.EpollCtl(int(outer), unix.EPOLL_CTL_ADD, inst.fd, &ev)
		} else {
			err = unix.EpollCtl(int(outer), unix.EPOLL_CTL_DEL, inst.fd, nil)
		}
	})
	return cerr == nil && err == nil
}

// startBlocking starts the goroutine of epoll instance fd in blocking
// mode. Called with p.mu held.
func (p *poller) startBlocking(fd int) (*pollInstance, error) {
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err == nil {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}
		if err = unix.EpollCtl(fd, unix.EPOLL_CTL_ADD, wake, &ev); err != nil {
			_ = unix.Close(wake)
		}
	}
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("media/relay: poller wake-up: %w", err)
	}
	inst := &pollInstance{fd: fd, wake: wake, done: make(chan struct{})}
	go func() {
		defer close(inst.done)
		p.blockingLoop(inst)
		_ = unix.Close(inst.wake)
		_ = unix.Close(inst.fd)
	}()
	return inst, nil
}

// blockingLoop is a blocking-mode poller goroutine: it waits for a ready
// socket in epoll_wait as a raw system call, keeping its P (the runtime
// sees it running), serves the sockets that wait reported and waits
// again, and ends when the instance's eventfd is written. The next wait
// returns at once when more is ready (the registrations are
// level-triggered), so a wake-up for one datagram costs three system
// calls (epoll_wait, recvmmsg, sendmmsg), not the five it took when
// round asked the instance again and found nothing at the end.
//
// Why: each park on Go's netpoller costs a pass of the scheduler's idle
// path (look for work on every P, steal, give the P up, poll) and a
// hand-over when a packet wakes it; with 2 Ps the relay's CPU per packet
// at 10 kpps was 10.0 µs against 7.0 µs with 1 (bench/RESULTS.md, issue 16
// item 5). A wait the runtime knows about (syscall.Syscall, entersyscall)
// measured worse still: the P is handed back and forth. Here the thread
// sleeps in the kernel and wakes up running its goroutine.
//
// What it costs the rest of the process: the P, while the relay has
// sessions (pollerCount leaves half of them). The runtime still gets it
// when it needs it: to stop the world, scan this stack or preempt a
// goroutine that ran 10 ms, it signals the thread; the wait returns EINTR
// (the runtime repeats the signal every 100 µs until it is seen) and the
// goroutine yields. A wait also ends every squatWait, quiet or not, and
// the goroutine yields then too, so that whatever was queued on its P
// (a timer, a goroutine it readied) runs within that bound.
func (p *poller) blockingLoop(inst *pollInstance) {
	// Its own events, not p.events: until close has stopped it, an old
	// instance's goroutine may still wait while a new one serves.
	ev := make([]unix.EpollEvent, pollEvents)
	var last time.Time // the last wake-up that served datagrams
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(inst.fd), uintptr(unsafe.Pointer(&ev[0])), uintptr(len(ev)), squatWait, 0, 0)
		if e == unix.EINTR || e == 0 && n == 0 {
			runtime.Gosched()
			continue
		}
		if e != 0 {
			return // (cannot happen: the goroutine owns the descriptor)
		}
		served, more, open := p.serveReady(inst, ev[:n])
		if !open {
			return
		}
		if served == 0 {
			continue
		}
		// Busy: let the next datagrams gather (netpollLoop says why), once
		// what came meanwhile is all served: the wait holds pollEvents
		// sockets, and a backlog of more (1,000 sockets at 50 kpps) must
		// not wait a pace for each of them.
		if busyAgain(&last) && !more {
			p.paced.Add(1)
			ts := unix.NsecToTimespec(int64(pace))
			if _, _, e := unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0); e == unix.EINTR {
				runtime.Gosched()
			}
		}
	}
}

// busyAgain notes a wake-up that served datagrams in *last and reports
// whether it came within 2*pace of the previous one: the poller is busy.
func busyAgain(last *time.Time) bool {
	now := time.Now()
	busy := now.Sub(*last) < 2*pace
	*last = now
	return busy
}

// serveReady serves the sockets one wait of inst reported and returns
// how many datagrams it read; more when some may be left (the wait's
// events array was full, or a socket gave a full batch or an error, as in
// round); open is false when the wait reported inst's eventfd (close). A
// socket removed since the wait is no longer in p.socks and is skipped;
// its descriptor's number, reused by a socket added meanwhile, at worst
// gets an empty read. p.mu is held while serving, so add and remove wait
// for one wait's sockets at most, even when the sockets are never all
// empty.
func (p *poller) serveReady(inst *pollInstance, ev []unix.EpollEvent) (served int, more, open bool) {
	for i := range ev {
		if ev[i].Fd == int32(inst.wake) {
			return 0, false, false
		}
	}
	more = len(ev) == pollEvents
	p.mu.Lock()
	if p.inst == inst { // otherwise being closed: the next wait sees the eventfd
		for i := range ev {
			if ps, ok := p.socks[ev[i].Fd]; ok && p.serve(int(ev[i].Fd), ps) {
				more = true
			}
		}
		served, p.served = p.served, 0
	}
	p.mu.Unlock()
	return served, more, true
}

// squatWait is the longest a blocking-mode poller waits (ms) before it
// yields its P once.
const squatWait = 20

// round serves the ready sockets of the epoll instance epfd and returns
// how many datagrams it read; closing is true when the instance is being
// closed. It is the netpoller-mode goroutine's work (netpollLoop): Go's
// netpoller says only that the instance is readable, so round asks it
// which sockets are, serves them, and asks again only when some may hold
// more (a recvmmsg took a full batch, a socket error, or the events array
// was full). Otherwise the goroutine parks without the epoll_wait that
// would find nothing (a wake-up for one datagram then costs three system
// calls of the relay's, not four): every reported socket was read empty,
// and a datagram that arrives later signals the instance, hence Go's
// edge-triggered registration, even when the instance still lists that
// socket (the kernel's ep_poll_callback wakes the instance's pollers for
// every event, listed or not); one that arrived since has already
// signalled, and the netpoller keeps that for the next wait. p.mu is held
// for one epoll_wait's sockets at a time, so that add and remove (a call
// set-up or Close) wait for at most one such batch, even when the sockets
// are never all empty.
func (p *poller) round(epfd int) (served int, closing bool) {
	for {
		p.mu.Lock()
		if p.inst == nil || p.inst.fd != epfd {
			p.mu.Unlock()
			return served, true // being closed: the next Read sees it
		}
		n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&p.events[0])), uintptr(len(p.events)), 0, 0, 0)
		if e == unix.EINTR {
			p.mu.Unlock()
			continue
		}
		if e != 0 || n == 0 {
			p.mu.Unlock()
			return served, false
		}
		more := int(n) == len(p.events)
		for i := range int(n) {
			if ps, ok := p.socks[p.events[i].Fd]; ok && p.serve(int(p.events[i].Fd), ps) {
				more = true
			}
		}
		served += p.served
		p.served = 0
		p.mu.Unlock()
		if !more {
			return served, false
		}
	}
}

// serve reads up to pollBatch datagrams from a ready socket and relays
// them. It reports whether the socket may hold more: it read a full
// batch, or a socket error that the next epoll_wait reports again.
func (p *poller) serve(fd int, ps polledSock) (more bool) {
	if !p.in.recv(uintptr(fd)) {
		return false // nothing after all
	}
	if p.in.err != nil {
		return true
	}
	forwardIn(ps.f, ps.rtcp, ps.s.r.nowNs(), p.in, p.out, p.flushFn)
	p.served += p.in.n
	return p.in.n == pollBatch
}

// flush sends out's queue from the pair's socket (RTP or RTCP as the
// round's socket): raw sendmmsg, never waiting; what the socket cannot
// take now (EAGAIN: its send buffer is full) is lost, as UDP may lose it.
func (p *poller) flush(from *pair, rtcp bool) {
	p.outFD = from.fd[0]
	if rtcp {
		p.outFD = from.fd[1]
	}
	for p.out.off = 0; p.out.off < p.out.n; {
		if !p.sendFn(uintptr(p.outFD)) {
			break
		}
	}
	p.out.n = 0
}

// sendRTP sends one datagram from the pair's RTP socket without waiting
// (music on hold; the forwarding path batches its own sends).
func (pr *pair) sendRTP(b []byte, dst netip.AddrPort) {
	if !pr.polled {
		_, _ = pr.rtp.WriteToUDPAddrPort(b, dst)
		return
	}
	var sa unix.Sockaddr // in the socket's family, as setDest does
	if a := dst.Addr().Unmap(); pr.addr.Unmap().Is4() && a.Is4() {
		sa = &unix.SockaddrInet4{Port: int(dst.Port()), Addr: a.As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: int(dst.Port()), Addr: dst.Addr().As16()}
	}
	_ = unix.Sendto(pr.fd[0], b, unix.MSG_DONTWAIT, sa) // UDP: a full buffer loses the packet
}
