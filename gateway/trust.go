package gateway

import (
	"net/netip"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/siptarget"
)

// Trust by source address: a PSTN gateway trunk and the HQ softswitch do
// not answer a branch user's digest challenge, so their INVITEs are
// admitted (onInvite) by the address they come from.

// fromPSTN reports whether req came from the address of a configured PSTN
// gateway.
func (s *Server) fromPSTN(req *sip.Request) bool {
	gws := s.cfg.Load().PSTN
	targets := make([]siptarget.Target, 0, len(gws))
	for _, g := range gws {
		targets = append(targets, g.Target)
	}
	return sourceIsOneOf(req, targets)
}

// fromHQ reports whether req comes from an HQ target's address (the
// softswitch does not answer a branch user's digest challenge; the trunk
// is trusted by address, like a PSTN gateway).
func (s *Server) fromHQ(req *sip.Request) bool {
	var targets []siptarget.Target
	for _, t := range s.HQHealth() {
		if g, err := siptarget.Parse(t.Target, siptarget.UDP); err == nil {
			targets = append(targets, g)
		}
	}
	return sourceIsOneOf(req, targets)
}

// sourceIsOneOf reports whether req's source IP is the address of one of
// the targets; trunks are trusted by address, whatever port and transport
// they send from. Targets named by a host name never match (the gateway
// does not resolve names to trust them).
func sourceIsOneOf(req *sip.Request, targets []siptarget.Target) bool {
	src, err := netip.ParseAddrPort(req.Source())
	if err != nil {
		return false
	}
	for _, t := range targets {
		if t.IsIP() && t.Addr == src.Addr().Unmap() {
			return true
		}
	}
	return false
}
