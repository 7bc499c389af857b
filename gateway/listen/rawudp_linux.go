package listen

import (
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawUDP is a UDP listener whose ReadFrom and WriteTo make their
// recvfrom and sendto as raw system calls on the non-blocking socket,
// waiting for readiness through the runtime's poller as net does.
//
// Why: net's calls go through the runtime's syscall entry and exit, which
// marks the goroutine's P as in a system call. Under a CPU quota (the
// box's cgroup, and the benchmarks' 0.2-CPU cap) the runtime's monitor
// thread (sysmon) then keeps finding a P "blocked in a system call" —
// a thread that the quota froze mid-call — takes it away, and each time
// goes back to polling every 20 µs: at 2,500 registrations/s, sysmon and
// the context switches it causes were a third of outpostd's CPU (perf,
// bench/RESULTS.md). A non-blocking recvfrom or sendto on a UDP socket
// never blocks, so nothing is gained by handing the P over.
//
// Reads take up to readBatchLen datagrams per recvmmsg and hand them out
// one per ReadFrom: under load (and always under a CPU quota, which lets
// the socket fill while the process is frozen) the queue holds many, and
// a system call per datagram plus the runtime's poller were a tenth of a
// registration's CPU at 4000/s (perf, bench/RESULTS.md issue 16 item 2).
//
// With a sojourn function (Options.Sojourn) the socket timestamps what it
// receives (SO_TIMESTAMPNS) and each recvmmsg reports how long the first
// datagram it took, the oldest in the queue, waited in the socket: the
// queue's sojourn time, which nothing after the read can see. Only slot 0
// has a control buffer (the kernel marks the others MSG_CTRUNC). The
// kernel turns stamping on for the stack from a work queue shortly after
// the first socket asks; datagrams read before that are stamped at the
// read (sojourn 0).
type rawUDP struct {
	*net.UDPConn
	rc  syscall.RawConn
	in6 bool // an AF_INET6 socket (dual stack for a wildcard address): IPv4 peers are v4-mapped

	rmu     sync.Mutex // one reader at a time (sipgo has one per socket)
	batch   *readBatch // made at the first read, sized to the reader's buffer
	sources srcCache   // the sources read lately (srcaddr.go); under rmu
	rfunc   func(fd uintptr) bool
	sojourn func(time.Duration) // nil = no timestamps

	// Sends use fd directly, without net's write lock: that lock lets one
	// writer at a time through, and with a goroutine per call answering on
	// one socket the writers queued on it and were handed the lock one by
	// one through the scheduler (11 s of waiting in 3 s of a 1,500 calls/s
	// run, half the scheduler's delay: go tool trace, bench/RESULTS.md
	// issue 16 item 1). The kernel takes concurrent sendto on a UDP socket.
	// wmu is held shared by a send and exclusively by Close, so no send
	// uses fd once it is closed (and maybe reused).
	fd     int
	wmu    sync.RWMutex
	closed bool
}

// readBatch is the recvmmsg vector of a socket and what the last call
// returned: datagrams next..got-1 are still to be handed out.
type readBatch struct {
	hdrs      [readBatchLen]unix.Mmsghdr
	iovs      [readBatchLen]unix.Iovec
	names     [readBatchLen]syscall.RawSockaddrAny
	bufs      [readBatchLen][]byte
	ctl       [64]byte // slot 0's control messages (its timestamp)
	next, got int
	err       syscall.Errno
}

// newReadBatch returns a vector whose slots take datagrams of up to size
// bytes.
func newReadBatch(size int) *readBatch {
	rb := &readBatch{}
	for i := range rb.hdrs {
		rb.bufs[i] = make([]byte, size)
		rb.iovs[i].Base = &rb.bufs[i][0]
		rb.iovs[i].SetLen(size)
		rb.hdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&rb.names[i]))
		rb.hdrs[i].Hdr.Iov = &rb.iovs[i]
		rb.hdrs[i].Hdr.SetIovlen(1)
	}
	return rb
}

// readBatchLen is the most datagrams one recvmmsg takes: beyond 16 the
// system call's share per datagram no longer shows, and each slot is a
// reader-sized buffer (sipgo's is 32 KiB; untouched pages cost no memory).
const readBatchLen = 16

