package gateway

import (
	"net/netip"
	"sync/atomic"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/facing"
	"github.com/outpost/outpost/gateway/listen"
)

// LocalChooser picks, among the box's listener addresses, the one that
// faces dest when several can (see facing.Chooser).
type LocalChooser = facing.Chooser

// SetLocalChooser installs the chooser consulted for every B leg and probe.
func (s *Server) SetLocalChooser(f LocalChooser) { s.choose.Store(&f) }

// localAddrs is where requests the box originates leave from (B legs, HQ
// probes): the B2BUA's LocalAddr when configured (the address HQ knows the
// box by), else the UDP listener facing the destination, as the
// appliance's LocalChooser or else the routing table decides
// (gateway/facing). Without it sipgo would open an ephemeral socket with
// Via 0.0.0.0. It holds one push's listeners and is immutable (the
// chooser is the Server's, set as interfaces come and go).
type localAddrs struct {
	fixed  *sip.Addr                     // Calls.LocalAddr, when configured
	udp    udpAddrs                      // the UDP listeners
	tcp    udpAddrs                      // the TCP listeners (same shape)
	tls    udpAddrs                      // the TLS listeners
	choose *atomic.Pointer[LocalChooser] // the Server's; nil = none
}

// udpAddrs is the UDP listeners' addresses, sorted (listen.Set.UDPAddrs),
// in both forms: for facing and for sipgo (same index).
type udpAddrs struct {
	ap  []netip.AddrPort
	sip []sip.Addr
}

// newLocalAddrs is the listeners of cfg that requests may leave from;
// choose is consulted when several face a destination (nil = never).
func newLocalAddrs(cfg Config, ls listen.Set, choose *atomic.Pointer[LocalChooser]) *localAddrs {
	l := &localAddrs{udp: addrsOf(ls.UDPAddrs()), tcp: addrsOf(ls.StreamAddrs(false)), tls: addrsOf(ls.StreamAddrs(true)), choose: choose}
	if a := cfg.Calls.LocalAddr; a != "" {
		if ap, err := netip.ParseAddrPort(a); err == nil {
			l.fixed = &sip.Addr{IP: ap.Addr().AsSlice(), Port: int(ap.Port())}
		}
	}
	return l
}

func addrsOf(aps []netip.AddrPort) udpAddrs {
	u := udpAddrs{ap: aps}
	for _, a := range u.ap {
		u.sip = append(u.sip, sip.Addr{IP: a.Addr().AsSlice(), Port: int(a.Port())})
	}
	return u
}

// stream is the TCP or TLS (transport "TCP", "TLS") listener facing
// hostport, for the Contact of a B leg over that transport (the request
// itself leaves from an ephemeral port, as TCP does): HQ then reaches the
// box back over the same transport. nil = none of that transport.
func (l *localAddrs) stream(transport, hostport string) *sip.Addr {
	var u *udpAddrs
	switch transport {
	case "TCP", "tcp":
		u = &l.tcp
	case "TLS", "tls":
		u = &l.tls
	}
	if u == nil || len(u.ap) == 0 {
		return nil
	}
	if i := l.facing(u, hostport); i >= 0 {
		return &u.sip[i]
	}
	return &u.sip[0]
}

// facing is the index of u's listener facing hostport: the chooser's pick
// when several qualify, else the routing table's; -1 = none.
func (l *localAddrs) facing(u *udpAddrs, hostport string) int {
	if l.choose != nil {
		if f := l.choose.Load(); f != nil {
			if i, ok := facing.Choose(u.ap, hostport, *f); ok {
				return i
			}
		}
	}
	return facing.Pick(u.ap, hostport, facing.Kernel)
}

// from is the listener a request to hostport leaves from; nil = let sipgo
// choose.
func (l *localAddrs) from(hostport string) *sip.Addr {
	if l.fixed != nil {
		return l.fixed
	}
	u := &l.udp
	if i := l.facing(u, hostport); i >= 0 {
		return &u.sip[i]
	}
	return nil
}
