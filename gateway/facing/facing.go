package facing

import (
	"net"
	"net/netip"
)

// Chooser picks, among the box's specific listener addresses, the one that
// faces dest when several can (media resource selection: the appliance
// knows the interfaces' subnets and loads); ok false leaves the choice to
// the routing table (Pick).
type Chooser func(dest netip.Addr, candidates []netip.Addr) (netip.Addr, bool)

// Route tells the local address the routing table would send a packet to
// hostport from; ok false when it cannot tell.
type Route func(hostport string) (netip.Addr, bool)

// Kernel is the Route of the running box: it connects a UDP socket to
// hostport (which sends nothing) and reads the source address the kernel
// chose.
func Kernel(hostport string) (netip.Addr, bool) {
	c, err := net.Dial("udp", hostport)
	if err != nil {
		return netip.Addr{}, false
	}
	defer c.Close()
	a, ok := c.LocalAddr().(*net.UDPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	return a.AddrPort().Addr().Unmap(), true
}

// Choose asks f among the specific (non-wildcard) addresses of local
// which one faces hostport, and returns its index; ok is false when
// hostport is not an IP address and port, or f leaves the choice open, or
// f answers an address that is not in local.
func Choose(local []netip.AddrPort, hostport string, f Chooser) (int, bool) {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return 0, false
	}
	dest, err := netip.ParseAddr(host)
	if err != nil {
		return 0, false
	}
	var cands []netip.Addr
	for _, l := range local {
		if a := l.Addr().Unmap(); !a.IsUnspecified() {
			cands = append(cands, a)
		}
	}
	a, ok := f(dest.Unmap(), cands)
	if !ok {
		return 0, false
	}
	for i, l := range local {
		if l.Addr().Unmap() == a {
			return i, true
		}
	}
	return 0, false
}

// Pick returns the index of the address of local a packet to hostport
// should leave from: the one bound to the source address route gives for
// hostport, else a wildcard one, else the first; -1 when local is empty.
// With a single address there is nothing to choose and route is not asked
// (no routing lookup per request).
func Pick(local []netip.AddrPort, hostport string, route Route) int {
	switch len(local) {
	case 0:
		return -1
	case 1:
		return 0
	}
	if src, ok := route(hostport); ok {
		for i, l := range local {
			if l.Addr().Unmap() == src.Unmap() {
				return i
			}
		}
	}
	for i, l := range local {
		if l.Addr().Unmap().IsUnspecified() {
			return i
		}
	}
	return 0
}

// Announce is the address to give hostport for the local address a: a
// itself, or for a wildcard listener the source address route gives for
// hostport, with a's port (a stays as it is when route cannot tell).
func Announce(a netip.AddrPort, hostport string, route Route) netip.AddrPort {
	if !a.Addr().Unmap().IsUnspecified() {
		return a
	}
	if src, ok := route(hostport); ok {
		return netip.AddrPortFrom(src, a.Port())
	}
	return a
}
