package relay

import (
	"errors"
	"net"
)

// maxPacket is the largest datagram read; larger ones are truncated by
// the kernel and then dropped as malformed or relayed truncated (RTCP).
const maxPacket = 2048

// readRTP relays RTP arriving on p's RTP socket (read by forwarder f)
// until the socket is closed: the portable reader (Linux uses
// readBatched). One goroutine per socket: the Go netpoller multiplexes
// them, ReadFromUDPAddrPort and WriteToUDPAddrPort do not allocate.
func (s *Session) readRTP(f *forwarder, p *pair) {
	defer s.wg.Done()
	buf := make([]byte, maxPacket, maxPacket+srtpSlack)
	for {
		n, src, err := p.rtp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. a truncated datagram; the socket is fine
		}
		if out, to, dst, ok := f.rtp(buf[:n], src, s.r.nowNs()); ok {
			_, _ = to.rtp.WriteToUDPAddrPort(out, dst) // UDP: a failed send is a lost packet
		}
	}
}

// readRTCP relays RTCP arriving on p's RTCP socket.
func (s *Session) readRTCP(f *forwarder, p *pair) {
	defer s.wg.Done()
	buf := make([]byte, maxPacket, maxPacket+srtpSlack)
	for {
		n, src, err := p.rtcp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if out, to, dst, ok := f.rtcpPacket(buf[:n], src); ok {
			_, _ = to.rtcp.WriteToUDPAddrPort(out, dst)
		}
	}
}
