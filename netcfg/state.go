package netcfg

import (
	"cmp"
	"net/netip"
	"slices"
)

// Link is one network interface as the kernel reports it.
type Link struct {
	Index int
	Name  string
	// Up is the administrative state (IFF_UP, "ip link set X up").
	Up bool
	// Carrier is the operational state: RFC 2863 operstate "up", or, for
	// drivers that do not report an operstate (loopback, tun), the
	// IFF_LOWER_UP flag. An admin-down link has no carrier.
	Carrier      bool
	MTU          int
	HardwareAddr string
	// Kind is the rtnetlink link kind: "veth", "macvlan", "vlan",
	// "bridge", "tuntap", or "device" for plain hardware and loopback.
	Kind string
	// VLANID is the 802.1Q tag of a "vlan" link, 0 otherwise.
	VLANID int
	// Parent and ParentIndex name the lower device of a stacked link
	// (vlan, macvlan, ...) when it lives in the same namespace; both are
	// zero for veth (whose IFLA_LINK is its peer) and for links whose
	// lower device is in another namespace.
	Parent      string
	ParentIndex int
	Loopback    bool
}

// Usable reports whether the link is administratively up and has carrier.
func (l Link) Usable() bool { return l.Up && l.Carrier }

// Addr is one interface address. Prefix keeps the host part
// (198.18.0.1/24, not 198.18.0.0/24).
type Addr struct {
	LinkIndex int
	LinkName  string
	Prefix    netip.Prefix
	// Tentative is set while IPv6 duplicate address detection runs (or
	// after it failed): the address cannot be bound yet. Diff reports such
	// an address only once it stops being tentative.
	Tentative bool
}

// Route is one unicast route with an outgoing link. Multipath routes
// appear once per next hop; blackhole, unreachable, prohibit and local
// routes are not part of a State.
type Route struct {
	LinkIndex int
	LinkName  string
	// Dst is 0.0.0.0/0 or ::/0 for a default route.
	Dst     netip.Prefix
	Gateway netip.Addr // invalid (zero) for on-link routes
	Table   int
}

// IsDefault reports whether r is a default route (IPv4 or IPv6).
func (r Route) IsDefault() bool { return r.Dst.IsValid() && r.Dst.Bits() == 0 }

// State is a snapshot of the links, addresses and routes of one network
// namespace. Addrs and Routes are sorted (see Normalize). A State handed
// out by this package is never modified afterwards; treat it as read-only
// or Clone it.
type State struct {
	Links  map[int]Link
	Addrs  []Addr
	Routes []Route
}

// Link returns the link called name.
func (s State) Link(name string) (Link, bool) {
	for _, l := range s.Links {
		if l.Name == name {
			return l, true
		}
	}
	return Link{}, false
}

// AddrsOf returns the usable (non-tentative) addresses of the link called
// name, in sorted order.
func (s State) AddrsOf(name string) []netip.Prefix {
	l, ok := s.Link(name)
	if !ok {
		return nil
	}
	var out []netip.Prefix
	for _, a := range s.Addrs {
		if a.LinkIndex == l.Index && !a.Tentative {
			out = append(out, a.Prefix)
		}
	}
	return out
}

// DefaultRoutes returns the default routes (IPv4 and IPv6, every table).
func (s State) DefaultRoutes() []Route {
	var out []Route
	for _, r := range s.Routes {
		if r.IsDefault() {
			out = append(out, r)
		}
	}
	return out
}

// Clone returns a deep copy of s.
func (s State) Clone() State {
	c := State{Addrs: slices.Clone(s.Addrs), Routes: slices.Clone(s.Routes)}
	if s.Links != nil {
		c.Links = make(map[int]Link, len(s.Links))
		for k, v := range s.Links {
			c.Links[k] = v
		}
	}
	return c
}

// Normalize sorts Addrs and Routes, fills their LinkName from Links and
// resolves each link's Parent name from its ParentIndex. Sources call it
// before returning a snapshot; tests building States by hand may too.
func (s *State) Normalize() {
	if s.Links == nil {
		s.Links = map[int]Link{}
	}
	for i, l := range s.Links {
		if l.ParentIndex != 0 {
			if p, ok := s.Links[l.ParentIndex]; ok {
				l.Parent = p.Name
			} else {
				l.Parent, l.ParentIndex = "", 0
			}
			s.Links[i] = l
		}
	}
	for i := range s.Addrs {
		if l, ok := s.Links[s.Addrs[i].LinkIndex]; ok {
			s.Addrs[i].LinkName = l.Name
		}
	}
	for i := range s.Routes {
		if l, ok := s.Links[s.Routes[i].LinkIndex]; ok {
			s.Routes[i].LinkName = l.Name
		}
	}
	slices.SortFunc(s.Addrs, cmpAddr)
	s.Addrs = slices.CompactFunc(s.Addrs, func(a, b Addr) bool { return cmpAddr(a, b) == 0 })
	slices.SortFunc(s.Routes, cmpRoute)
	s.Routes = slices.CompactFunc(s.Routes, func(a, b Route) bool { return cmpRoute(a, b) == 0 })
}

func cmpPrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

func cmpAddr(a, b Addr) int {
	if c := cmp.Compare(a.LinkIndex, b.LinkIndex); c != 0 {
		return c
	}
	return cmpPrefix(a.Prefix, b.Prefix)
}

func cmpRoute(a, b Route) int {
	if c := cmp.Compare(a.LinkIndex, b.LinkIndex); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Table, b.Table); c != 0 {
		return c
	}
	if c := cmpPrefix(a.Dst, b.Dst); c != 0 {
		return c
	}
	return a.Gateway.Compare(b.Gateway)
}
