package b2bua

import (
	"testing"
	"time"
)

// waitCallState waits until one of the box's calls is in state.
func waitCallState(t *testing.T, e *env, state string) {
	t.Helper()
	for range 1000 {
		for _, c := range e.b.Calls() {
			if c.State == state {
				return
			}
		}
		time.Sleep(2 * time.Millisecond) // the B2BUA's state; no event to wait on
	}
	t.Fatalf("no call in state %s: %+v", state, e.b.Calls())
}

// TestGroupQueue: the group's only member is in a call; the group call
// is answered by the box and waits; when the member's call ends, the
// member is rung from the caller and the caller is re-INVITEd with the
// member's session.
func TestGroupQueue(t *testing.T) {
	rec := newCDRs()
	e := groupEnv(t, Group{Strategy: GroupSequential, Members: []string{"1002"}, RingTime: time.Second, Queue: 30 * time.Second}, nil, rec)
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	x := newPhone(t, "1003", nil)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	busy := x.dial(ctx, e.box, "1002", nil)
	if busy.final != 200 {
		t.Fatalf("the member's call: %d %v", busy.final, busy.err)
	}
	if err := busy.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.invites, "the member's own call")
	recv(t, b.answered, "the member answered its call")
	oc := a.dial(ctx, e.box, "1900", nil)
	if oc.final != 200 {
		t.Fatalf("queued caller got %d %v, want the box's 200", oc.final, oc.err)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	waitCallState(t, e, StateQueued)
	noInvite(t, b, "busy, while the caller is queued")
	if err := busy.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE of the member's call")
	if inv := recv(t, b.invites, "the queued call at the member"); inv.From().Address.User != "1001" {
		t.Errorf("queued call rings the member from %s", inv.From().Value())
	}
	recv(t, a.reinvites, "re-INVITE of the queued caller")
	if r := rec.next(t); r.Caller != "1003" {
		t.Errorf("first CDR %+v, want the member's own call", r)
	}
	if r := rec.next(t); r.Group != "1900" || r.Disposition != Transferred {
		t.Errorf("queued call's CDR %+v", r)
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.byes, "BYE at the member")
	e.noCalls()
	if r := rec.next(t); r.Disposition != Answered || r.Dialled != "1002" {
		t.Errorf("bridge's CDR %+v", r)
	}
}

// TestGroupQueueTimesOut: nobody becomes free: after the queue time the
// call goes to the overflow, or without one the caller is hung up.
func TestGroupQueueTimesOut(t *testing.T) {
	for _, overflow := range []string{"1004", ""} {
		t.Run("overflow="+overflow, func(t *testing.T) {
			rec := newCDRs()
			e := groupEnv(t, Group{Members: []string{"1002"}, RingTime: time.Second, Queue: 300 * time.Millisecond, Overflow: overflow}, nil, rec)
			a := newPhone(t, "1001", nil)
			o := newPhone(t, "1004", answerNow)
			e.loc.set("1004", o.contact())
			ctx := testCtx(t)
			oc := a.dial(ctx, e.box, "1900", nil) // 1002 has no phone registered
			if oc.final != 200 {
				t.Fatalf("queued caller got %d %v", oc.final, oc.err)
			}
			if err := oc.sess.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			if overflow == "" {
				recv(t, a.byes, "BYE at the caller after the queue time")
				e.noCalls()
				if r := rec.next(t); r.Group != "1900" || r.Disposition != NoAnswer {
					t.Errorf("CDR %+v", r)
				}
				return
			}
			recv(t, o.invites, "the overflow's INVITE")
			recv(t, a.reinvites, "re-INVITE of the caller with the overflow's session")
			if err := oc.sess.Bye(ctx); err != nil {
				t.Fatal(err)
			}
			recv(t, o.byes, "BYE at the overflow")
			e.noCalls()
		})
	}
}

// TestGroupQueueRoundsOverMembers: a member who does not answer the
// queue's ring is not rung again before the other free members: the
// second member, answering by then, gets the caller.
func TestGroupQueueRoundsOverMembers(t *testing.T) {
	rec := newCDRs()
	e := groupEnv(t, Group{Strategy: GroupSequential, RingTime: 150 * time.Millisecond, Queue: 30 * time.Second}, nil, rec)
	a := newPhone(t, "1001", nil)
	first := newPhone(t, "1002", ringForever)
	second := newPhone(t, "1003", ringForever)
	e.loc.set("1002", first.contact())
	e.loc.set("1003", second.contact())
	ctx := testCtx(t)
	oc := a.dial(ctx, e.box, "1900", nil)
	if oc.final != 200 {
		t.Fatalf("queued caller got %d %v", oc.final, oc.err)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	waitCallState(t, e, StateQueued)
	answering := newPhone(t, "1003", answerNow) // 1003 now answers
	e.loc.set("1003", answering.contact())
	recv(t, answering.invites, "the queue's ring at 1003")
	recv(t, a.reinvites, "re-INVITE of the caller with 1003's session")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, answering.byes, "BYE at 1003")
	e.noCalls()
}
