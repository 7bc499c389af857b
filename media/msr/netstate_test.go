package msr

import (
	"net/netip"
	"testing"

	"github.com/outpost/outpost/netcfg"
)

// netState builds synthetic interface states and delivers what changed
// as the netcfg Watcher does: one batch Diff(previous, current) per push.
type netState struct {
	t    testing.TB
	ch   chan []netcfg.Event
	cur  netcfg.State
	last netcfg.State // what was delivered
}

func newNetState(t testing.TB) *netState {
	n := &netState{t: t, ch: make(chan []netcfg.Event, 64)}
	n.cur.Links = map[int]netcfg.Link{}
	n.cur.Normalize()
	return n
}

// link adds or replaces a link; up sets admin state and carrier together.
func (n *netState) link(idx int, name, kind string, up bool) *netState {
	n.cur.Links[idx] = netcfg.Link{Index: idx, Name: name, Kind: kind, Up: up, Carrier: up, MTU: 1500, Loopback: kind == "loopback"}
	return n
}

// vlan adds an 802.1Q sub-interface of parent.
func (n *netState) vlan(idx int, name string, id, parent int) *netState {
	p := n.cur.Links[parent]
	n.cur.Links[idx] = netcfg.Link{Index: idx, Name: name, Kind: "vlan", VLANID: id, ParentIndex: parent, Parent: p.Name, Up: true, Carrier: true, MTU: 1500}
	return n
}

func (n *netState) setUp(idx int, up bool) *netState {
	l := n.cur.Links[idx]
	l.Up, l.Carrier = up, up
	n.cur.Links[idx] = l
	return n
}

func (n *netState) delLink(idx int) *netState {
	delete(n.cur.Links, idx)
	var keep []netcfg.Addr
	for _, a := range n.cur.Addrs {
		if a.LinkIndex != idx {
			keep = append(keep, a)
		}
	}
	n.cur.Addrs = keep
	return n
}

func (n *netState) addr(idx int, cidr string) *netState {
	n.cur.Addrs = append(n.cur.Addrs, netcfg.Addr{LinkIndex: idx, Prefix: netip.MustParsePrefix(cidr)})
	return n
}

func (n *netState) delAddr(idx int, cidr string) *netState {
	p := netip.MustParsePrefix(cidr)
	var keep []netcfg.Addr
	for _, a := range n.cur.Addrs {
		if a.LinkIndex != idx || a.Prefix != p {
			keep = append(keep, a)
		}
	}
	n.cur.Addrs = keep
	return n
}

// push delivers Diff(last, current).
func (n *netState) push() {
	n.cur.Normalize()
	evs := netcfg.Diff(n.last, n.cur)
	n.last = n.cur.Clone()
	if len(evs) > 0 {
		n.ch <- evs
	}
}

// state returns the current state (for New's initial argument).
func (n *netState) state() netcfg.State {
	n.cur.Normalize()
	return n.cur.Clone()
}

// Link indexes used by the tests.
const (
	idxLo = iota + 1
	idxWAN
	idxLAN
	idxETH
	idxVLAN
	idxDown
	idxBare
	idxOther
	idxLAN1
)

// baseNet is lo, wan0 (service, on 127.0.0.1 so the agent can bind it),
// lan0, eth0 with VLAN 100 on it, a down link, an address-less link and
// one the globs exclude.
func baseNet(t testing.TB) *netState {
	n := newNetState(t)
	n.link(idxLo, "lo", "loopback", true).addr(idxLo, "127.0.0.1/8")
	n.link(idxWAN, "wan0", "veth", true).addr(idxWAN, "127.0.0.1/8")
	n.link(idxLAN, "lan0", "veth", true).addr(idxLAN, "198.18.1.1/24").addr(idxLAN, "2001:2:0:1::1/64").addr(idxLAN, "fe80::1/64")
	n.link(idxETH, "eth0", "device", true)
	n.vlan(idxVLAN, "eth0.100", 100, idxETH).addr(idxVLAN, "198.18.100.1/24")
	n.link(idxDown, "lan9", "veth", false).addr(idxDown, "198.18.9.1/24")
	n.link(idxBare, "lan8", "veth", true)
	n.link(idxOther, "ext0", "device", true).addr(idxOther, "198.18.50.1/24")
	return n
}
