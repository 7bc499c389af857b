package b2bua

import (
	"strings"
	"testing"
	"time"
)

// bossEnv is a box where 1002 is a boss with delegate 1003.
func bossEnv(t *testing.T, boss Boss, sv *memServices, rec *cdrs) *env {
	boss.Extension, boss.Delegates = "1002", []string{"1003"}
	if sv == nil {
		sv = newMemServices("1001", "1002", "1003", "1004")
	}
	return newEnvVM(t, Config{Bosses: []Boss{boss}, Services: sv, OnEnd: rec.on}, nil)
}

func TestBossAndDelegateRingTogether(t *testing.T) {
	rec := newCDRs()
	e := bossEnv(t, Boss{}, nil, rec)
	a := newPhone(t, "1001", nil)
	boss := newPhone(t, "1002", ringForever)
	del := newPhone(t, "1003", answerNow)
	e.loc.set("1002", boss.contact())
	e.loc.set("1003", del.contact())
	oc := a.dial(testCtx(t), e.box, "1002", nil)
	if oc.final != 200 {
		t.Fatalf("A got %d %v", oc.final, oc.err)
	}
	recv(t, boss.invites, "INVITE at the boss")
	recv(t, boss.cancelled, "CANCEL at the boss")
	recv(t, del.invites, "INVITE at the delegate")
	hangUp(t, e, oc, del)
	if r := rec.next(t); r.Dialled != "1002" || r.Target != "1003" || r.Disposition != Answered {
		t.Errorf("CDR %+v, want 1002's call answered by 1003", r)
	}
}

func TestDelegatesAfterTheirDelay(t *testing.T) {
	rec := newCDRs()
	e := bossEnv(t, Boss{After: 300 * time.Millisecond}, nil, rec)
	a := newPhone(t, "1001", nil)
	boss := newPhone(t, "1002", ringForever)
	del := newPhone(t, "1003", answerNow)
	e.loc.set("1002", boss.contact())
	e.loc.set("1003", del.contact())
	start := time.Now()
	oc := a.dial(testCtx(t), e.box, "1002", nil)
	if oc.final != 200 {
		t.Fatalf("A got %d %v", oc.final, oc.err)
	}
	recv(t, del.invites, "INVITE at the delegate")
	if time.Since(start) < 250*time.Millisecond {
		t.Error("the delegate rang before the delay")
	}
	hangUp(t, e, oc, del)
	rec.next(t)
}

// A boss in do-not-disturb, or with no phone, lets the delegates ring at
// once.
func TestDelegatesTakeOverAtOnce(t *testing.T) {
	for _, dnd := range []bool{true, false} {
		rec := newCDRs()
		sv := newMemServices("1001", "1002", "1003")
		sv.put("1002", Services{DND: dnd})
		e := bossEnv(t, Boss{After: 10 * time.Second}, sv, rec)
		a := newPhone(t, "1001", nil)
		boss := newPhone(t, "1002", answerNow)
		del := newPhone(t, "1003", answerNow)
		if dnd {
			e.loc.set("1002", boss.contact())
		}
		e.loc.set("1003", del.contact())
		start := time.Now()
		oc := a.dial(testCtx(t), e.box, "1002", nil)
		if oc.final != 200 {
			t.Fatalf("dnd %v: A got %d %v", dnd, oc.final, oc.err)
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("dnd %v: the delegate waited for the delay", dnd)
		}
		hangUp(t, e, oc, del)
		noInvite(t, boss, "the boss is in DND or unregistered")
		rec.next(t)
	}
}

// A delegate calls as the boss with *33: the callee sees the boss in
// From (IdentityFrom) or only in P-Asserted-Identity (IdentityPAI).
func TestCallOnBehalfOfTheBoss(t *testing.T) {
	for _, id := range []string{IdentityFrom, IdentityPAI} {
		t.Run(id, func(t *testing.T) {
			rec := newCDRs()
			e := bossEnv(t, Boss{Name: "Anna Boss", Identity: id}, nil, rec)
			del := newPhone(t, "1003", nil)
			callee := newPhone(t, "1004", answerNow)
			e.loc.set("1004", callee.contact())
			oc := del.dial(testCtx(t), e.box, "*331004", nil)
			if oc.final != 200 {
				t.Fatalf("delegate got %d %v", oc.final, oc.err)
			}
			inv := recv(t, callee.invites, "INVITE at 1004")
			from := inv.From().Address.User
			if want := map[string]string{IdentityFrom: "1002", IdentityPAI: "1003"}[id]; from != want {
				t.Errorf("callee's From user %s, want %s", from, want)
			}
			if pai := header(inv, "P-Asserted-Identity"); !strings.Contains(pai, "<sip:1002@") || !strings.Contains(pai, `"Anna Boss"`) {
				t.Errorf("P-Asserted-Identity %q, want the boss", pai)
			}
			hangUp(t, e, oc, callee)
			if r := rec.next(t); r.Caller != "1003" || r.OnBehalfOf != "1002" || r.Dialled != "1004" {
				t.Errorf("CDR %+v", r)
			}
		})
	}
}

func TestOnBehalfRefused(t *testing.T) {
	rec := newCDRs()
	e := bossEnv(t, Boss{}, nil, rec)
	stranger := newPhone(t, "1001", nil) // nobody's delegate
	del := newPhone(t, "1003", nil)
	if oc := stranger.dial(testCtx(t), e.box, "*331004", nil); oc.final != 403 {
		t.Errorf("a non-delegate's *33: %d %v, want 403", oc.final, oc.err)
	}
	if oc := del.dial(testCtx(t), e.box, "*33", nil); oc.final != 484 {
		t.Errorf("*33 alone: %d %v, want 484", oc.final, oc.err)
	}
	e.noCalls()
}
