package b2bua

import (
	"strconv"
	"sync"
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
	if err := again.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.answered, "B dialog of the second call confirmed")
	if err := again.sess.Bye(ctx); err != nil {
		t.Fatalf("bye: %v", err)
	}
	recv(t, b.byes, "BYE at B")
	e.noCalls()
}

// TestDrainWaitsForTheEnd: a drained box stops once WaitIdle returns, so it
// must not return while the last call is still ending: the caller's BYE
// has had its 200 and the callee's BYE its answer before the box is idle.
func TestDrainWaitsForTheEnd(t *testing.T) {
	e := newEnv(t, Config{})
	a := newPhone(t, "1001", nil)
	b := newPhone(t, "1002", answerNow)
	e.loc.set("1002", b.contact())
	ctx := testCtx(t)
	held, hold := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release) // a failed test must not leave B's handler blocked
	b.mu.Lock()
	b.beforeBye = func(*sip.Request) {
		close(held)
		<-hold
	}
	b.mu.Unlock()

	oc := a.dial(ctx, e.box, "1002", nil)
	if oc.err != nil {
		t.Fatalf("call: %v", oc.err)
	}
	if err := oc.sess.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, b.answered, "B dialog confirmed")
	e.b.Drain(true, time.Now().Add(30*time.Second))
	if err := oc.sess.Bye(ctx); err != nil {
		t.Fatalf("bye: %v", err)
	}
	recv(t, held, "BYE at B, held")
	if len(e.b.Calls()) != 0 {
		t.Errorf("the call is still listed after its caller's BYE: %+v", e.b.Calls())
	}
	if e.b.idle() {
		t.Fatal("idle while the callee's BYE is unanswered")
	}
	release()
	recv(t, b.byes, "BYE at B")
	if err := e.b.WaitIdle(ctx); err != nil {
		t.Fatalf("WaitIdle: %v", err)
	}
	e.noCalls()
}

// idle reports whether WaitIdle would return now.
func (b *B2BUA) idle() bool {
	b.mu.Lock()
	ch := b.drain.idle
	b.mu.Unlock()
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
