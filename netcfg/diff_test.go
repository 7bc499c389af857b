package netcfg

import (
	"net/netip"
	"reflect"
	"testing"
)

var (
	lo    = Link{Index: 1, Name: "lo", Up: true, Carrier: true, MTU: 65536, Kind: "device", Loopback: true}
	eth0  = Link{Index: 2, Name: "eth0", Up: true, Carrier: true, MTU: 1500, HardwareAddr: "02:00:00:00:00:02", Kind: "device"}
	vlan1 = Link{Index: 3, Name: "eth0.100", Up: true, Carrier: true, MTU: 1500, HardwareAddr: "02:00:00:00:00:02", Kind: "vlan", VLANID: 100, ParentIndex: 2}

	p4   = netip.MustParsePrefix("198.18.0.1/24")
	p4b  = netip.MustParsePrefix("198.18.1.1/24")
	p6   = netip.MustParsePrefix("2001:2::1/64")
	gw4  = netip.MustParseAddr("198.18.0.254")
	gw4b = netip.MustParseAddr("198.18.0.253")
	def4 = netip.MustParsePrefix("0.0.0.0/0")
	net4 = netip.MustParsePrefix("198.18.0.0/24")
)

// st builds a normalized State from links, addresses and routes.
func st(links []Link, addrs []Addr, routes []Route) State {
	s := State{Links: map[int]Link{}, Addrs: addrs, Routes: routes}
	for _, l := range links {
		s.Links[l.Index] = l
	}
	s.Normalize()
	return s
}

func with(l Link, f func(*Link)) Link { f(&l); return l }

