package upstream

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// The rendezvous hash is part of the contract between boxes: pin it. The
// orders below were also computed independently (Python hashlib).
func TestPreferenceTable(t *testing.T) {
	if got := score("sip:1001@branch7.example", "198.18.1.10:5060"); got != 0xce69954f2ca3706e {
		t.Fatalf("score = %#x: the hash changed, and with it every user's registrar", got)
	}
	pool := []Candidate{
		{Target: "udp:198.18.1.10:5060"}, {Target: "udp:198.18.1.11:5060"}, {Target: "udp:198.18.1.12:5060"},
		{Target: "udp:198.18.2.10:5060", Priority: 10}, // another region: after the whole first group
	}
	want := map[string]string{
		"1001": "1.11 1.12 1.10 2.10",
		"1002": "1.10 1.11 1.12 2.10",
		"1003": "1.11 1.12 1.10 2.10",
		"1004": "1.11 1.10 1.12 2.10",
		"1005": "1.11 1.12 1.10 2.10",
		"1006": "1.10 1.12 1.11 2.10",
		"1007": "1.12 1.10 1.11 2.10",
		"1008": "1.12 1.10 1.11 2.10",
	}
	short := func(cs []Candidate) string {
		var s []string
		for _, c := range cs {
			s = append(s, strings.TrimSuffix(c.Target[strings.Index(c.Target, "198.18.")+len("198.18."):], ":5060"))
		}
		return strings.Join(s, " ")
	}
	reversed := slices.Clone(pool)
	slices.Reverse(reversed)
	tcp := slices.Clone(pool)
	for i := range tcp {
		tcp[i].Target = "tcp:" + strings.TrimPrefix(tcp[i].Target, "udp:")
	}
	for user, w := range want {
		aor := aorOf(user, domain)
		if got := short(preference(aor, pool, "udp")); got != w {
			t.Errorf("%s: order %s, want %s", user, got, w)
		}
		// Resolution order and transport do not matter.
		if got := short(preference(aor, reversed, "udp")); got != w {
			t.Errorf("%s, targets resolved in another order: %s, want %s", user, got, w)
		}
		if got := short(preference(aor, tcp, "udp")); got != w {
			t.Errorf("%s over TCP: %s, want %s", user, got, w)
		}
	}
}

// Adding a registrar to a group of n moves about 1/(n+1) of the users,
// all of them to the new registrar, and keeps everyone else's order.
func TestPreferenceAddTarget(t *testing.T) {
	const users = 20000
	var before []Candidate
	for i := range 4 {
		before = append(before, Candidate{Target: fmt.Sprintf("udp:198.18.1.%d:5060", 10+i)})
	}
	added := Candidate{Target: "udp:198.18.1.99:5060"}
	after := append(slices.Clone(before), added)
	moved := 0
	per := map[string]int{}
	for i := range users {
		aor := aorOf(fmt.Sprint(100000+i), domain)
		b, a := preference(aor, before, "udp"), preference(aor, after, "udp")
		per[b[0].Target]++
		if a[0] != b[0] {
			moved++
			if a[0] != added {
				t.Fatalf("%s moved from %s to %s, not to the new registrar", aor, b[0].Target, a[0].Target)
			}
		}
		if rest := slices.DeleteFunc(slices.Clone(a), func(c Candidate) bool { return c == added }); !slices.Equal(rest, b) {
			t.Fatalf("%s: the old registrars' order changed: %v → %v", aor, b, a)
		}
	}
	share := float64(moved) / users
	if math.Abs(share-1.0/5) > 0.01 {
		t.Errorf("%.3f of the users moved, want about 1/5", share)
	}
	for target, n := range per { // and the split is even
		if math.Abs(float64(n)/users-0.25) > 0.015 {
			t.Errorf("%s is primary for %d of %d users", target, n, users)
		}
	}
}

func TestStickyPlan(t *testing.T) {
	pool := []Candidate{
		{Target: "udp:198.18.1.10:5060"}, {Target: "udp:198.18.1.11:5060"}, {Target: "udp:198.18.1.12:5060"},
		{Target: "udp:198.18.2.10:5060", Priority: 10},
	}
	aor := aorOf("1001", domain) // 1.11 1.12 1.10 2.10
	with := func(down ...string) []Candidate {
		out := slices.Clone(pool)
		for i := range out {
			out[i].Eligible = !slices.Contains(down, out[i].Target[len("udp:198.18."):len(out[i].Target)-5])
		}
		return out
	}
	for _, tc := range []struct {
		down []string
		want string
	}{
		{nil, "1.11 1.12 1.10 2.10"},
		{[]string{"1.11"}, "1.12 1.10 2.10"},               // the next backup
		{[]string{"1.11", "1.12", "1.10"}, "2.10"},         // another region only when the group failed
		{[]string{"1.11", "1.12", "1.10", "2.10"}, "1.11"}, // all blocked: the user's own primary
	} {
		p := stickyPlan(aor, with(tc.down...), "udp")
		var got []string
		for _, n := range p.attempts {
			got = append(got, n[len("udp:198.18."):len(n)-5])
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("down %v: attempts %v, want %s", tc.down, got, tc.want)
		}
	}
}