// rawUDPConn wraps pc when it is a *net.UDPConn whose descriptor can be
// reached; otherwise it returns pc. sojourn, when not nil, is told the
// sojourn time of the socket's queue at each batch read.
func rawUDPConn(pc net.PacketConn, sojourn func(time.Duration)) net.PacketConn {
	u, ok := pc.(*net.UDPConn)
	if !ok {
		return pc
	}
	rc, err := u.SyscallConn()
	if err != nil {
		return pc
	}
	c := &rawUDP{UDPConn: u, rc: rc}
	var family = -1
	if err := rc.Control(func(fd uintptr) {
		c.fd = int(fd)
		if sa, err := syscall.Getsockname(int(fd)); err == nil {
			switch sa.(type) {
			case *syscall.SockaddrInet4:
				family = syscall.AF_INET
			case *syscall.SockaddrInet6:
				family = syscall.AF_INET6
			}
		}
	}); err != nil || family < 0 {
		return pc
	}
	c.in6 = family == syscall.AF_INET6
	c.rfunc = c.recv
	if sojourn != nil {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
		}); err == nil && serr == nil {
			c.sojourn = sojourn
		}
	}
	return c
}

func (c *rawUDP) recv(fd uintptr) bool {
	rb := c.batch
	for i := range rb.hdrs {
		rb.hdrs[i].Hdr.Namelen = syscall.SizeofSockaddrAny // the kernel wrote the last source's length
	}
	if c.sojourn != nil {
		rb.hdrs[0].Hdr.Control = &rb.ctl[0]
		rb.hdrs[0].Hdr.SetControllen(len(rb.ctl))
	}
	n, _, e := syscall.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&rb.hdrs[0])), readBatchLen, unix.MSG_DONTWAIT, 0, 0)
	if e == syscall.EAGAIN || e == syscall.EINTR {
		return false // wait until readable (EINTR: try again after the wait, which returns at once)
	}
	rb.next, rb.got, rb.err = 0, int(n), e
	if e != 0 {
		rb.got = 0
	}
	return true
}

// ReadFrom reads one datagram: the next of the last batch, or the first
// of a new one.
func (c *rawUDP) ReadFrom(b []byte) (int, net.Addr, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	rb := c.batch
	if rb == nil || rb.next >= rb.got && len(rb.bufs[0]) < len(b) {
		rb = newReadBatch(max(len(b), 1))
		c.batch = rb
	}
	if rb.next >= rb.got {
		if err := c.rc.Read(c.rfunc); err != nil {
			return 0, nil, &net.OpError{Op: "read", Net: "udp", Source: c.LocalAddr(), Err: err}
		}
		if rb.err != 0 {
			return 0, nil, &net.OpError{Op: "read", Net: "udp", Source: c.LocalAddr(), Err: rb.err}
		}
		if c.sojourn != nil && rb.got > 0 {
			if at, ok := rb.received0(); ok {
				c.sojourn(max(time.Since(at), 0))
			}
		}
	}
	i := rb.next
	rb.next++
	n := copy(b, rb.bufs[i][:rb.hdrs[i].Len])
	return n, c.sources.lookup(&rb.names[i]), nil
}

// received0 is when the kernel received the batch's first datagram (its
// SCM_TIMESTAMPNS), read without allocating.
func (rb *readBatch) received0() (time.Time, bool) {
	clen := int(rb.hdrs[0].Hdr.Controllen)
	hlen := unix.CmsgLen(0)
	if clen < unix.CmsgLen(int(unsafe.Sizeof(unix.Timespec{}))) || clen > len(rb.ctl) {
		return time.Time{}, false
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&rb.ctl[0]))
	if h.Level != syscall.SOL_SOCKET || h.Type != syscall.SCM_TIMESTAMPNS {
		return time.Time{}, false
	}
	ts := (*unix.Timespec)(unsafe.Pointer(&rb.ctl[hlen]))
	return time.Unix(int64(ts.Sec), int64(ts.Nsec)), true
}

