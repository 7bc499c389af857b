package b2bua

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// TestDrain: while draining, a new call gets 503 with a Retry-After that
// counts down to the drain deadline; the call in progress goes on, and
// WaitIdle returns once it has ended. Cancelling the drain takes new calls
// again.
func TestDrain(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)

	oc := a.dial(ctx, e.box, "1002", nil)
	if oc.err != nil {
		t.Fatalf("call before the drain: %v", oc.err)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.answered, "B dialog confirmed")

	e.b.Drain(true, time.Now().Add(30*time.Second))
	var retryAfter string
	refused := a.dial(ctx, e.box, "1002", func(r *sip.Response) {
		if h := r.GetHeader("Retry-After"); h != nil {
			retryAfter = h.Value()
		}
	})
	if n, err := strconv.Atoi(retryAfter); refused.final != 503 || err != nil || n < 1 || n > 31 {
		t.Errorf("a new call while draining: %d, Retry-After %q; want 503 with about 30 s", refused.final, retryAfter)
	}

	idle := make(chan error, 1)
	go func() { idle <- e.b.WaitIdle(ctx) }()
	select {
	case err := <-idle:
		t.Fatalf("WaitIdle returned (%v) with a call in progress", err)
	default:
	}
	if len(e.b.Calls()) != 1 {
		t.Fatalf("the call in progress was cut by the drain: %+v", e.b.Calls())
	}
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatalf("bye: %v", err)
	}
	recv(t, b.byes, "BYE at B")
	select {
	case err := <-idle:
		if err != nil {
			t.Fatalf("WaitIdle: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitIdle has not returned 5 s after the last call ended")
	}

	e.b.Drain(false, time.Time{})
	again := a.dial(ctx, e.box, "1002", nil)
	if again.err != nil {
		t.Fatalf("a call after the drain was cancelled: %v", again.err)
	}
	_ = again.sess.Ack(ctx)
	_ = again.sess.Bye(context.Background())
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}
