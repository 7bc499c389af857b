package b2bua

import (
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/health"
)

// A gateway whose attempt failed by the retry rule (503) is blocked: the
// next call goes straight to the second gateway while the block lasts.
func TestPSTNFailedGatewaySkippedWhileBlocked(t *testing.T) {
	gw1 := newPhone(t, "gw1", reject(503))
	gw2 := newPhone(t, "gw2", answerNow)
	tr := health.New(health.Config{BlockFor: time.Minute})
	e := newEnv(t, Config{PSTNGateways: pstn("udp:"+gw1.addr, "udp:"+gw2.addr), PSTNHealth: tr})
	a := newPhone(t, "1001", nil)
	ctx := testCtx(t)
	for call := 1; call <= 2; call++ {
		oc := a.dial(ctx, e.box, "90441234567", nil)
		if oc.err != nil || oc.final != 200 {
			t.Fatalf("call %d: A got %d (%v), want 200", call, oc.final, oc.err)
		}
		if err := oc.sess.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		recv(t, gw2.answered, "gateway 2 confirmed")
		if err := oc.sess.Bye(ctx); err != nil {
			t.Fatal(err)
		}
		recv(t, gw2.byes, "BYE at gateway 2")
		e.noCalls()
		if call == 1 {
			recv(t, gw1.invites, "INVITE at gateway 1")
			if tr.Eligible("udp:"+gw1.addr) || !tr.Eligible("udp:"+gw2.addr) {
				t.Fatalf("after a 503 from gateway 1: %+v", tr.Snapshot())
			}
		}
		recv(t, gw2.invites, "INVITE at gateway 2")
	}
	if n := len(gw1.invites); n != 0 {
		t.Errorf("blocked gateway 1 got %d more INVITEs", n)
	}
}

// When every gateway is blocked, a call still tries exactly one of them
// (docs/design.md §1: one blocked target at random), so traffic finds a recovery.
func TestPSTNAllBlockedOneTried(t *testing.T) {
	gw1 := newPhone(t, "gw1", reject(503))
	gw2 := newPhone(t, "gw2", reject(503))
	tr := health.New(health.Config{BlockFor: time.Minute})
	e := newEnv(t, Config{PSTNGateways: pstn("udp:"+gw1.addr, "udp:"+gw2.addr), PSTNHealth: tr})
	a := newPhone(t, "1001", nil)
	ctx := testCtx(t)
	oc := a.dial(ctx, e.box, "90441234567", nil)
	if oc.final != 503 {
		t.Fatalf("first call: A got %d (%v), want 503", oc.final, oc.err)
	}
	recv(t, gw1.invites, "INVITE at gateway 1")
	recv(t, gw2.invites, "INVITE at gateway 2")
	e.noCalls()
	if tr.Eligible("udp:"+gw1.addr) || tr.Eligible("udp:"+gw2.addr) {
		t.Fatalf("both gateways failed but are not blocked: %+v", tr.Snapshot())
	}

	// Exactly one blocked gateway is tried; recovery unblocks it.
	gw2.mu.Lock()
	gw2.script = answerNow
	gw2.mu.Unlock()
	gw1.mu.Lock()
	gw1.script = answerNow
	gw1.mu.Unlock()
	oc = a.dial(ctx, e.box, "90441234567", nil)
	if oc.err != nil || oc.final != 200 {
		t.Fatalf("second call: A got %d (%v), want 200 from the gateway tried", oc.final, oc.err)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	var tried *phone
	select {
	case <-gw1.invites:
		tried = gw1
	case <-gw2.invites:
		tried = gw2
	case <-time.After(wait):
		t.Fatal("no gateway got the second call")
	}
	recv(t, tried.answered, "the gateway tried confirmed")
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, tried.byes, "BYE at the gateway tried")
	e.noCalls()
	if n := len(gw1.invites) + len(gw2.invites); n != 0 {
		t.Errorf("%d more INVITEs: more than one blocked gateway was tried", n)
	}
	if !tr.Eligible("udp:" + tried.addr) {
		t.Errorf("the gateway that answered is still blocked: %+v", tr.Snapshot())
	}
}
