package pool

import (
	"errors"
	"testing"
	"time"

	"github.com/outpost/outpost/siptarget"
)

func testPool(t *testing.T, self string, now *time.Time) *Pool {
	t.Helper()
	var ms []Member
	for _, m := range []struct{ name, target string }{
		{"box-a", "udp:198.18.60.1:5060"}, {"box-b", "udp:198.18.60.2:5060"}, {"box-c", "udp:198.18.60.3:5060"},
	} {
		tg, err := siptarget.Parse(m.target, siptarget.UDP)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, Member{Name: m.name, Target: tg})
	}
	p, err := New(Config{Self: self, Members: ms, Domain: "branch.example", DownAfter: 2, UpAfter: 1, Hold: 10 * time.Second, Secret: "shared-between-members"},
		WithClock(func() time.Time { return *now }))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func names(ms []Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

// TestHomeAndFailback walks one user homed on box-b through the pool's
// life as box-a sees it: redirected to b; b dies (two failed probes) and
// box-a, its first backup, serves it; b comes back, but its users stay
// here until it has been up for the hold; then they are sent back.
func TestHomeAndFailback(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	p := testPool(t, "box-a", &now)
	// sip:1001@branch.example orders box-b box-a box-c (rendezvous table).
	if got := names(p.Order("1001")); len(got) != 3 || got[0] != "box-b" || got[1] != "box-a" {
		t.Fatalf("order of 1001 = %v", got)
	}
	step := func(what string, wantRedirect bool, wantHome string) {
		t.Helper()
		m, redirect := p.Redirect("1001")
		if redirect != wantRedirect || m.Name != wantHome {
			t.Fatalf("%s: Redirect = %s, %v; want %s, %v", what, m.Name, redirect, wantHome, wantRedirect)
		}
	}
	step("all up", true, "box-b")
	if got := names(p.Peers("1001")); len(got) != 2 || got[0] != "box-b" {
		t.Fatalf("peers = %v", got)
	}
	b := "udp:198.18.60.2:5060"
	p.Tracker().ProbeResult(b, false, 0)
	step("one failed probe", true, "box-b")
	p.Tracker().ProbeResult(b, false, 0)
	step("b down", false, "box-a")
	if got := names(p.Peers("1001")); len(got) != 1 || got[0] != "box-c" {
		t.Fatalf("peers with b down = %v", got)
	}
	now = now.Add(time.Second)
	p.Tracker().ProbeResult(b, true, time.Millisecond)
	step("b back, within hold", false, "box-a")
	if got := names(p.Peers("1001")); len(got) != 2 || got[0] != "box-b" {
		t.Fatalf("peers with b back = %v: calls must reach it at once", got)
	}
	now = now.Add(10 * time.Second)
	step("b up for the hold", true, "box-b")

	// A user whose primary is this box is always accepted here.
	if m, redirect := p.Redirect("1003"); redirect || m.Name != "box-a" {
		t.Fatalf("1003 (primary box-a): Redirect = %s, %v", m.Name, redirect)
	}
}

func TestMembersStatus(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	p := testPool(t, "box-b", &now)
	p.Tracker().ProbeResult("udp:198.18.60.3:5060", false, 0)
	p.Tracker().ProbeResult("udp:198.18.60.3:5060", false, 0)
	ms := p.Members()
	if len(ms) != 3 || !ms[1].Self || !ms[0].Up || ms[2].Up || ms[2].Serving {
		t.Fatalf("members = %+v", ms)
	}
}

func TestMemberAt(t *testing.T) {
	now := time.Now()
	p := testPool(t, "box-a", &now)
	for _, c := range []struct {
		tr   siptarget.Transport
		addr string
		want string
	}{
		{siptarget.UDP, "198.18.60.2:5060", "box-b"},
		{siptarget.UDP, "198.18.60.2:5061", ""},  // UDP: the exact port
		{siptarget.TCP, "198.18.60.2:40000", ""}, // configured udp: not over TCP
		{siptarget.UDP, "198.18.60.1:5060", ""},  // self is not a peer
		{siptarget.UDP, "198.18.60.9:5060", ""},
	} {
		m, ok := p.MemberAt(c.tr, c.addr)
		if ok != (c.want != "") || m.Name != c.want {
			t.Errorf("MemberAt(%s, %s) = %q, %v; want %q", c.tr, c.addr, m.Name, ok, c.want)
		}
	}
}

func TestCheck(t *testing.T) {
	tg, _ := siptarget.Parse("udp:198.18.60.1:5060", siptarget.UDP)
	for _, c := range []Config{
		{Self: "a", Members: []Member{{Name: "a", Target: tg}}, Secret: "x"},
		{Self: "z", Members: []Member{{Name: "a", Target: tg}, {Name: "b", Target: tg}}, Secret: "x"},
		{Self: "a", Members: []Member{{Name: "a", Target: tg}, {Name: "b", Target: tg}}},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}

func TestSignVerify(t *testing.T) {
	const secret = "shared-between-members"
	now := time.Unix(1_800_000_000, 0)
	v := Sign(secret, "call-1", "1001", "1002", now)
	for _, c := range []struct {
		name                      string
		secret, value, callID, to string
		at                        time.Time
		want                      error
	}{
		{"good", secret, v, "call-1", "1002", now, nil},
		{"late but in window", secret, v, "call-1", "1002", now.Add(Window), nil},
		{"stale", secret, v, "call-1", "1002", now.Add(Window + time.Second), ErrStale},
		{"future", secret, v, "call-1", "1002", now.Add(-Window - time.Second), ErrStale},
		{"other call", secret, v, "call-2", "1002", now, ErrBadSignature},
		{"other callee", secret, v, "call-1", "1003", now, ErrBadSignature},
		{"other secret", "another-secret-of-16", v, "call-1", "1002", now, ErrBadSignature},
		{"none", secret, "", "call-1", "1002", now, ErrNoSignature},
		{"garbage", secret, "t=x;m=%%", "call-1", "1002", now, ErrBadSignature},
	} {
		if err := Verify(c.secret, c.value, c.callID, "1001", c.to, c.at); !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
}
