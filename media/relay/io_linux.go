package relay

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// batchSupported: this platform has the recvmmsg/sendmmsg reader.
const batchSupported = true

// mmsg is a reusable recvmmsg/sendmmsg vector of up to n datagrams, with
// its buffers, iovecs and socket addresses allocated once per reader, so
// that batched I/O allocates nothing per packet (unlike x/net's
// ReadBatch, which allocates a net.Addr per message).
type mmsg struct {
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // large enough for either family
	bufs  [][]byte
	// results of the last syscall, set inside the RawConn callbacks
	n   int
	off int
	err error
}

func newMmsg(n, size int) *mmsg {
	m := &mmsg{hdrs: make([]unix.Mmsghdr, n), iovs: make([]unix.Iovec, n), names: make([]unix.RawSockaddrInet6, n), bufs: make([][]byte, n)}
	for i := range n {
		if size > 0 {
			m.bufs[i] = make([]byte, size, size+srtpSlack) // room to encrypt in place
		}
		m.hdrs[i].Hdr.Iov = &m.iovs[i]
		m.hdrs[i].Hdr.SetIovlen(1)
		m.hdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&m.names[i]))
	}
	return m
}

// The system calls are made with RawSyscall6, not Syscall6: with
// MSG_DONTWAIT on a non-blocking socket they never block, so telling the
// scheduler (entersyscall/exitsyscall, which also wakes a parked sysmon
// thread: a futex wake and two context switches) is pure cost: 9–17 % of
// bench/relayd's CPU at 10 kpps (bench/RESULTS.md, issue 16 item 5).

// recv is the RawConn.Read callback: one non-blocking recvmmsg. It returns
// false on EAGAIN so that the runtime parks the goroutine on the netpoller.
func (m *mmsg) recv(fd uintptr) bool {
	for i := range m.hdrs {
		m.iovs[i].Base = &m.bufs[i][0]
		m.iovs[i].SetLen(len(m.bufs[i]))
		m.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		m.hdrs[i].Len = 0
	}
	n, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&m.hdrs[0])), uintptr(len(m.hdrs)), unix.MSG_DONTWAIT, 0, 0)
	for e == unix.EINTR { // parking now could miss data already queued (edge-triggered poller)
		n, _, e = unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&m.hdrs[0])), uintptr(len(m.hdrs)), unix.MSG_DONTWAIT, 0, 0)
	}
	if e == unix.EAGAIN {
		return false
	}
	m.n, m.err = int(n), nil
	if e != 0 {
		m.n, m.err = 0, e
	}
	return true
}

// send is the RawConn.Write callback: sendmmsg of hdrs[off:n].
func (m *mmsg) send(fd uintptr) bool {
	n, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&m.hdrs[m.off])), uintptr(m.n-m.off), unix.MSG_DONTWAIT, 0, 0)
	if e == unix.EINTR {
		return true // m.off unchanged: the caller's loop sends again
	}
	if e == unix.EAGAIN {
		return false
	}
	if e != 0 {
		m.err = e
		m.off++ // skip the datagram that failed (UDP: it is lost)
		return true
	}
	m.off += int(n)
	return true
}

// source decodes the sender address of datagram i.
func (m *mmsg) source(i int) netip.AddrPort {
	sa := &m.names[i]
	switch sa.Family {
	case unix.AF_INET:
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&s4.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom4(s4.Addr), port)
	case unix.AF_INET6:
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port)
	}
	return netip.AddrPort{}
}

// setDest fills datagram i of a send vector with payload p to dst, for a
// socket of the family of v6.
func (m *mmsg) setDest(i int, p []byte, dst netip.AddrPort, v6 bool) {
	m.iovs[i].Base = &p[0]
	m.iovs[i].SetLen(len(p))
	sa := &m.names[i]
	if v6 {
		*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: dst.Addr().As16()}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], dst.Port())
		m.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		return
	}
	s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
	*s4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: dst.Addr().Unmap().As4()}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&s4.Port))[:], dst.Port())
	m.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
}

// forwardIn forwards the in.n datagrams just read from a socket facing
// f's leg (its RTCP socket when rtcp) and queues the relayed ones in out;
// flush(from, rtcp) must send out's queue from that pair's RTP or RTCP
// socket and empty it.
// It is called whenever the sending pair changes and once at the end, so
// that a run of packets to one socket is one sendmmsg.
func forwardIn(f *forwarder, rtcp bool, now int64, in, out *mmsg, flush func(from *pair, rtcp bool)) {
	var cur *pair
	for i := 0; i < in.n; i++ {
		p := in.bufs[i][:in.hdrs[i].Len]
		var to *pair
		var dst netip.AddrPort
		var ok bool
		if rtcp {
			p, to, dst, ok = f.rtcpPacket(p, in.source(i))
		} else {
			p, to, dst, ok = f.rtp(p, in.source(i), now)
		}
		if !ok {
			continue
		}
		if to != cur && out.n > 0 {
			flush(cur, rtcp)
		}
		cur = to
		out.setDest(out.n, p, dst, dst.Addr().Is6() && !dst.Addr().Is4In6())
		out.n++
	}
	if out.n > 0 {
		flush(cur, rtcp)
	}
}

// readBatched is the goroutine reader of a session's socket (RTP or
// RTCP) on Linux when Config.Batch > 1: it reads up to n datagrams per
// system call and parks on the Go netpoller when the socket is empty.
// (By default a session's sockets are served by the relay's pollers,
// poll_linux.go, instead.)
func (s *Session) readBatched(f *forwarder, conn *net.UDPConn, rtcp bool, n int) {
	defer s.wg.Done()
	rc, err := conn.SyscallConn()
	if err != nil {
		return
	}
	in := newMmsg(n, maxPacket)
	out := newMmsg(n, 0)
	recvFn, sendFn := in.recv, out.send // bound once: no closure per call
	flush := func(from *pair, rtcp bool) {
		w := from.rawRTP
		if rtcp {
			w = from.rawRTCP
		}
		for out.off = 0; out.off < out.n; {
			if err := w.Write(sendFn); err != nil {
				break // socket closed
			}
		}
		out.n = 0
	}
	for {
		if err := rc.Read(recvFn); err != nil {
			return // closed
		}
		if in.err != nil {
			if errors.Is(in.err, net.ErrClosed) {
				return
			}
			continue
		}
		forwardIn(f, rtcp, s.r.nowNs(), in, out, flush)
	}
}
