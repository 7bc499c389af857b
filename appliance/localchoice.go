package appliance

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"

	"github.com/outpost/outpost/media/selection"
	"github.com/outpost/outpost/netcfg"
)

// localChooser is the gateway's LocalChooser: which of the box's addresses
// faces a peer (the SIP listener a B leg, probe or upstream REGISTER leaves
// from, and with it the relay's media address on that leg).
//
// Normally one address qualifies and the routing table's choice stands. When
// several of the box's addresses sit on the peer's own subnet (two
// interfaces on one VLAN, or an interface with several addresses), they are
// media resources of this box that can all anchor the leg, and the choice is
// made as docs/design.md §1 specifies, by media/selection: the box's zone and site,
// then weighted at random by (100 − load) × performance coefficient. Each
// address is a resource of its own, named "MSR-NAME/INTERFACE" (so that
// media_resources.performance can weight interfaces; selection otherwise
// keeps one resource per MSR name); the load is the box's, as the MSR agent
// announces it.
//
// This choice is between the box's own addresses only: which box anchors
// a call's media at all (this box's relay, or another box's MSR that
// registered here) is decided per call by anchorMedia (remotemedia.go),
// with the same media/selection rules.
type localChooser struct {
	a   *App
	mu  sync.Mutex // guards rnd
	rnd *rand.Rand
}

func (c *localChooser) choose(dest netip.Addr, cands []netip.Addr) (netip.Addr, bool) {
	parts := c.a.running().parts
	entries := onLinkResources(c.a.netState(), parts.Local, dest, cands, c.load())
	if len(entries) < 2 {
		return netip.Addr{}, false // the routing table decides
	}
	c.mu.Lock()
	e, err := selection.Select(entries, selection.Request{Zone: parts.Local.Zone, Site: parts.Local.Site}, parts.Selection, c.rnd)
	c.mu.Unlock()
	if err != nil {
		return netip.Addr{}, false
	}
	return e.Addr, true
}

// load is the CPU load the MSR agent last announced (0 without MSR).
func (c *localChooser) load() int {
	if c.a.msr == nil {
		return 0
	}
	for _, e := range c.a.msr.agent.Resources() {
		return e.Load
	}
	return 0
}

// onLinkResources are the candidates on a subnet that contains dest, as
// media resources of this box.
func onLinkResources(st netcfg.State, local localResources, dest netip.Addr, cands []netip.Addr, load int) []selection.Entry {
	var out []selection.Entry
	for _, a := range st.Addrs {
		if !slices.Contains(cands, a.Prefix.Addr()) || !a.Prefix.Masked().Contains(dest) || a.Tentative {
			continue
		}
		out = append(out, selection.Entry{MSR: local.MSR + "/" + a.LinkName, Interface: a.LinkName, Addr: a.Prefix.Addr(),
			Zone: local.Zone, Site: local.Site, Load: load, Registered: true, Active: true})
	}
	return out
}