// WriteTo sends one datagram to addr (a *net.UDPAddr or a SourceAddr;
// anything else goes through net).
func (c *rawUDP) WriteTo(b []byte, addr net.Addr) (int, error) {
	ua := UDPAddrOf(addr)
	if ua == nil {
		return c.UDPConn.WriteTo(b, addr)
	}
	var sa syscall.RawSockaddrAny
	salen, ok := udpToSockaddr(ua, &sa, c.in6)
	if !ok {
		return c.UDPConn.WriteTo(b, addr)
	}
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	var n uintptr
	var errno syscall.Errno
	c.wmu.RLock()
	closed := c.closed
	if !closed {
		n, errno = sendto(uintptr(c.fd), p, len(b), &sa, salen)
	}
	c.wmu.RUnlock()
	var err error
	if closed || errno == syscall.EAGAIN || errno == syscall.EINTR {
		// closed, or a full send buffer: net says so, or waits for room
		n, errno, err = c.sendWait(p, len(b), sa, salen)
	}
	if err == nil && errno != 0 {
		err = errno
	}
	if err != nil {
		return 0, &net.OpError{Op: "write", Net: "udp", Source: c.LocalAddr(), Addr: addr, Err: err}
	}
	return int(n), nil
}

func sendto(fd uintptr, p unsafe.Pointer, n int, sa *syscall.RawSockaddrAny, salen uintptr) (uintptr, syscall.Errno) {
	r, _, errno := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(p), uintptr(n), 0, uintptr(unsafe.Pointer(sa)), salen)
	return r, errno
}

// sendWait sends through net's poller, which waits until the socket can
// take the datagram. Apart from WriteTo, so that the closure it needs
// (and the address it captures) is only made on this path: the usual
// send allocates nothing.
func (c *rawUDP) sendWait(p unsafe.Pointer, l int, sa syscall.RawSockaddrAny, salen uintptr) (n uintptr, errno syscall.Errno, err error) {
	err = c.rc.Write(func(fd uintptr) bool {
		n, errno = sendto(fd, p, l, &sa, salen)
		return errno != syscall.EAGAIN && errno != syscall.EINTR
	})
	return n, errno, err
}

// Close closes the socket once no send is using its descriptor.
func (c *rawUDP) Close() error {
	c.wmu.Lock()
	c.closed = true
	c.wmu.Unlock()
	return c.UDPConn.Close()
}

// sockaddrToUDP converts a received IPv4 or IPv6 source address (the
// source cache keeps the result: srcaddr_linux.go).
func sockaddrToUDP(rsa *syscall.RawSockaddrAny) net.UDPAddr {
	if rsa.Addr.Family == syscall.AF_INET {
		sa := (*syscall.RawSockaddrInet4)(unsafe.Pointer(rsa))
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		return net.UDPAddr{IP: net.IPv4(sa.Addr[0], sa.Addr[1], sa.Addr[2], sa.Addr[3]), Port: int(p[0])<<8 | int(p[1])}
	}
	sa := (*syscall.RawSockaddrInet6)(unsafe.Pointer(rsa))
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	ua := net.UDPAddr{IP: net.IP(append([]byte(nil), sa.Addr[:]...)), Port: int(p[0])<<8 | int(p[1])}
	if sa.Scope_id != 0 {
		if ifi, err := net.InterfaceByIndex(int(sa.Scope_id)); err == nil {
			ua.Zone = ifi.Name
		} else {
			ua.Zone = strconv.FormatUint(uint64(sa.Scope_id), 10)
		}
	}
	return ua
}

// udpToSockaddr fills sa with addr for sendto on a socket of family
// AF_INET6 (in6) or AF_INET; false when addr cannot be one (then net
// handles it, and reports why).
func udpToSockaddr(addr *net.UDPAddr, sa *syscall.RawSockaddrAny, in6 bool) (uintptr, bool) {
	if addr.Port < 0 || addr.Port > 0xffff {
		return 0, false
	}
	if ip4 := addr.IP.To4(); ip4 != nil && !in6 {
		s := (*syscall.RawSockaddrInet4)(unsafe.Pointer(sa))
		s.Family = syscall.AF_INET
		p := (*[2]byte)(unsafe.Pointer(&s.Port))
		p[0], p[1] = byte(addr.Port>>8), byte(addr.Port)
		copy(s.Addr[:], ip4)
		return syscall.SizeofSockaddrInet4, true
	}
	if in6 && addr.Zone == "" && (len(addr.IP) == net.IPv4len || len(addr.IP) == net.IPv6len) {
		s := (*syscall.RawSockaddrInet6)(unsafe.Pointer(sa))
		s.Family = syscall.AF_INET6
		p := (*[2]byte)(unsafe.Pointer(&s.Port))
		p[0], p[1] = byte(addr.Port>>8), byte(addr.Port)
		copy(s.Addr[:], addr.IP.To16()) // an IPv4 peer as ::ffff:a.b.c.d
		return syscall.SizeofSockaddrInet6, true
	}
	return 0, false
}
