package appliance

import (
	"net/netip"
	"testing"
	"time"

	"github.com/outpost/outpost/media/selection"
)

type fixedRand float64

func (r fixedRand) Float64() float64 { return float64(r) }

// TestChooseMedia: which resource anchors a call's media, for the box's
// own resources beside another box's MSR registered here.
func TestChooseMedia(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	local := localResources{MSR: "box-a", Zone: "kzn", Site: "a"}
	own := []selection.Entry{{MSR: "box-a", Interface: "lan0", Addr: netip.MustParseAddr("198.18.61.1"), Zone: "kzn", Site: "a", Registered: true, Active: true}}
	ctl := netip.MustParseAddrPort("198.18.61.2:5700")
	remoteB := func(mod func(*selection.Entry)) []selection.Entry {
		svc := selection.Entry{MSR: "box-b", Interface: "lan0", Addr: netip.MustParseAddr("198.18.61.2"), Contact: "sip:lan0;1@198.18.61.2:40000",
			Zone: "kzn", Site: "b", Load: 10, Registered: true, Active: true, Expires: now.Add(time.Minute), Control: ctl}
		other := svc
		other.Interface, other.Addr, other.Control, other.Contact = "lan1", netip.MustParseAddr("198.18.62.2"), netip.AddrPort{}, "sip:lan1;1@198.18.61.2:40000"
		if mod != nil {
			mod(&svc)
			mod(&other)
		}
		return []selection.Entry{svc, other}
	}
	bNearer := selection.Policy{Matrix: map[string]map[string]int{"a": {"a": 10, "b": 1}}}
	aNearer := selection.Policy{Matrix: map[string]map[string]int{"a": {"a": 0, "b": 5}}}
	allActive := func(string) bool { return true }

	cases := []struct {
		name   string
		own    []selection.Entry
		remote []selection.Entry
		pol    selection.Policy
		active func(string) bool
		want   string // MSR of the remote resource chosen; "" = the local relay
	}{
		{"the other box is nearer", own, remoteB(nil), bNearer, allActive, "box-b"},
		{"this box is nearer", own, remoteB(nil), aNearer, allActive, ""},
		{"the other box made inactive", own, remoteB(nil), bNearer, func(n string) bool { return n != "box-b" }, ""},
		{"this box made inactive", own, remoteB(nil), aNearer, func(n string) bool { return n != "box-a" }, "box-b"},
		{"no control channel known", own, remoteB(func(e *selection.Entry) { e.Control = netip.AddrPort{} }), bNearer, allActive, ""},
		{"another zone", own, remoteB(func(e *selection.Entry) { e.Zone = "msk" }), bNearer, allActive, ""},
		{"registration lapsed", own, remoteB(func(e *selection.Entry) { e.Expires = now.Add(-time.Second) }), bNearer, allActive, ""},
		{"site forbidden", own, remoteB(nil), selection.Policy{Matrix: map[string]map[string]int{"a": {"a": 3}}}, allActive, ""},
		{"box announces nothing: it still stands for itself", nil, remoteB(nil), aNearer, allActive, ""},
		{"box announces nothing, the other is nearer", nil, remoteB(nil), bNearer, allActive, "box-b"},
		{"nothing qualifies: local relay", own, remoteB(nil), bNearer, func(string) bool { return false }, ""},
	}
	box := selection.Request{Zone: "kzn", Site: "a"}
	both := [2]selection.Request{box, box}
	for _, c := range cases {
		ch := chooseMedia(c.own, c.remote, local, both, c.pol, c.active, fixedRand(0), now)
		for i, x := range ch {
			got := ""
			if x.Remote {
				got = x.Entry.MSR
				if x.Control != ctl {
					t.Errorf("%s, leg %d: control address %v, want %v", c.name, i, x.Control, ctl)
				}
				if x.Entry.Contact == "" {
					t.Errorf("%s, leg %d: no contact", c.name, i)
				}
			}
			if got != c.want {
				t.Errorf("%s, leg %d: chose %q, want %q", c.name, i, got, c.want)
			}
		}
	}

	// Legs with their own sites: each gets its nearest; the callee
	// shares the caller's when that is among its nearest.
	perLeg := selection.Policy{Matrix: map[string]map[string]int{"a": {"a": 0, "b": 5}, "b": {"b": 0, "a": 5}, "c": {"c": 0}}}
	for _, c := range []struct {
		name       string
		legs       [2]selection.Request
		wantA, wan string
	}{
		{"both at the box's site", both, "", ""},
		{"caller at b, callee at a: each its own", [2]selection.Request{{Zone: "kzn", Site: "b"}, box}, "box-b", ""},
		{"both at b", [2]selection.Request{{Zone: "kzn", Site: "b"}, {Zone: "kzn", Site: "b"}}, "box-b", "box-b"},
		{"caller at a, callee at c: box-a is forbidden to c", [2]selection.Request{box, {Zone: "kzn", Site: "c"}}, "", ""},
		{"caller at a, callee in another zone", [2]selection.Request{box, {Zone: "msk", Site: "b"}}, "", ""},
	} {
		ch := chooseMedia(own, remoteB(nil), local, c.legs, perLeg, allActive, fixedRand(0), now)
		if got := [2]string{ch[0].Entry.MSR, ch[1].Entry.MSR}; got != [2]string{c.wantA, c.wan} {
			t.Errorf("%s: chose %q, want %q and %q", c.name, got, c.wantA, c.wan)
		}
	}
	// At equal distance the callee shares the caller's MSR, whatever the
	// draw would say.
	tie := selection.Policy{Matrix: map[string]map[string]int{"a": {"a": 0, "b": 5}, "b": {"a": 1, "b": 1}}}
	for _, r := range []float64{0, 0.99} {
		ch := chooseMedia(own, remoteB(nil), local, [2]selection.Request{box, {Zone: "kzn", Site: "b"}}, tie, allActive, fixedRand(r), now)
		if ch[0].Remote || ch[1].Remote {
			t.Errorf("caller at a, callee at b at equal distance (draw %.2f): chose %+v, want box-a for both", r, ch)
		}
	}

	// Equal distances: the weighted draw decides, by (100 − load) ×
	// coefficient. box-a (load 0, weight 100) owns [0, 100), box-b (load
	// 10, coefficient 2: weight 180) [100, 280).
	eq := selection.Policy{Matrix: map[string]map[string]int{"a": {"a": 1, "b": 1}}, Performance: map[string]float64{"box-b": 2}}
	for _, d := range []struct {
		r    float64
		want string
	}{{0.3, ""}, {0.35, ""}, {0.36, "box-b"}, {0.99, "box-b"}} {
		ch := chooseMedia(own, remoteB(func(e *selection.Entry) { e.Coefficient = 2 }), local, both, eq, allActive, fixedRand(d.r), now)
		got := ""
		if ch[0].Remote {
			got = ch[0].Entry.MSR
		}
		if got != d.want {
			t.Errorf("equal distance, draw %.2f: chose %q, want %q", d.r, got, d.want)
		}
	}
}
