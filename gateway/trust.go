package gateway

import (
	"net/netip"
	"strings"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/siptarget"
)

// Trust by source address: a PSTN gateway trunk and the HQ softswitch do
// not answer a branch user's digest challenge, so their INVITEs are
// admitted (onInvite) by where they come from. The rule, per configured
// target (a PSTN gateway, a static HQ target, or an HQ target as DNS
// resolved it, with the port SRV gave):
//
//   - udp: the request arrived over UDP from exactly the target's IP and
//     port. A UDP source address is whatever the sender writes, so an
//     attacker who knows the gateway's IP can claim it; requiring the port
//     too means a spoofed INVITE must also guess the port the trunk sends
//     from, and a host at the gateway's IP (another process, a NAT in
//     front of it) is trusted only on the trunk's own port. A trunk that
//     sends from another port than it listens on is not trusted: list its
//     sending address as a target, or (HQ) its network in
//     hq.trusted_networks.
//   - tcp, tls: the request arrived over the same transport from the
//     target's IP, on any port. A TCP source address cannot be spoofed
//     off-path (the handshake must complete before a byte of SIP is read),
//     and an HQ server or gateway that opens a connection to the box sends
//     from an ephemeral port no configuration can name. (A connection the
//     box opened itself has the target's exact address as its peer, so it
//     matches too.) The address, not the port, is what TCP proves.
//   - never across transports: a trunk configured udp is not trusted over
//     TCP (or the reverse) — one rule per configured way in.
//   - targets named by a host name never match: the gateway does not
//     resolve names to trust them (HQ's resolved targets are IPs).
//
// HQ may also name whole networks (hq.trusted_networks, for a softswitch
// with many servers): a request from inside one is trusted as from HQ over
// any transport and port; the operator vouches for every host there.
//
// Anything else is a local caller and gets the registrar's 407 challenge.

// fromPSTN reports whether req came from a configured PSTN gateway.
func (r *running) fromPSTN(req *sip.Request) bool {
	_, ok := r.pstnGatewayOf(req)
	return ok
}

// pstnGatewayOf is the configured PSTN gateway req comes from, by source.
func (r *running) pstnGatewayOf(req *sip.Request) (siptarget.Target, bool) {
	for _, g := range r.cfg.PSTN {
		if sourceIsOneOf(req, []siptarget.Target{g.Target}) {
			return g.Target, true
		}
	}
	return siptarget.Target{}, false
}

// fromHQ reports whether req comes from HQ: from one of its targets (as
// resolved and probed) or from a network in hq.trusted_networks.
func (r *running) fromHQ(req *sip.Request) bool {
	var targets []siptarget.Target
	for _, t := range r.hq.Health() {
		if g, err := siptarget.Parse(t.Target, siptarget.UDP); err == nil {
			targets = append(targets, g)
		}
	}
	var nets []netip.Prefix
	if hq := r.cfg.HQTrunk; hq != nil {
		nets = hq.TrustedNetworks
	}
	return trustedHQ(req, targets, nets)
}

// trustedHQ is fromHQ's rule: one of targets (sourceIsOneOf) or any source
// inside nets.
func trustedHQ(req *sip.Request, targets []siptarget.Target, nets []netip.Prefix) bool {
	if sourceIsOneOf(req, targets) {
		return true
	}
	src, ok := sourceOf(req)
	if !ok {
		return false
	}
	for _, n := range nets {
		if n.Contains(src.Addr()) {
			return true
		}
	}
	return false
}

// sourceIsOneOf reports whether req came from one of the targets by the
// rule above: over UDP from the exact ip:port, over TCP or TLS from the
// IP, always over the target's own transport.
func sourceIsOneOf(req *sip.Request, targets []siptarget.Target) bool {
	src, ok := sourceOf(req)
	if !ok {
		return false
	}
	// The transport the transport layer read the request on; not Via's,
	// which the sender writes.
	tr, err := siptarget.ParseTransport(req.MessageData.Transport())
	if err != nil {
		return false
	}
	for _, t := range targets {
		if !t.IsIP() || t.Transport != tr || t.Addr != src.Addr() {
			continue
		}
		if tr != siptarget.UDP || t.Port == src.Port() {
			return true
		}
	}
	return false
}

// sourceOf is the address req arrived from, IPv4-mapped addresses unmapped.
func sourceOf(req *sip.Request) (netip.AddrPort, bool) {
	src, err := netip.ParseAddrPort(strings.TrimSpace(req.Source()))
	if err != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), true
}
