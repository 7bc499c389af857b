package msr

import (
	"net/netip"
	"slices"

	"github.com/outpost/outpost/netcfg"
)

// applyEvents brings st forward by one batch of netcfg events. The
// Watcher's batches are Diff(last given, newest), so applying each to what
// the previous ones built reproduces the Watcher's links and usable
// addresses exactly (routes are not needed here and not kept).
func applyEvents(st netcfg.State, evs []netcfg.Event) netcfg.State {
	st = st.Clone()
	if st.Links == nil {
		st.Links = map[int]netcfg.Link{}
	}
	for _, e := range evs {
		switch e.Kind {
		case netcfg.LinkAdded, netcfg.LinkChanged, netcfg.LinkUp, netcfg.LinkDown,
			netcfg.CarrierUp, netcfg.CarrierDown:
			st.Links[e.Link.Index] = e.Link
		case netcfg.LinkRemoved:
			delete(st.Links, e.Link.Index)
			st.Addrs = slices.DeleteFunc(st.Addrs, func(a netcfg.Addr) bool { return a.LinkIndex == e.Link.Index })
		case netcfg.AddrAdded:
			a := netcfg.Addr{LinkIndex: e.Link.Index, LinkName: e.Link.Name, Prefix: e.Addr}
			if !slices.ContainsFunc(st.Addrs, func(b netcfg.Addr) bool { return b.LinkIndex == a.LinkIndex && b.Prefix == a.Prefix }) {
				st.Addrs = append(st.Addrs, a)
			}
		case netcfg.AddrRemoved:
			st.Addrs = slices.DeleteFunc(st.Addrs, func(a netcfg.Addr) bool {
				return a.LinkIndex == e.Link.Index && a.Prefix == e.Addr
			})
		}
	}
	st.Routes = nil
	st.Normalize()
	return st
}

// iface is an interface as announced: its name and media address.
type iface struct {
	Name    string
	Addr    netip.Addr
	Kind    string
	VLANID  int
	Service bool
}

// mediaAddr picks the address an interface announces: the first usable
// IPv4 address, else the first global IPv6 address (sorted order, so the
// choice is stable). Link-local addresses never carry media across a
// softswitch's network.
func mediaAddr(prefixes []netip.Prefix) (netip.Addr, bool) {
	var v6 netip.Addr
	for _, p := range prefixes {
		a := p.Addr()
		if a.IsLinkLocalUnicast() || a.IsUnspecified() || a.IsMulticast() {
			continue
		}
		if a.Is4() {
			return a, true
		}
		if !v6.IsValid() {
			v6 = a
		}
	}
	return v6, v6.IsValid()
}

// announced computes which interfaces get a UA: usable (admin up with
// carrier), not loopback, with a media address, and matching the globs
// (the service interface always, when usable). VLAN sub-interfaces and
// macvlans are ordinary links here. The service interface, if announced,
// comes first; the rest are sorted by name.
func announced(st netcfg.State, c Config) (svc iface, svcOK bool, all []iface) {
	for _, l := range st.Links {
		if l.Loopback || !l.Usable() {
			continue
		}
		isSvc := l.Name == c.ServiceInterface
		if !isSvc && !c.announces(l.Name) {
			continue
		}
		a, ok := mediaAddr(st.AddrsOf(l.Name))
		if !ok {
			continue
		}
		f := iface{Name: l.Name, Addr: a, Kind: l.Kind, VLANID: l.VLANID, Service: isSvc}
		if isSvc {
			svc, svcOK = f, true
			continue
		}
		all = append(all, f)
	}
	slices.SortFunc(all, func(a, b iface) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	if svcOK {
		all = append([]iface{svc}, all...)
	}
	return svc, svcOK, all
}
