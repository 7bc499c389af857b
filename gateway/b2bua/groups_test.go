package b2bua

import (
	"strings"
	"testing"
	"time"
)

// groupEnv is a box with hunt group 1900 (members 1002 and 1003) and
// users 1001-1004.
func groupEnv(t *testing.T, g Group, sv *memServices, rec *cdrs) *env {
	g.Extension = "1900"
	if g.Members == nil {
		g.Members = []string{"1002", "1003"}
	}
	if sv == nil {
		sv = newMemServices("1001", "1002", "1003", "1004")
	}
	return newEnvVM(t, Config{Groups: []Group{g}, Services: sv, OnEnd: rec.on}, nil)
}

// noInvite fails when p got an INVITE.
func noInvite(t *testing.T, p *phone, why string) {
	t.Helper()
	select {
	case <-p.invites:
		t.Errorf("%s rang: %s", p.user, why)
	default:
	}
}

func TestGroupSimultaneous(t *testing.T) {
	rec := newCDRs()
	e := groupEnv(t, Group{Strategy: GroupSimultaneous, RingTime: 5 * time.Second}, nil, rec)
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", ringForever)
	c := newPhone(t, "1003", answerNow)
	e.loc.set("1002", b.contact())
	e.loc.set("1003", c.contact())
	oc := a.dial(testCtx(t), e.box, "1900", nil)
	if oc.final != 200 {
		t.Fatalf("A got %d %v", oc.final, oc.err)
	}
	recv(t, b.invites, "INVITE at 1002")
	recv(t, b.cancelled, "CANCEL at 1002")
	if inv := recv(t, c.invites, "INVITE at 1003"); inv.To().Address.User != "1003" {
		t.Errorf("member's To %s", inv.To().Value())
	}
	hangUp(t, e, oc, c)
	if r := rec.next(t); r.Group != "1900" || r.Target != "1003" || r.Disposition != Answered || r.Dialled != "1900" {
		t.Errorf("CDR %+v, want group 1900 answered by 1003", r)
	}
}

func TestGroupSequentialRingsInTurn(t *testing.T) {
	rec := newCDRs()
	e := groupEnv(t, Group{Strategy: GroupSequential, RingTime: 200 * time.Millisecond}, nil, rec)
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", ringForever)
	c := newPhone(t, "1003", answerNow)
	e.loc.set("1002", b.contact())
	e.loc.set("1003", c.contact())
	start := time.Now()
	oc := a.dial(testCtx(t), e.box, "1900", nil)
	if oc.final != 200 {
		t.Fatalf("A got %d %v", oc.final, oc.err)
	}
	recv(t, b.invites, "INVITE at 1002")
	recv(t, b.cancelled, "CANCEL at 1002 after its ring time")
	recv(t, c.invites, "INVITE at 1003")
	if time.Since(start) < 150*time.Millisecond {
		t.Error("1003 rang before 1002's ring time was up")
	}
	hangUp(t, e, oc, c)
	if r := rec.next(t); r.Target != "1003" {
		t.Errorf("CDR %+v", r)
	}
}

// Round robin starts each call one member further; longest idle starts
// with the member whose last group call ended longest ago.
func TestGroupTurns(t *testing.T) {
	for _, tc := range []struct {
		strategy string
		second   string // the member the second call starts with
	}{{GroupRoundRobin, "1003"}, {GroupLongestIdle, "1003"}, {GroupSequential, "1002"}} {
		t.Run(tc.strategy, func(t *testing.T) {
			rec := newCDRs()
			e := groupEnv(t, Group{Strategy: tc.strategy, RingTime: 5 * time.Second}, nil, rec)
			a := newPhone(t, "1001", nil)
			ps := map[string]*phone{"1002": newPhone(t, "1002", answerNow), "1003": newPhone(t, "1003", answerNow)}
			for u, p := range ps {
				e.loc.set(u, p.contact())
			}
			for i, first := range []string{"1002", tc.second} {
				oc := a.dial(testCtx(t), e.box, "1900", nil)
				if oc.final != 200 {
					t.Fatalf("call %d: A got %d %v", i, oc.final, oc.err)
				}
				recv(t, ps[first].invites, "INVITE at "+first)
				hangUp(t, e, oc, ps[first])
				if r := rec.next(t); r.Target != first {
					t.Errorf("call %d answered by %s, want %s", i, r.Target, first)
				}
				for _, p := range ps {
					noInvite(t, p, "a member rang after the first answered")
				}
			}
		})
	}
}