func TestDiff(t *testing.T) {
	base := st([]Link{lo, eth0},
		[]Addr{{LinkIndex: 2, Prefix: p4}},
		[]Route{{LinkIndex: 2, Dst: def4, Gateway: gw4, Table: 254}, {LinkIndex: 2, Dst: net4, Table: 254}})

	down := with(eth0, func(l *Link) { l.Up, l.Carrier = false, false })
	noCarrier := with(eth0, func(l *Link) { l.Carrier = false })
	renamed := with(eth0, func(l *Link) { l.Name = "wan0" })
	mtu := with(eth0, func(l *Link) { l.MTU = 9000 })
	vlanN := vlan1
	vlanN.Parent = "eth0"

	tests := []struct {
		name     string
		old, new State
		want     []Event
	}{
		{"identical", base, base.Clone(), nil},
		{"empty to empty", State{}, State{}, nil},
		{"initial state", State{}, base, []Event{
			{Kind: LinkAdded, Link: lo}, {Kind: LinkUp, Link: lo}, {Kind: CarrierUp, Link: lo},
			{Kind: LinkAdded, Link: eth0}, {Kind: LinkUp, Link: eth0}, {Kind: CarrierUp, Link: eth0},
			{Kind: AddrAdded, Link: eth0, Addr: p4},
			{Kind: DefaultRouteAdded, Link: eth0, Route: Route{LinkIndex: 2, LinkName: "eth0", Dst: def4, Gateway: gw4, Table: 254}},
		}},
		{"link appears down", st([]Link{lo}, nil, nil), st([]Link{lo, down}, nil, nil), []Event{
			{Kind: LinkAdded, Link: down},
		}},
		{"link vanishes with address and route", base, st([]Link{lo}, nil, nil), []Event{
			{Kind: DefaultRouteRemoved, Link: eth0, Route: Route{LinkIndex: 2, LinkName: "eth0", Dst: def4, Gateway: gw4, Table: 254}},
			{Kind: AddrRemoved, Link: eth0, Addr: p4},
			{Kind: CarrierDown, Link: eth0}, {Kind: LinkDown, Link: eth0}, {Kind: LinkRemoved, Link: eth0},
		}},
		{"admin down", st([]Link{eth0}, nil, nil), st([]Link{down}, nil, nil), []Event{
			{Kind: CarrierDown, Link: down}, {Kind: LinkDown, Link: down},
		}},
		{"admin up", st([]Link{down}, nil, nil), st([]Link{eth0}, nil, nil), []Event{
			{Kind: LinkUp, Link: eth0}, {Kind: CarrierUp, Link: eth0},
		}},
		{"carrier lost, admin still up", st([]Link{eth0}, nil, nil), st([]Link{noCarrier}, nil, nil), []Event{
			{Kind: CarrierDown, Link: noCarrier},
		}},
		{"carrier back", st([]Link{noCarrier}, nil, nil), st([]Link{eth0}, nil, nil), []Event{
			{Kind: CarrierUp, Link: eth0},
		}},
		{"rename is LinkChanged, addresses follow silently",
			base,
			st([]Link{lo, renamed}, []Addr{{LinkIndex: 2, Prefix: p4}},
				[]Route{{LinkIndex: 2, Dst: def4, Gateway: gw4, Table: 254}}),
			[]Event{{Kind: LinkChanged, Link: renamed, Prev: eth0}},
		},
		{"MTU change", st([]Link{eth0}, nil, nil), st([]Link{mtu}, nil, nil), []Event{
			{Kind: LinkChanged, Link: mtu, Prev: eth0},
		}},
		{"address added and removed, make before break",
			st([]Link{eth0}, []Addr{{LinkIndex: 2, Prefix: p4}}, nil),
			st([]Link{eth0}, []Addr{{LinkIndex: 2, Prefix: p4b}, {LinkIndex: 2, Prefix: p6}}, nil),
			[]Event{
				{Kind: AddrAdded, Link: eth0, Addr: p4b},
				{Kind: AddrAdded, Link: eth0, Addr: p6},
				{Kind: AddrRemoved, Link: eth0, Addr: p4},
			}},
		{"tentative address is not reported",
			st([]Link{eth0}, nil, nil),
			st([]Link{eth0}, []Addr{{LinkIndex: 2, Prefix: p6, Tentative: true}}, nil),
			nil},
		{"address reported once DAD completes",
			st([]Link{eth0}, []Addr{{LinkIndex: 2, Prefix: p6, Tentative: true}}, nil),
			st([]Link{eth0}, []Addr{{LinkIndex: 2, Prefix: p6}}, nil),
			[]Event{{Kind: AddrAdded, Link: eth0, Addr: p6}}},
		{"default route removed, other routes ignored",
			base,
			st([]Link{lo, eth0}, []Addr{{LinkIndex: 2, Prefix: p4}}, []Route{{LinkIndex: 2, Dst: net4, Table: 254}}),
			[]Event{{Kind: DefaultRouteRemoved, Link: eth0, Route: Route{LinkIndex: 2, LinkName: "eth0", Dst: def4, Gateway: gw4, Table: 254}}}},
		{"non-default route change is no event",
			st([]Link{eth0}, nil, nil),
			st([]Link{eth0}, nil, []Route{{LinkIndex: 2, Dst: net4, Table: 254}}),
			nil},
		{"default route gateway change: new before old",
			st([]Link{eth0}, nil, []Route{{LinkIndex: 2, Dst: def4, Gateway: gw4, Table: 254}}),
			st([]Link{eth0}, nil, []Route{{LinkIndex: 2, Dst: def4, Gateway: gw4b, Table: 254}}),
			[]Event{
				{Kind: DefaultRouteAdded, Link: eth0, Route: Route{LinkIndex: 2, LinkName: "eth0", Dst: def4, Gateway: gw4b, Table: 254}},
				{Kind: DefaultRouteRemoved, Link: eth0, Route: Route{LinkIndex: 2, LinkName: "eth0", Dst: def4, Gateway: gw4, Table: 254}},
			}},
		{"VLAN sub-interface is an ordinary link",
			st([]Link{lo, eth0}, nil, nil),
			st([]Link{lo, eth0, vlan1}, []Addr{{LinkIndex: 3, Prefix: p4b}}, nil),
			[]Event{
				{Kind: LinkAdded, Link: vlanN}, {Kind: LinkUp, Link: vlanN}, {Kind: CarrierUp, Link: vlanN},
				{Kind: AddrAdded, Link: vlanN, Addr: p4b},
			}},
		{"VLAN goes down with its parent",
			st([]Link{eth0, vlan1}, nil, nil),
			st([]Link{down, with(vlan1, func(l *Link) { l.Up, l.Carrier = false, false })}, nil, nil),
			[]Event{
				{Kind: CarrierDown, Link: down}, {Kind: LinkDown, Link: down},
				{Kind: CarrierDown, Link: with(vlanN, func(l *Link) { l.Up, l.Carrier = false, false })},
				{Kind: LinkDown, Link: with(vlanN, func(l *Link) { l.Up, l.Carrier = false, false })},
			}},
		{"parent rename changes the VLAN's Parent",
			st([]Link{eth0, vlan1}, nil, nil),
			st([]Link{renamed, vlan1}, nil, nil),
			[]Event{
				{Kind: LinkChanged, Link: renamed, Prev: eth0},
				{Kind: LinkChanged, Link: with(vlanN, func(l *Link) { l.Parent = "wan0" }), Prev: vlanN},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Diff(tc.old, tc.new)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Diff:\n got  %v\n want %v", got, tc.want)
				for i := range max(len(got), len(tc.want)) {
					var g, w Event
					if i < len(got) {
						g = got[i]
					}
					if i < len(tc.want) {
						w = tc.want[i]
					}
					if !reflect.DeepEqual(g, w) {
						t.Errorf("event %d:\n got  %#v\n want %#v", i, g, w)
					}
				}
			}
			// Deterministic: a second run gives the same slice.
			if again := Diff(tc.old, tc.new); !reflect.DeepEqual(got, again) {
				t.Errorf("Diff is not deterministic")
			}
		})
	}
}

