package msr

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/outpost/outpost/netcfg"
)

func TestAnnounced(t *testing.T) {
	n := baseNet(t)
	// A link-local-only link and a VLAN whose name the globs miss.
	n.link(20, "lan7", "veth", true).addr(20, "fe80::7/64")
	n.vlan(21, "vlan300", 300, idxETH).addr(21, "198.18.30.1/24")
	cfg := testConfig().withDefaults()
	svc, ok, all := announced(n.state(), cfg)
	want := []iface{
		{Name: "wan0", Addr: netip.MustParseAddr("127.0.0.1"), Kind: "veth", Service: true},
		{Name: "eth0.100", Addr: netip.MustParseAddr("198.18.100.1"), Kind: "vlan", VLANID: 100},
		{Name: "lan0", Addr: netip.MustParseAddr("198.18.1.1"), Kind: "veth"},
	}
	if !ok || svc != want[0] || !reflect.DeepEqual(all, want) {
		t.Errorf("announced:\n got %+v %v %+v\nwant %+v", svc, ok, all, want)
	}

	// "*" takes every usable link with an address but loopback.
	cfg.Interfaces = []string{"*"}
	_, _, all = announced(n.state(), cfg)
	var names []string
	for _, f := range all {
		names = append(names, f.Name)
	}
	if fmt.Sprint(names) != "[wan0 eth0.100 ext0 lan0 vlan300]" {
		t.Errorf("with *: %v", names)
	}

	// The service interface is announced even when the globs miss it.
	cfg.Interfaces = []string{"lan*"}
	if _, ok, all := announced(n.state(), cfg); !ok || len(all) != 2 || all[0].Name != "wan0" {
		t.Errorf("service outside the globs: %v %+v", ok, all)
	}
	// No carrier (admin up): not usable.
	st := n.state()
	l := st.Links[idxWAN]
	l.Carrier = false
	st.Links[idxWAN] = l
	if _, ok, _ := announced(st, cfg); ok {
		t.Error("service interface without carrier announced")
	}
}

func TestMediaAddr(t *testing.T) {
	p := func(s ...string) (out []netip.Prefix) {
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	cases := []struct {
		in   []netip.Prefix
		want string
	}{
		{p("198.18.0.1/24", "198.18.0.2/24"), "198.18.0.1"},
		{p("fe80::1/64", "2001:2::1/64"), "2001:2::1"},
		{p("169.254.1.1/16", "2001:2::1/64"), "2001:2::1"},
		{p("fe80::1/64"), ""},
		{nil, ""},
	}
	for _, c := range cases {
		a, ok := mediaAddr(c.in)
		if got := map[bool]string{true: a.String(), false: ""}[ok]; got != c.want {
			t.Errorf("mediaAddr(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Applying the Watcher's batches, Diff(s[i], s[i+1]), one after another
// rebuilds the links and usable addresses of the last state, whatever the
// path (random states over a few links, renames and VLAN attributes
// included).
func TestApplyEventsRebuildsState(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 11))
	randomState := func() netcfg.State {
		st := netcfg.State{Links: map[int]netcfg.Link{}}
		for idx := 1; idx <= 6; idx++ {
			if rnd.IntN(4) == 0 {
				continue
			}
			l := netcfg.Link{Index: idx, Name: fmt.Sprintf("if%d", idx), Kind: "veth", Up: rnd.IntN(3) > 0, MTU: 1500}
			l.Carrier = l.Up && rnd.IntN(4) > 0
			if rnd.IntN(3) == 0 {
				l.Name = fmt.Sprintf("eth0.%d", 100+idx)
				l.Kind, l.VLANID = "vlan", 100+idx
			}
			st.Links[idx] = l
			for a := range rnd.IntN(3) {
				st.Addrs = append(st.Addrs, netcfg.Addr{LinkIndex: idx, Prefix: netip.MustParsePrefix(fmt.Sprintf("198.18.%d.%d/24", idx, 1+rnd.IntN(2)+a*2)),
					Tentative: rnd.IntN(5) == 0})
			}
		}
		st.Normalize()
		return st
	}
	usable := func(st netcfg.State) netcfg.State {
		out := netcfg.State{Links: st.Links}
		for _, a := range st.Addrs {
			if !a.Tentative {
				out.Addrs = append(out.Addrs, a)
			}
		}
		out.Normalize()
		return out
	}
	for run := range 200 {
		var prev, got netcfg.State
		for range 8 {
			next := randomState()
			got = applyEvents(got, netcfg.Diff(prev, next))
			prev = next
		}
		want := usable(prev)
		if len(got.Links) == 0 && len(want.Links) == 0 {
			continue
		}
		if !reflect.DeepEqual(got.Links, want.Links) || !slices.Equal(got.Addrs, want.Addrs) {
			t.Fatalf("run %d:\n got %+v\nwant %+v", run, got, want)
		}
	}
}
