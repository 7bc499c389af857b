package netcfg_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/outpost/outpost/netcfg"
	"github.com/outpost/outpost/netcfg/netnstest"
)

// awaiter reads event batches; events not yet consumed by await stay
// queued in order.
type awaiter struct {
	t       *testing.T
	ch      <-chan []netcfg.Event
	pending []netcfg.Event
}

// await returns the first event (in this or a later batch) matching kind
// and link name, failing the test after a deadline.
func (a *awaiter) await(kind netcfg.EventKind, link string, match func(netcfg.Event) bool) netcfg.Event {
	a.t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for {
		for len(a.pending) > 0 {
			e := a.pending[0]
			a.pending = a.pending[1:]
			a.t.Logf("event: %v", e)
			if e.Kind == kind && e.Link.Name == link && (match == nil || match(e)) {
				return e
			}
		}
		select {
		case batch, ok := <-a.ch:
			if !ok {
				a.t.Fatalf("subscription closed while waiting for %v %s", kind, link)
			}
			a.pending = batch
		case <-deadline.C:
			a.t.Fatalf("no %v %s within 5 s", kind, link)
		}
	}
}

func TestNetlinkWatcher(t *testing.T) {
	topo := netnstest.New(t)
	h := topo.Handle("box")
	topo.NS("peer")

	w := netcfg.NewWatcher(netcfg.NetlinkSource(h), netcfg.Config{Debounce: 10 * time.Millisecond}, nil)
	ch, unsub := w.Subscribe(64)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	// Registered after Handle: runs before the namespace handle closes.
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run = %v", err)
		}
		unsub()
	})
	a := &awaiter{t: t, ch: ch}

	// Initial state: the namespace's loopback.
	lo := a.await(netcfg.LinkAdded, "lo", nil)
	if !lo.Link.Loopback {
		t.Errorf("lo not marked loopback: %+v", lo.Link)
	}

	topo.Veth("box", "wan0", "peer", "wan0p")
	added := a.await(netcfg.LinkAdded, "wan0", nil)
	if added.Link.Kind != "veth" || added.Link.Up || added.Link.Parent != "" {
		t.Errorf("wan0 = %+v", added.Link)
	}

	topo.Up("peer", "wan0p")
	topo.Up("box", "wan0")
	a.await(netcfg.LinkUp, "wan0", nil)
	a.await(netcfg.CarrierUp, "wan0", nil)

	topo.Addr("box", "wan0", "198.18.0.1/24")
	topo.Addr("box", "wan0", "2001:2::1/64") // nodad
	v4 := netip.MustParsePrefix("198.18.0.1/24")
	v6 := netip.MustParsePrefix("2001:2::1/64")
	a.await(netcfg.AddrAdded, "wan0", func(e netcfg.Event) bool { return e.Addr == v4 })
	a.await(netcfg.AddrAdded, "wan0", func(e netcfg.Event) bool { return e.Addr == v6 })

	topo.Route("box", "add", "default", "via", "198.18.0.2")
	gw := netip.MustParseAddr("198.18.0.2")
	rt := a.await(netcfg.DefaultRouteAdded, "wan0", func(e netcfg.Event) bool { return e.Route.Dst.Addr().Is4() })
	if rt.Route.Gateway != gw || rt.Route.Dst.Bits() != 0 || rt.Route.Table != 254 {
		t.Errorf("default route = %+v", rt.Route)
	}
	if d := w.State().DefaultRoutes(); len(d) != 1 || d[0].LinkName != "wan0" {
		t.Errorf("State().DefaultRoutes() = %+v", d)
	}

	// A macvlan on top of the veth stands in for a VLAN sub-interface.
	topo.IP("box", "link", "add", "link", "wan0", "name", "voice0", "type", "macvlan", "mode", "bridge")
	mv := a.await(netcfg.LinkAdded, "voice0", nil)
	if mv.Link.Kind != "macvlan" || mv.Link.Parent != "wan0" || mv.Link.ParentIndex != added.Link.Index {
		t.Errorf("voice0 = %+v", mv.Link)
	}

	// Peer end down: carrier lost, admin state unchanged.
	topo.Down("peer", "wan0p")
	cd := a.await(netcfg.CarrierDown, "wan0", nil)
	if !cd.Link.Up {
		t.Errorf("wan0 admin state lost with carrier: %+v", cd.Link)
	}
	topo.Up("peer", "wan0p")
	a.await(netcfg.CarrierUp, "wan0", nil)

	topo.Route("box", "del", "default")
	a.await(netcfg.DefaultRouteRemoved, "wan0", func(e netcfg.Event) bool { return e.Route.Gateway == gw })

	topo.Down("box", "wan0")
	a.await(netcfg.LinkDown, "wan0", nil)
	topo.Up("box", "wan0")
	a.await(netcfg.LinkUp, "wan0", nil)

	// Rename is a change of the same link.
	topo.Down("box", "voice0")
	topo.IP("box", "link", "set", "voice0", "name", "voice1")
	rn := a.await(netcfg.LinkChanged, "voice1", nil)
	if rn.Prev.Name != "voice0" || rn.Link.Index != mv.Link.Index {
		t.Errorf("rename: %+v", rn)
	}

	// Deleting the veth takes its peer and the macvlan on top with it.
	topo.IP("box", "link", "del", "wan0")
	a.await(netcfg.LinkRemoved, "wan0", nil)
	if _, ok := w.State().Link("wan0"); ok {
		t.Error("wan0 still in State()")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := w.State().Link("voice1"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("voice1 still in State() 5 s after its parent was deleted")
		}
		a.await(netcfg.LinkRemoved, "voice1", nil)
	}
}

// Snapshot of a namespace reads what ip(8) configured, without a Watcher.
func TestNetlinkSnapshot(t *testing.T) {
	topo := netnstest.New(t)
	h := topo.Handle("box")
	topo.Veth("box", "lan0", "peer", "lan0p")
	topo.Up("box", "lan0")
	topo.Addr("box", "lan0", "198.18.5.1/24")
	topo.Route("box", "add", "198.19.0.0/16", "via", "198.18.5.2")

	st, err := netcfg.NetlinkSource(h).Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	l, ok := st.Link("lan0")
	if !ok || !l.Up || l.Carrier || l.Kind != "veth" || l.MTU != 1500 || l.HardwareAddr == "" {
		t.Errorf("lan0 = %+v, %v (peer down: no carrier)", l, ok)
	}
	if got := st.AddrsOf("lan0"); len(got) != 1 || got[0] != netip.MustParsePrefix("198.18.5.1/24") {
		t.Errorf("AddrsOf(lan0) = %v", got)
	}
	var found bool
	for _, r := range st.Routes {
		if r.Dst == netip.MustParsePrefix("198.19.0.0/16") && r.Gateway == netip.MustParseAddr("198.18.5.2") && r.LinkName == "lan0" {
			found = true
		}
	}
	if !found {
		t.Errorf("route 198.19.0.0/16 missing: %+v", st.Routes)
	}
	if len(st.DefaultRoutes()) != 0 {
		t.Errorf("unexpected default routes %+v", st.DefaultRoutes())
	}
}