// Applying Diff(a, b) to a's view must give b's view: checked on every
// pair of a few states with the replay model used by the watcher tests.
func TestDiffReplay(t *testing.T) {
	states := []State{
		{},
		st([]Link{lo, eth0}, []Addr{{LinkIndex: 2, Prefix: p4}}, []Route{{LinkIndex: 2, Dst: def4, Gateway: gw4, Table: 254}}),
		st([]Link{lo, with(eth0, func(l *Link) { l.Carrier = false }), vlan1}, []Addr{{LinkIndex: 3, Prefix: p6}}, nil),
		st([]Link{lo, with(eth0, func(l *Link) { l.Name = "wan0" })}, []Addr{{LinkIndex: 2, Prefix: p4b}}, []Route{{LinkIndex: 2, Dst: def4, Gateway: gw4b, Table: 254}}),
	}
	for i, a := range states {
		for j, b := range states {
			v := newView()
			v.apply(Diff(State{}, a))
			v.apply(Diff(a, b))
			if want := viewOf(b); !reflect.DeepEqual(v, want) {
				t.Errorf("%d→%d: replayed view\n %+v\nwant\n %+v", i, j, v, want)
			}
		}
	}
}

func TestStateAccessors(t *testing.T) {
	s := st([]Link{lo, eth0, vlan1},
		[]Addr{{LinkIndex: 2, Prefix: p6, Tentative: true}, {LinkIndex: 2, Prefix: p4}, {LinkIndex: 3, Prefix: p4b}},
		[]Route{{LinkIndex: 2, Dst: net4, Table: 254}, {LinkIndex: 2, Dst: def4, Gateway: gw4, Table: 254}})
	if l, ok := s.Link("eth0.100"); !ok || l.Parent != "eth0" || l.VLANID != 100 {
		t.Errorf("Link(eth0.100) = %+v, %v", l, ok)
	}
	if _, ok := s.Link("nope"); ok {
		t.Error("Link(nope) found")
	}
	if got := s.AddrsOf("eth0"); !reflect.DeepEqual(got, []netip.Prefix{p4}) {
		t.Errorf("AddrsOf(eth0) = %v (tentative must be left out)", got)
	}
	if got := s.DefaultRoutes(); len(got) != 1 || got[0].Gateway != gw4 || got[0].LinkName != "eth0" {
		t.Errorf("DefaultRoutes = %+v", got)
	}
	c := s.Clone()
	c.Links[2] = Link{}
	c.Addrs[0] = Addr{}
	if s.Links[2].Name != "eth0" || s.Addrs[0].LinkIndex != 2 {
		t.Error("Clone shares memory with the original")
	}
}

func TestEventKindString(t *testing.T) {
	for k := LinkAdded; k <= LinkRemoved; k++ {
		if s := k.String(); s == "" || s[0] == 'E' {
			t.Errorf("kind %d has no name: %q", int(k), s)
		}
	}
	if got := EventKind(99).String(); got != "EventKind(99)" {
		t.Errorf("unknown kind = %q", got)
	}
}

// view is what a consumer can rebuild from events alone.
type view struct {
	Links  map[int]Link
	Addrs  map[addrKey]bool
	Routes map[routeKey]bool
}

func newView() *view {
	return &view{Links: map[int]Link{}, Addrs: map[addrKey]bool{}, Routes: map[routeKey]bool{}}
}

func viewOf(s State) *view {
	v := newView()
	for i, l := range s.Links {
		v.Links[i] = l
	}
	for k := range usableAddrs(s) {
		v.Addrs[k] = true
	}
	for k := range defaultRoutes(s) {
		v.Routes[k] = true
	}
	return v
}

func (v *view) apply(evs []Event) {
	for _, e := range evs {
		switch e.Kind {
		case LinkAdded, LinkChanged, LinkUp, LinkDown, CarrierUp, CarrierDown:
			v.Links[e.Link.Index] = e.Link
		case LinkRemoved:
			delete(v.Links, e.Link.Index)
		case AddrAdded:
			v.Addrs[addrKey{e.Link.Index, e.Addr}] = true
		case AddrRemoved:
			delete(v.Addrs, addrKey{e.Link.Index, e.Addr})
		case DefaultRouteAdded:
			v.Routes[keyOf(e.Route)] = true
		case DefaultRouteRemoved:
			delete(v.Routes, keyOf(e.Route))
		}
	}
}
