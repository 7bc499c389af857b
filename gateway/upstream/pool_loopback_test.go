package upstream

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Item 5 over real UDP: HQ A answers 302 Contact: B; B challenges and
// accepts; the refreshes go to B; B fails (503) and the registration is
// back at A's order.
func TestLoopbackRedirect(t *testing.T) {
	a, b := newHQ(t, "A", time.Hour), newHQ(t, "B", time.Hour)
	aAddr, bAddr := startHQ(t, a), startHQ(t, b)
	a.set(func(h *hq) { h.redirect = "<sip:" + bAddr + ";transport=udp>" })
	tr := &trunk{targets: []string{"udp:" + aAddr}}
	ag, _ := startBox(t, Config{Trunk: tr, Expires: 2 * time.Second, Timeout: 2 * time.Second})

	ag.Set("1001")
	next(t, a, "302", func(r rec) bool { return r.Code == 302 })
	first := next(t, b, "registration at B", func(r rec) bool { return r.Code == 200 })
	refresh := next(t, b, "refresh at B", func(r rec) bool { return r.Code == 200 && r.CSeq > first.CSeq })
	if refresh.NC != "00000002" || refresh.CallID != first.CallID {
		t.Fatalf("refresh %+v after %+v", refresh, first)
	}
	if got := summary(a.records()); got != "1001 302 e=2" {
		t.Fatalf("A saw %s: refreshes must stay at B", got)
	}
	if e := entryOf(t, ag, "1001"); e.Target != "udp:"+bAddr || !e.Redirected {
		t.Fatalf("status %+v", e)
	}

	b.set(func(h *hq) { h.status = 503 })
	a.set(func(h *hq) { h.redirect = "" })
	next(t, b, "503", func(r rec) bool { return r.Code == 503 })
	next(t, a, "registration back at A", func(r rec) bool { return r.Code == 200 })
	st := settled(t, ag, func(e Entry) bool { return e.State == StateRegistered && e.Target == "udp:"+aAddr })
	if st[0].Redirected {
		t.Fatalf("status %+v", st[0])
	}
}

// Item 6 over real UDP with two registrars of one priority: users split
// between them by the hash, the same split after a restart of the box,
// A's users fail over to B when A fails, and come back when A recovers,
// withdrawing (Expires: 0) their bindings at B.
func TestLoopbackStickyPool(t *testing.T) {
	a, b := newHQ(t, "A", time.Hour), newHQ(t, "B", time.Hour)
	aAddr, bAddr := startHQ(t, a), startHQ(t, b)
	p := newPool("udp:"+aAddr, "udp:"+bAddr)
	name := map[string]string{"udp:" + aAddr: "A", "udp:" + bAddr: "B"}
	cfg := Config{Trunk: p, Expires: time.Hour, Timeout: 2 * time.Second, Recheck: 100 * time.Millisecond, ReplayRate: 200}
	var users []string
	home := map[string]string{}
	var onA, onB []string
	for i := range 16 {
		u := fmt.Sprint(1000 + i)
		users = append(users, u)
		home[u] = name[preference(aorOf(u, domain), p.cands, "udp")[0].Target]
		if home[u] == "A" {
			onA = append(onA, u)
		} else {
			onB = append(onB, u)
		}
	}
	if len(onA) == 0 || len(onB) == 0 {
		t.Fatalf("the hash puts every user on one registrar: A %v B %v", onA, onB)
	}
	// split registers everyone and returns where each user was accepted.
	split := func(ag *Agent) map[string]string {
		for _, u := range users {
			ag.Set(u)
		}
		st := settled(t, ag, func(e Entry) bool { return e.State == StateRegistered })
		at := map[string]string{}
		for _, e := range st {
			at[e.User] = name[e.Target]
		}
		return at
	}
	ag, _, stop := startBoxStop(t, cfg)
	if got := split(ag); len(got) != len(users) || !mapsEqual(got, home) {
		t.Fatalf("users at %v, want %v", got, home)
	}
	stop()
	nA, nB := len(a.records()), len(b.records())
	ag, _, _ = startBoxStop(t, cfg)
	if got := split(ag); !mapsEqual(got, home) {
		t.Fatalf("after a restart users at %v, want %v", got, home)
	}
	if got := usersAt(&hq{recs: a.records()[nA:]}, &hq{recs: b.records()[nB:]}); len(got) != len(users) {
		t.Fatalf("after the restart: %v", got)
	}

	// A fails: its probes go down and it answers 503.
	a.set(func(h *hq) { h.status = 503 })
	p.set("udp:"+aAddr, false)
	failover := time.Now()
	st := settled(t, ag, func(e Entry) bool { return e.State == StateRegistered && e.Target == "udp:"+bAddr })
	t.Logf("A's %d users at B %v after A went down", len(onA), time.Since(failover))

	// A recovers: A's users come back and their bindings at B go.
	nB = len(b.records())
	for drained := false; !drained; { // what B saw before
		select {
		case <-b.ch:
		default:
			drained = true
		}
	}
	a.set(func(h *hq) { h.status = 0 })
	p.set("udp:"+aAddr, true)
	back := time.Now()
	var withdrawn []string
	for len(withdrawn) < len(onA) {
		r := next(t, b, "withdrawal", func(r rec) bool { return r.Code == 200 })
		if r.Expires != 0 {
			t.Fatalf("B got %+v after A recovered", r)
		}
		withdrawn = append(withdrawn, r.User)
	}
	slices.Sort(withdrawn)
	if !slices.Equal(withdrawn, onA) {
		t.Fatalf("withdrawn at B %v, want A's users %v", withdrawn, onA)
	}
	st = settled(t, ag, func(e Entry) bool { return e.State == StateRegistered && name[e.Target] == home[e.User] })
	t.Logf("A's users back at A, bindings at B withdrawn, %v after A recovered (refresh due in %v)", time.Since(back), time.Until(st[0].NextAt).Round(time.Minute))
	for _, r := range b.records()[nB:] {
		if !slices.Contains(onA, r.User) || r.Expires != 0 {
			t.Fatalf("B saw %+v: only A's users' withdrawals expected", r)
		}
	}
}

func mapsEqual(x, y map[string]string) bool {
	if len(x) != len(y) {
		return false
	}
	for k, v := range x {
		if y[k] != v {
			return false
		}
	}
	return true
}
