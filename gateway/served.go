package gateway

import (
	"net"
	"time"
)

// awaitServed waits (at most a second) until sipgo has put the UDP socket
// pc into its connection pool. ServeUDP does that from its own goroutine
// and sipgo has no readiness signal; a request sent from that address
// before (sip.Request.Laddr: the upstream registration, the prober, a
// B leg) makes sipgo bind a second socket there and fail with EADDRINUSE
// — seen when a WAN address change brings a new listener.
func (s *Server) awaitServed(pc net.PacketConn) {
	pool := s.ua.TransportLayer().Pool("udp")
	addr := pc.LocalAddr().String()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		if c := pool.Get(addr); c != nil {
			c.Ref(-1) // Get took a reference
			return
		}
	}
	s.log.Warn("sipgo has not registered a listener within 1 s", "listener", addr)
}
