package b2bua

import (
	"context"
	"strings"
	"testing"
	"time"
)

func pickupEnv(t *testing.T, rec *cdrs, groups ...[]string) *env {
	return newEnvVM(t, Config{Services: newMemServices("1001", "1002", "1003", "1004"), PickupGroups: groups, OnEnd: rec.on}, nil)
}

// pickUp has picker take the call ringing at callee (1001's call) with
// code: picker and the caller are bridged, the callee's phone is
// cancelled, and the caller's hang-up reaches the picker.
func pickUp(t *testing.T, e *env, rec *cdrs, picker *phone, code string) {
	t.Helper()
	ctx := testCtx(t)
	a := newPhone(t, "1001", nil)
	callee := newPhone(t, "1002", ringForever)
	e.loc.set("1002", callee.contact())
	done := make(chan *outcall, 1)
	go func() { done <- a.dial(ctx, e.box, "1002", nil) }()
	recv(t, callee.invites, "INVITE at 1002")
	waitState(t, e, StateRinging)
	ox := picker.dial(ctx, e.box, code, nil)
	if ox.final != 200 {
		t.Fatalf("%s: picker got %d %v", code, ox.final, ox.err)
	}
	if err := ox.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	oc := <-done
	if oc.final != 200 {
		t.Fatalf("caller got %d %v after the pickup", oc.final, oc.err)
	}
	// No relay here: each side's answer carries the other's address.
	if !strings.Contains(string(oc.sess.InviteResponse.Body()), "m=audio 40000 RTP/AVP 0") ||
		!strings.Contains(string(ox.sess.InviteResponse.Body()), "m=audio 40000 RTP/AVP 0") {
		t.Errorf("answers:\n%s\n%s", oc.sess.InviteResponse.Body(), ox.sess.InviteResponse.Body())
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	waitConfirmed(t, e) // a BYE may not overtake the ACK
	recv(t, callee.cancelled, "CANCEL at 1002")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, picker.byes, "BYE at the picker")
	e.noCalls()
	if r := rec.next(t); r.PickedUpBy != picker.user || r.Target != picker.user || r.Disposition != Answered || r.Dialled != "1002" {
		t.Errorf("CDR %+v", r)
	}
}

// waitConfirmed waits until the box's one call has its caller's ACK (the
// picker's may come first).
func waitConfirmed(t *testing.T, e *env) {
	t.Helper()
	for range 1000 {
		e.b.mu.Lock()
		var c *call
		for _, x := range e.b.calls {
			c = x
		}
		e.b.mu.Unlock()
		if c != nil {
			c.mu.Lock()
			pa := c.parties[LegA]
			c.mu.Unlock()
			if pa != nil && pa.isConfirmed() {
				return
			}
		}
		time.Sleep(2 * time.Millisecond) // the B2BUA's state; no event to wait on
	}
	t.Fatal("the call was never confirmed")
}

// waitState waits until the box's one call is in state.
func waitState(t *testing.T, e *env, state string) {
	t.Helper()
	for range 1000 {
		if cs := e.b.Calls(); len(cs) == 1 && cs[0].State == state {
			return
		}
		time.Sleep(2 * time.Millisecond) // the state is the B2BUA's; no event to wait on
	}
	t.Fatalf("the call never got to %s: %+v", state, e.b.Calls())
}

func TestDirectedPickup(t *testing.T) {
	rec := newCDRs()
	e := pickupEnv(t, rec)
	pickUp(t, e, rec, newPhone(t, "1003", nil), "**1002")
}

func TestGroupPickup(t *testing.T) {
	rec := newCDRs()
	e := pickupEnv(t, rec, []string{"1002", "1003"})
	pickUp(t, e, rec, newPhone(t, "1003", nil), "*8")
}

func TestNothingToPickUp(t *testing.T) {
	rec := newCDRs()
	e := pickupEnv(t, rec, []string{"1002", "1003"})
	ctx := testCtx(t)
	outsider := newPhone(t, "1004", nil)
	for _, code := range []string{"**1002", "*8"} {
		if oc := outsider.dial(ctx, e.box, code, nil); oc.final != 404 {
			t.Errorf("%s with nothing ringing: %d %v, want 404", code, oc.final, oc.err)
		}
	}
	// 1004 is in no pickup group: *8 does not reach 1002's ringing call.
	a := newPhone(t, "1001", nil)
	callee := newPhone(t, "1002", ringForever)
	e.loc.set("1002", callee.contact())
	ringing, hangUp := context.WithCancel(ctx)
	done := make(chan *outcall, 1)
	go func() { done <- a.dial(ringing, e.box, "1002", nil) }()
	waitState(t, e, StateRinging)
	if oc := outsider.dial(ctx, e.box, "*8", nil); oc.final != 404 {
		t.Errorf("*8 outside the group: %d, want 404", oc.final)
	}
	hangUp() // the caller gives up: CANCEL
	<-done
	recv(t, callee.cancelled, "CANCEL at 1002")
	e.noCalls()
	if r := rec.next(t); r.PickedUpBy != "" || r.Disposition != Cancelled {
		t.Errorf("CDR %+v", r)
	}
}

// TestPickupGroupCall: a hunt group's call ringing member 1002 is picked
// up with **1002 like a call to 1002 itself; the CDR names the group and
// the picker.
func TestPickupGroupCall(t *testing.T) {
	rec := newCDRs()
	e := newEnvVM(t, Config{Services: newMemServices("1001", "1002", "1003"), OnEnd: rec.on,
		Groups: []Group{{Extension: "1900", Members: []string{"1002"}, RingTime: 30 * time.Second}}}, nil)
	ctx := testCtx(t)
	a := newPhone(t, "1001", nil)
	member := newPhone(t, "1002", ringForever)
	e.loc.set("1002", member.contact())
	done := make(chan *outcall, 1)
	go func() { done <- a.dial(ctx, e.box, "1900", nil) }()
	recv(t, member.invites, "INVITE at the member")
	waitState(t, e, StateRinging)
	picker := newPhone(t, "1003", nil)
	ox := picker.dial(ctx, e.box, "**1002", nil)
	if ox.final != 200 {
		t.Fatalf("pickup of the group call: %d %v", ox.final, ox.err)
	}
	if err := ox.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	oc := <-done
	if oc.final != 200 {
		t.Fatalf("caller got %d %v after the pickup", oc.final, oc.err)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	waitConfirmed(t, e)
	recv(t, member.cancelled, "CANCEL at the member")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, picker.byes, "BYE at the picker")
	e.noCalls()
	if r := rec.next(t); r.PickedUpBy != "1003" || r.Group != "1900" || r.Disposition != Answered {
		t.Errorf("CDR %+v", r)
	}
}
