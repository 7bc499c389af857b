package netcfg

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// EventKind says what changed. The numeric order is the order in which
// Diff reports the events of one link: additions make-before-break
// (LinkAdded … DefaultRouteAdded), then removals in reverse
// (DefaultRouteRemoved … LinkRemoved).
type EventKind int

const (
	LinkAdded           EventKind = iota + 1
	LinkChanged                   // same index, other name, MTU, MAC, kind, VLAN ID or parent
	LinkUp                        // administratively up
	CarrierUp                     // operationally up
	AddrAdded                     // a usable (non-tentative) address appeared
	DefaultRouteAdded             //
	DefaultRouteRemoved           //
	AddrRemoved                   // a usable address vanished (or became tentative)
	CarrierDown                   //
	LinkDown                      // administratively down
	LinkRemoved                   //
)

var kindNames = [...]string{
	LinkAdded: "LinkAdded", LinkChanged: "LinkChanged", LinkUp: "LinkUp",
	CarrierUp: "CarrierUp", AddrAdded: "AddrAdded",
	DefaultRouteAdded: "DefaultRouteAdded", DefaultRouteRemoved: "DefaultRouteRemoved",
	AddrRemoved: "AddrRemoved", CarrierDown: "CarrierDown", LinkDown: "LinkDown",
	LinkRemoved: "LinkRemoved",
}

func (k EventKind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one change between two snapshots.
type Event struct {
	Kind EventKind
	// Link is the link concerned, as it is in the new state (as it was in
	// the old state if the link is gone).
	Link Link
	// Prev is the previous version of the link, set for LinkChanged only
	// (a rename: Prev.Name is the old name).
	Prev  Link
	Addr  netip.Prefix // AddrAdded, AddrRemoved
	Route Route        // DefaultRouteAdded, DefaultRouteRemoved
}

func (e Event) String() string {
	switch e.Kind {
	case AddrAdded, AddrRemoved:
		return fmt.Sprintf("%v %s %v", e.Kind, e.Link.Name, e.Addr)
	case DefaultRouteAdded, DefaultRouteRemoved:
		return fmt.Sprintf("%v %s %v via %v table %d", e.Kind, e.Link.Name, e.Route.Dst, e.Route.Gateway, e.Route.Table)
	case LinkChanged:
		return fmt.Sprintf("%v %s (was %s)", e.Kind, e.Link.Name, e.Prev.Name)
	}
	return fmt.Sprintf("%v %s", e.Kind, e.Link.Name)
}

type addrKey struct {
	link   int
	prefix netip.Prefix
}

// routeKey leaves out LinkName so that renaming a link does not look like
// a route change.
type routeKey struct {
	link  int
	dst   netip.Prefix
	gw    netip.Addr
	table int
}

func keyOf(r Route) routeKey { return routeKey{r.LinkIndex, r.Dst, r.Gateway, r.Table} }

// Diff returns what changed from old to new. It is pure and
// deterministic: events are ordered by link index, then by Kind, then by
// address or route. Diff(State{}, s) describes s from scratch (every link
// Added, Up, CarrierUp, every usable address and default route Added);
// Diff(s, s) is empty.
//
// A link that vanishes is reported with its addresses and default routes
// removed, CarrierDown and LinkDown (if it had them) and LinkRemoved.
// Tentative addresses are not reported until they become usable.
func Diff(old, new State) []Event {
	var evs []Event
	for idx, nl := range new.Links {
		ol, existed := old.Links[idx]
		if !existed {
			evs = append(evs, Event{Kind: LinkAdded, Link: nl})
		} else if linkChanged(ol, nl) {
			evs = append(evs, Event{Kind: LinkChanged, Link: nl, Prev: ol})
		}
		switch {
		case nl.Up && !ol.Up:
			evs = append(evs, Event{Kind: LinkUp, Link: nl})
		case !nl.Up && ol.Up:
			evs = append(evs, Event{Kind: LinkDown, Link: nl})
		}
		switch {
		case nl.Carrier && !ol.Carrier:
			evs = append(evs, Event{Kind: CarrierUp, Link: nl})
		case !nl.Carrier && ol.Carrier:
			evs = append(evs, Event{Kind: CarrierDown, Link: nl})
		}
	}
	for idx, ol := range old.Links {
		if _, ok := new.Links[idx]; ok {
			continue
		}
		if ol.Carrier {
			evs = append(evs, Event{Kind: CarrierDown, Link: ol})
		}
		if ol.Up {
			evs = append(evs, Event{Kind: LinkDown, Link: ol})
		}
		evs = append(evs, Event{Kind: LinkRemoved, Link: ol})
	}

	linkOf := func(idx int, name string) Link {
		if l, ok := new.Links[idx]; ok {
			return l
		}
		if l, ok := old.Links[idx]; ok {
			return l
		}
		return Link{Index: idx, Name: name}
	}

	oldAddrs := usableAddrs(old)
	newAddrs := usableAddrs(new)
	for k, a := range newAddrs {
		if _, ok := oldAddrs[k]; !ok {
			evs = append(evs, Event{Kind: AddrAdded, Link: linkOf(a.LinkIndex, a.LinkName), Addr: a.Prefix})
		}
	}
	for k, a := range oldAddrs {
		if _, ok := newAddrs[k]; !ok {
			evs = append(evs, Event{Kind: AddrRemoved, Link: linkOf(a.LinkIndex, a.LinkName), Addr: a.Prefix})
		}
	}

	oldRoutes := defaultRoutes(old)
	newRoutes := defaultRoutes(new)
	for k, r := range newRoutes {
		if _, ok := oldRoutes[k]; !ok {
			evs = append(evs, Event{Kind: DefaultRouteAdded, Link: linkOf(r.LinkIndex, r.LinkName), Route: r})
		}
	}
	for k, r := range oldRoutes {
		if _, ok := newRoutes[k]; !ok {
			evs = append(evs, Event{Kind: DefaultRouteRemoved, Link: linkOf(r.LinkIndex, r.LinkName), Route: r})
		}
	}

	slices.SortFunc(evs, cmpEvent)
	return evs
}

func cmpEvent(a, b Event) int {
	if c := cmp.Compare(a.Link.Index, b.Link.Index); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	if c := cmpPrefix(a.Addr, b.Addr); c != 0 {
		return c
	}
	return cmpRoute(a.Route, b.Route)
}

// linkChanged compares everything but the up/carrier flags, which have
// events of their own.
func linkChanged(a, b Link) bool {
	a.Up, a.Carrier = b.Up, b.Carrier
	return a != b
}

func usableAddrs(s State) map[addrKey]Addr {
	m := make(map[addrKey]Addr, len(s.Addrs))
	for _, a := range s.Addrs {
		if !a.Tentative {
			m[addrKey{a.LinkIndex, a.Prefix}] = a
		}
	}
	return m
}

func defaultRoutes(s State) map[routeKey]Route {
	m := make(map[routeKey]Route)
	for _, r := range s.Routes {
		if r.IsDefault() {
			m[keyOf(r)] = r
		}
	}
	return m
}
