package msr

import (
	"net/netip"
	"testing"
	"time"

	"github.com/outpost/outpost/netcfg"
)

// The agent on a real kernel: netlink events from netcfg's Watcher in a
// namespace, REGISTERs over veths to a registrar in another namespace.
func TestNamespaceFollowsKernel(t *testing.T) {
	b := newNSBox(t, 10*time.Millisecond)
	cfg := Config{
		Enabled: true, Name: "msr-kazan", Servers: []string{b.reg.server(0)}, ServiceInterface: "wan0",
		RegisterInterval: time.Hour, RetryInterval: time.Hour, ControlPort: -1,
		Debounce: 20 * time.Millisecond, Timeout: 5 * time.Second,
	}
	// A fresh subscription replays the whole state: start from nothing.
	a, err := New(cfg, b.ch, netcfg.State{}, nil, WithSockets(nsSockets{b.box}), WithLoad(func() int { return 5 }))
	if err != nil {
		t.Fatal(err)
	}
	run(t, a)
	reg := b.reg

	// One REGISTER per interface, all from the service address.
	got, other := collect(t, reg, "wan0", "lan0", "voice0")
	local := a.Service().Local
	for name, addr := range map[string]string{"wan0": "198.18.0.1", "lan0": "198.18.1.1", "voice0": "198.18.2.1"} {
		rec := got[name]
		if rec.src != local.String() || local.Addr() != netip.MustParseAddr("198.18.0.1") ||
			rec.hdr(DefaultHeaderPrefix+"Iface-Addr") != addr || rec.req.To().Address.String() != "sip:"+name+";1@msr-kazan" {
			t.Errorf("%s: %v (service socket %v)", name, rec, local)
		}
	}
	if len(other) != 0 {
		t.Errorf("other REGISTERs: %v", other)
	}
	if ann := a.Service().Announced; len(ann) != 3 {
		t.Errorf("announced %v (lo must not be)", ann)
	}

	// Add one.
	b.topo.Veth("box", "lan1", "peer", "lan1p")
	b.topo.Addr("box", "lan1", "198.18.3.1/24")
	b.topo.Up("peer", "lan1p")
	b.topo.Up("box", "lan1")
	add := reg.await("REGISTER of the new lan1", registered("lan1"))
	if add.hdr(DefaultHeaderPrefix+"Iface-Addr") != "198.18.3.1" {
		t.Errorf("lan1: %v", add)
	}

	// Remove one.
	b.topo.IP("box", "link", "del", "lan1")
	del := reg.await("unREGISTER of the deleted lan1", unregistered("lan1"))
	if del.req.CallID().Value() != add.req.CallID().Value() {
		t.Errorf("unREGISTER on another Call-ID")
	}

	// Change an address. (In another subnet: deleting a primary address
	// also deletes its subnet's secondaries unless promote_secondaries.)
	b.topo.Addr("box", "voice0", "198.18.20.9/24")
	b.topo.IP("box", "addr", "del", "198.18.2.1/24", "dev", "voice0")
	reg.await("REGISTER of voice0's new address", func(r record) bool {
		return registered("voice0")(r) && r.hdr(DefaultHeaderPrefix+"Iface-Addr") == "198.18.20.9"
	})

	// Take one down: lan0, and with it the macvlan on top (lower layer down).
	b.topo.Down("box", "lan0")
	down := map[string]bool{}
	for len(down) < 2 {
		rec := reg.await("unREGISTER after lan0 went down", func(r record) bool { return r.answer == 200 && r.expires() == 0 })
		if n := rec.iface(); n != "lan0" && n != "voice0" {
			t.Errorf("unexpected unREGISTER %v", rec)
		} else {
			down[n] = true
		}
	}
	st := waitStatus(t, a, "only wan0 left", func(s []UAStatus) bool { return len(s) == 1 })
	if st[0].Interface != "wan0" || !st[0].Registered {
		t.Errorf("status %+v", st)
	}
}