// A member in a call or in do-not-disturb is skipped; the overflow then
// takes the call, with a Diversion naming the group.
func TestGroupSkipsBusyAndOverflows(t *testing.T) {
	rec := newCDRs()
	sv := newMemServices("1001", "1002", "1003", "1004", "1005")
	sv.put("1003", Services{DND: true})
	e := groupEnv(t, Group{Strategy: GroupSequential, RingTime: 5 * time.Second, Overflow: "1004"}, sv, rec)
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	c := newPhone(t, "1003", answerNow)
	d := newPhone(t, "1004", answerNow)
	x := newPhone(t, "1005", answerNow)
	for _, p := range []*phone{b, c, d, x} {
		e.loc.set(p.user, p.contact())
	}
	ctx := testCtx(t)
	busy := b.dial(ctx, e.box, "1005", nil) // 1002 is in a call
	if busy.final != 200 {
		t.Fatalf("1002's own call: %d %v", busy.final, busy.err)
	}
	if err := busy.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, x.answered, "1005 answered")

	oc := a.dial(ctx, e.box, "1900", nil)
	if oc.final != 200 {
		t.Fatalf("A got %d %v, want the overflow's 200", oc.final, oc.err)
	}
	inv := recv(t, d.invites, "INVITE at the overflow 1004")
	if div := diversions(inv); len(div) != 1 || !strings.Contains(div[0], "<sip:1900@") || !strings.Contains(div[0], "reason=user-busy") {
		t.Errorf("overflow's Diversion %q, want the group, user-busy", div)
	}
	endCall(t, oc, d)
	noInvite(t, b, "a member in a call")
	noInvite(t, c, "a member in do-not-disturb")
	if err := busy.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, x.byes, "BYE at 1005")
	e.noCalls()
	for range 2 {
		if r := rec.next(t); r.Dialled == "1900" && (r.Group != "1900" || r.Target != "1004" || r.ForwardedFrom != "1900") {
			t.Errorf("group call's CDR %+v", r)
		}
	}
}

func TestGroupNobody(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dnd   bool
		final int
	}{{"unregistered", false, 480}, {"all busy", true, 486}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newCDRs()
			sv := newMemServices("1001", "1002", "1003")
			if tc.dnd {
				sv.put("1002", Services{DND: true})
				sv.put("1003", Services{DND: true})
			}
			e := groupEnv(t, Group{RingTime: time.Second}, sv, rec)
			a := newPhone(t, "1001", nil)
			if oc := a.dial(testCtx(t), e.box, "1900", nil); oc.final != tc.final {
				t.Errorf("A got %d %v, want %d", oc.final, oc.err, tc.final)
			}
			e.noCalls()
			if r := rec.next(t); r.Group != "1900" {
				t.Errorf("CDR %+v", r)
			}
		})
	}
}

// The total time cuts a sequential group short: the second member never
// rings.
func TestGroupTotalTime(t *testing.T) {
	rec := newCDRs()
	e := groupEnv(t, Group{Strategy: GroupSequential, RingTime: 5 * time.Second, TotalTime: 200 * time.Millisecond}, nil, rec)
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", ringForever)
	c := newPhone(t, "1003", answerNow)
	e.loc.set("1002", b.contact())
	e.loc.set("1003", c.contact())
	if oc := a.dial(testCtx(t), e.box, "1900", nil); oc.final != 480 {
		t.Fatalf("A got %d %v, want 480 after the total time", oc.final, oc.err)
	}
	recv(t, b.cancelled, "CANCEL at 1002")
	e.noCalls()
	noInvite(t, c, "after the group's total time")
	rec.next(t)
}