// usersAt maps each user to the registrars its REGISTERs (e>0) went to.
func usersAt(hs ...*hq) map[string][]string {
	out := map[string][]string{}
	for _, h := range hs {
		for _, r := range h.records() {
			if r.Expires > 0 && !slices.Contains(out[r.User], h.name) {
				out[r.User] = append(out[r.User], h.name)
			}
		}
	}
	return out
}

// Sticky registrars in fake time: each user stays on its hashed primary
// through refreshes, moves to its backup within one Recheck of its
// primary going down (not at the next refresh), and comes back within
// one Recheck of the primary's recovery, withdrawing the binding left on
// the backup.
func TestStickyFailoverFailback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newHQ(t, "A", time.Hour), newHQ(t, "B", time.Hour)
		p := newPool("udp:"+hqA, "udp:"+hqB)
		ag := start(t, fakeNet{hqA: a, hqB: b}, Config{Trunk: p, Expires: 600 * time.Second, Recheck: time.Second})
		var users []string
		for i := range 20 {
			users = append(users, fmt.Sprint(1000+i))
			ag.Set(users[i])
		}
		settle(5 * 600 * time.Second) // several refreshes
		home := map[string]string{}
		for _, u := range users {
			at := usersAt(a, b)[u]
			if len(at) != 1 {
				t.Fatalf("%s registered at %v: refreshes hopped", u, at)
			}
			home[u] = at[0]
			if want := strings.TrimPrefix(preference(aorOf(u, domain), p.cands, "udp")[0].Target, "udp:"); map[string]string{hqA: "A", hqB: "B"}[want] != at[0] {
				t.Fatalf("%s at %s, want its hashed primary %s", u, at[0], want)
			}
		}
		var onA []string
		for _, u := range users {
			if home[u] == "A" {
				onA = append(onA, u)
			}
		}
		if len(onA) < 5 || len(onA) > 15 {
			t.Fatalf("%d of 20 users on A: a poor split", len(onA))
		}

		// A goes down (its probes fail): its users move within a second.
		nA, nB := len(a.records()), len(b.records())
		a.set(func(h *hq) { h.status = 503 })
		p.set("udp:"+hqA, false)
		settle(time.Second + time.Duration(len(onA))*time.Second/DefaultReplayRate)
		if got := len(a.records()); got != nA {
			t.Fatalf("A, down, got %s", summary(a.records()[nA:]))
		}
		moved := map[string]bool{}
		for _, r := range b.records()[nB:] {
			if r.Code == 200 && r.Expires > 0 {
				moved[r.User] = true
			}
		}
		for _, u := range users {
			if moved[u] != (home[u] == "A") {
				t.Fatalf("after A went down, moved to B: %v; A's users %v", moved, onA)
			}
			if e := entryOf(t, ag, u); e.State != StateRegistered || e.Target != "udp:"+hqB {
				t.Fatalf("%s: %+v", u, e)
			}
		}

		// A recovers: within a second its users are back and their
		// bindings on B withdrawn; B's own users are untouched.
		nA, nB = len(a.records()), len(b.records())
		a.set(func(h *hq) { h.status = 0 })
		p.set("udp:"+hqA, true)
		settle(time.Second + time.Duration(2*len(onA))*time.Second/DefaultReplayRate)
		var backA, withdrawn []string
		for _, r := range a.records()[nA:] {
			if r.Code == 200 && r.Expires > 0 {
				backA = append(backA, r.User)
			}
		}
		for _, r := range b.records()[nB:] { // each withdrawal is challenged: B is not the last registrar that challenged
			if r.Expires != 0 {
				t.Fatalf("B saw %+v after A recovered, want only withdrawals", r)
			}
			if r.Code == 200 {
				withdrawn = append(withdrawn, r.User)
			}
		}
		if !slices.Equal(backA, onA) || !slices.Equal(withdrawn, onA) {
			t.Fatalf("back at A %v, withdrawn at B %v; want both %v", backA, withdrawn, onA)
		}
		for _, u := range users {
			if e := entryOf(t, ag, u); e.State != StateRegistered || e.Target != "udp:"+map[string]string{"A": hqA, "B": hqB}[home[u]] {
				t.Fatalf("%s: %+v", u, e)
			}
		}
	})
}
