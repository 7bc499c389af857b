package listen

import (
	"net"
	"time"

	"github.com/emiago/sipgo/sip"
)

// AwaitServed waits (at most within) until sipgo has put the UDP socket pc
// into the connection pool of tl, and reports whether it did. ServeUDP
// does that from its own goroutine and sipgo has no readiness signal; a
// request sent from that address before (sip.Request.Laddr: the upstream
// registration, the prober, a B leg) makes sipgo bind a second socket there
// and fail with EADDRINUSE — seen when a WAN address change brings a new
// listener.
func AwaitServed(tl *sip.TransportLayer, pc net.PacketConn, within time.Duration) bool {
	pool := tl.Pool("udp")
	addr := pc.LocalAddr().String()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		if c := pool.Get(addr); c != nil {
			c.Ref(-1) // Get took a reference
			return true
		}
	}
	return false
}
