package selection

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

func TestParseRegister(t *testing.T) {
	p := DefaultHeaderPrefix
	svc := map[string]string{
		p + "Name": "msr-kazan", p + "Iface-Name": "wan0", p + "Iface-Addr": "198.18.0.1",
		p + "Acc-Id": "1", p + "CC-Addr": "198.18.0.1", p + "CC-Port": "5700", p + "Load": "37",
		p + "Zone": "default", p + "Site": "kazan",
	}
	e, err := ParseRegister("", svc, "<sip:wan0;1@198.18.0.1:40000>", 600, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := Entry{
		MSR: "msr-kazan", AccID: "1", Interface: "wan0", Addr: netip.MustParseAddr("198.18.0.1"),
		Contact: "<sip:wan0;1@198.18.0.1:40000>", Zone: "default", Site: "kazan", Load: 37,
		Registered: true, Active: true, Expires: t0.Add(600 * time.Second),
		Control: netip.MustParseAddrPort("198.18.0.1:5700"),
	}
	if e != want {
		t.Errorf("service UA:\n got %+v\nwant %+v", e, want)
	}
	if e.Announced() != "wan0(198.18.0.1)" {
		t.Errorf("Announced = %q", e.Announced())
	}

	// Other prefix, lower-case names, interface-name(IP) form, no load.
	e, err = ParseRegister("X-MSR-", map[string]string{"x-msr-name": "b", "X-MSR-IFACE-NAME": "eth0.100(198.18.2.1)"}, "", 60, t0)
	if err != nil || e.Interface != "eth0.100" || e.Addr != netip.MustParseAddr("198.18.2.1") || e.Load != 0 || e.Control.IsValid() {
		t.Errorf("announced form: %+v, %v", e, err)
	}

	if !IsMSRRegister("", svc) || IsMSRRegister("", map[string]string{"User-Agent": "phone"}) {
		t.Error("IsMSRRegister")
	}
	if _, err := ParseRegister("", map[string]string{"Contact": "x"}, "", 60, t0); !errors.Is(err, ErrNotMSR) {
		t.Errorf("ordinary REGISTER: %v", err)
	}
	bad := []map[string]string{
		{p + "Name": "a"}, // no interface
		{p + "Iface-Name": "lan0", p + "Iface-Addr": "1.2.3.4"}, // no name
		{p + "Name": "a", p + "Iface-Name": "lan0"},             // no address
		{p + "Name": "a", p + "Iface-Name": "lan0", p + "Iface-Addr": "nope"},
		{p + "Name": "a", p + "Iface-Name": "lan0(1.2.3)", p + "Iface-Addr": "1.2.3.4"},
		{p + "Name": "a", p + "Iface-Name": "lan0", p + "Iface-Addr": "1.2.3.4", p + "Load": "high"},
		{p + "Name": "a", p + "Iface-Name": "lan0", p + "Iface-Addr": "1.2.3.4", p + "CC-Addr": "1.2.3.4"},
		{p + "Name": "a", p + "Iface-Name": "lan0", p + "Iface-Addr": "1.2.3.4", p + "CC-Addr": "1.2.3.4", p + "CC-Port": "0"},
		{p + "Name": "a", p + "Iface-Name": "lan0", p + "Iface-Addr": "1.2.3.4", p + "CC-Addr": "x", p + "CC-Port": "5700"},
	}
	for i, h := range bad {
		if _, err := ParseRegister("", h, "", 60, t0); !errors.Is(err, ErrMalformed) {
			t.Errorf("bad[%d]: err = %v, want ErrMalformed", i, err)
		}
	}
}

func TestTable(t *testing.T) {
	now := t0
	tb := NewTable(Policy{Performance: map[string]float64{"msr-a": 1.5}}, func() time.Time { return now })
	hdr := func(msr, iface, addr string) map[string]string {
		p := DefaultHeaderPrefix
		return map[string]string{p + "Name": msr, p + "Iface-Name": iface, p + "Iface-Addr": addr, p + "Zone": "default", p + "Site": "kazan"}
	}
	up := func(msr, iface, addr string, expires int) bool {
		t.Helper()
		e, err := ParseRegister("", hdr(msr, iface, addr), "<sip:x@1.2.3.4>", expires, now)
		if err != nil {
			t.Fatal(err)
		}
		return tb.Upsert(e)
	}
	up("msr-a", "lan0", "198.18.1.1", 60)
	up("msr-a", "voice0", "198.18.2.1", 120)
	up("msr-b", "lan0", "198.18.3.1", 60)
	snap := tb.Snapshot()
	if len(snap) != 3 || snap[0].Key() != (Key{"msr-a", "lan0"}) || snap[0].Coefficient != 1.5 || snap[2].Coefficient != 1 {
		t.Fatalf("snapshot %+v", snap)
	}
	// Re-REGISTER with a new address replaces.
	up("msr-a", "lan0", "198.18.1.9", 60)
	if s := tb.Snapshot(); s[0].Addr != netip.MustParseAddr("198.18.1.9") || len(s) != 3 {
		t.Errorf("replace: %+v", s)
	}
	// unREGISTER (Expires: 0) removes.
	if up("msr-b", "lan0", "198.18.3.1", 0) {
		t.Error("Upsert of an unREGISTER reported true")
	}
	if len(tb.Snapshot()) != 2 {
		t.Errorf("after unREGISTER: %+v", tb.Snapshot())
	}
	// Administratively inactive: kept, never selected, and stays so.
	tb.SetActive("msr-a", false)
	up("msr-a", "lan0", "198.18.1.1", 60)
	if _, err := tb.Select(Request{Zone: "default", Site: "kazan"}, fixed(0)); !errors.Is(err, ErrNoResource) {
		t.Errorf("inactive MSR selected: %v", err)
	}
	tb.SetActive("msr-a", true)
	if e, err := tb.Select(Request{Zone: "default", Site: "kazan"}, fixed(0)); err != nil || e.MSR != "msr-a" {
		t.Errorf("active again: %+v %v", e, err)
	}
	// Lapsed: reported unregistered, then expired out.
	now = now.Add(90 * time.Second)
	s := tb.Snapshot()
	if s[0].Registered || !s[1].Registered {
		t.Errorf("lapsed status: %+v", s)
	}
	if gone := tb.Expire(); len(gone) != 1 || gone[0].Interface != "lan0" {
		t.Errorf("Expire = %+v", gone)
	}
	tb.SetPolicy(Policy{})
	if s := tb.Snapshot(); len(s) != 1 || s[0].Coefficient != 1 {
		t.Errorf("after SetPolicy: %+v", s)
	}
	// A local resource passed beside the table takes the policy's
	// coefficient and can win.
	tb.SetPolicy(Policy{Performance: map[string]float64{"local": 3}})
	local := Entry{MSR: "local", Interface: "lan0", Addr: netip.MustParseAddr("198.18.1.1"), Zone: "default", Site: "kazan", Load: 0, Registered: true, Active: true}
	iv := Intervals(Candidates(append(tb.Snapshot(), local), Request{Zone: "default", Site: "kazan", Now: now}, Policy{Performance: map[string]float64{"local": 3}}))
	if len(iv) != 2 || iv[0].Entry.MSR != "local" || iv[0].Hi != 300 || iv[1].Hi-iv[1].Lo != 100 {
		t.Errorf("with a local resource: %+v", iv)
	}
	if e, err := tb.Select(Request{Zone: "default", Site: "kazan"}, fixed(0), local); err != nil || e.MSR != "local" {
		t.Errorf("Select with extra: %+v %v", e, err)
	}
	// An extra entry of an MSR made inactive is never chosen either, at
	// any draw; the caller's slice is left alone.
	tb.SetActive("local", false)
	if tb.Active("local") || !tb.Active("msr-a") || !tb.Active("never-seen") {
		t.Error("Active flags")
	}
	for _, f := range []float64{0, 0.5, 0.999} {
		if e, err := tb.Select(Request{Zone: "default", Site: "kazan"}, fixed(f), local); err != nil || e.MSR != "msr-a" {
			t.Errorf("inactive extra, draw %v: %+v %v", f, e, err)
		}
	}
	if !local.Active {
		t.Error("Select changed the caller's entry")
	}
	tb.SetActive("local", true)
	tb.SetPolicy(Policy{})
	if !tb.Remove(Key{"msr-a", "voice0"}) || tb.Remove(Key{"msr-a", "voice0"}) {
		t.Error("Remove")
	}
	up("msr-c", "a", "198.18.4.1", 60)
	up("msr-c", "b", "198.18.4.2", 60)
	if n := tb.RemoveMSR("msr-c"); n != 2 || len(tb.Snapshot()) != 0 {
		t.Errorf("RemoveMSR = %d", n)
	}
}

// TestTablePolicyPlacementAndInactive: the document's placement replaces
// the zone and site an MSR declared, its inactive list keeps the MSR out
// of selection beside SetActive, and a policy without them restores what
// the MSR declared.
func TestTablePolicyPlacementAndInactive(t *testing.T) {
	tb := NewTable(Policy{}, func() time.Time { return t0 })
	declared := ent("msr-b", "lan0", 10, 1) // zone default, site kazan
	declared.Expires = time.Time{}
	tb.Upsert(declared)
	kazan := Request{Zone: "default", Site: "kazan"}
	if e, err := tb.Select(kazan, fixed(0)); err != nil || e.MSR != "msr-b" {
		t.Fatalf("as declared: %+v %v", e, err)
	}
	tb.SetPolicy(Policy{Placement: map[string]Placement{"msr-b": {Zone: "voice"}}})
	if s := tb.Snapshot(); s[0].Zone != "voice" || s[0].Site != "kazan" {
		t.Errorf("placed in zone voice (site kept): %+v", s[0])
	}
	if _, err := tb.Select(kazan, fixed(0)); !errors.Is(err, ErrNoResource) {
		t.Errorf("an MSR placed in another zone was selected: %v", err)
	}
	if e, err := tb.Select(Request{Zone: "voice", Site: "kazan"}, fixed(0)); err != nil || e.MSR != "msr-b" {
		t.Errorf("in its placed zone: %+v %v", e, err)
	}
	tb.SetPolicy(Policy{Inactive: map[string]bool{"msr-b": true}})
	if tb.Active("msr-b") || !tb.AdminActive("msr-b") || tb.Snapshot()[0].Active {
		t.Errorf("inactive by the policy: Active %v AdminActive %v snapshot %+v", tb.Active("msr-b"), tb.AdminActive("msr-b"), tb.Snapshot()[0])
	}
	if _, err := tb.Select(kazan, fixed(0)); !errors.Is(err, ErrNoResource) {
		t.Errorf("an MSR the policy lists inactive was selected: %v", err)
	}
	tb.SetPolicy(Policy{})
	if s := tb.Snapshot(); !s[0].Active || s[0].Zone != "default" {
		t.Errorf("policy taken back: %+v", s[0])
	}
}
