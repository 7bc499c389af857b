package relay

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
)

// ErrNoPorts is returned when no RTP/RTCP pair of the range can be bound.
var ErrNoPorts = errors.New("media/relay: no free RTP/RTCP port pair")

// pair is one bound RTP/RTCP socket pair on a local address: either two
// *net.UDPConn in Go's netpoller (rtp, rtcp, with their RawConns for the
// goroutine readers), or, when polled, two raw descriptors (fd[0] RTP,
// fd[1] RTCP) that only a relay poller watches (poll_linux.go).
type pair struct {
	addr            netip.Addr
	port            int // RTP; RTCP is port+1
	rtp, rtcp       *net.UDPConn
	rawRTP, rawRTCP syscall.RawConn
	polled          bool
	fd              [2]int
}

type portKey struct {
	addr netip.Addr
	port int
}

// portPool hands out even/odd port pairs from a range, next-fit: the
// cursor moves on after each allocation, so a just-released pair is
// reused only after the rest of the range (stale packets of the previous
// call, if any, find a closed socket or a locked latch). Ports bound by
// someone else are skipped.
type portPool struct {
	mu       sync.Mutex
	min, max int
	next     int
	inUse    map[portKey]struct{}
	bufSize  int
}

func newPortPool(min, max, buf int) *portPool {
	return &portPool{min: min, max: max, next: min, inUse: map[portKey]struct{}{}, bufSize: buf}
}

// setRange changes the range for later allocations; pairs in use outside
// it stay valid until released.
func (p *portPool) setRange(min, max, buf int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.min, p.max, p.bufSize = min, max, buf
	if p.next < min || p.next+1 > max {
		p.next = min
	}
}

// inUseCount returns the number of ports (RTP and RTCP) bound.
func (p *portPool) inUseCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return 2 * len(p.inUse)
}

// allocate binds a free pair on addr; raw binds raw descriptors for a
// relay poller (bindRawPair) instead of *net.UDPConns.
func (p *portPool) allocate(addr netip.Addr, raw bool) (*pair, error) {
	if !addr.IsValid() {
		return nil, fmt.Errorf("media/relay: allocate ports: no local address")
	}
	addr = addr.Unmap()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := (p.max - p.min + 1) / 2
	var lastErr error
	for i := 0; i < n; i++ {
		port := p.next
		p.next += 2
		if p.next+1 > p.max {
			p.next = p.min
		}
		k := portKey{addr, port}
		if _, busy := p.inUse[k]; busy {
			continue
		}
		bind := bindPair
		if raw {
			bind = bindRawPair
		}
		pr, err := bind(addr, port, p.bufSize)
		if err != nil {
			lastErr = err // taken by another process: try the next pair
			continue
		}
		p.inUse[k] = struct{}{}
		return pr, nil
	}
	if lastErr != nil {
		return nil, fmt.Errorf("%w on %v in %d-%d (last: %w)", ErrNoPorts, addr, p.min, p.max, lastErr)
	}
	return nil, fmt.Errorf("%w on %v in %d-%d", ErrNoPorts, addr, p.min, p.max)
}

// release closes the pair's sockets (if still open) and returns its ports.
func (p *portPool) release(pr *pair) {
	pr.close()
	p.mu.Lock()
	delete(p.inUse, portKey{pr.addr, pr.port})
	p.mu.Unlock()
}

func bindPair(addr netip.Addr, port, buf int) (*pair, error) {
	network := "udp4"
	if addr.Is6() {
		network = "udp6"
	}
	rtp, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(port))))
	if err != nil {
		return nil, err
	}
	rtcp, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(port+1))))
	if err != nil {
		_ = rtp.Close()
		return nil, err
	}
	// Best effort: a smaller buffer than asked only costs burst tolerance.
	_ = rtp.SetReadBuffer(buf)
	_ = rtcp.SetReadBuffer(buf / 4)
	pr := &pair{addr: addr, port: port, rtp: rtp, rtcp: rtcp}
	var e1, e2 error
	pr.rawRTP, e1 = rtp.SyscallConn()
	pr.rawRTCP, e2 = rtcp.SyscallConn()
	if err := errors.Join(e1, e2); err != nil {
		pr.close()
		return nil, err
	}
	return pr, nil
}

// close closes the pair's sockets; closing twice is harmless (the
// descriptors of a polled pair are closed once).
func (pr *pair) close() {
	if pr.polled {
		closeRaw(pr)
		return
	}
	_ = pr.rtp.Close()
	_ = pr.rtcp.Close()
}
