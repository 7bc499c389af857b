package b2bua

import (
	"context"
	"strconv"
	"time"

	"github.com/emiago/sipgo/sip"
)

// drain is the B2BUA's part in stopping the box gently (SIGTERM, a
// firmware update, outpostctl drain): new calls are refused with 503 and a
// Retry-After, so phones and trunks try elsewhere or later, while calls in
// progress go on until they end.
type drain struct {
	until time.Time     // zero = not draining; Retry-After is the time left
	idle  chan struct{} // closed when the last call ends while draining
}

// Drain starts (on) or cancels (off) the drain; deadline is when the box
// means to stop, for Retry-After. Calls in progress are not touched.
func (b *B2BUA) Drain(on bool, deadline time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !on {
		b.drain = drain{}
		return
	}
	b.drain.until = deadline
	if b.drain.idle == nil {
		b.drain.idle = make(chan struct{})
	}
	b.closeIdleLocked()
}

// Draining reports whether new calls are refused, and until when.
func (b *B2BUA) Draining() (bool, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.drain.until.IsZero(), b.drain.until
}

// WaitIdle blocks until no call is in progress while draining, or ctx
// ends (then it returns ctx's error).
func (b *B2BUA) WaitIdle(ctx context.Context) error {
	b.mu.Lock()
	idle := b.drain.idle
	b.mu.Unlock()
	if idle == nil {
		return nil // not draining
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeIdleLocked signals WaitIdle once no call is left. Caller holds mu.
func (b *B2BUA) closeIdleLocked() {
	if b.drain.idle == nil || len(b.calls) > 0 || b.ending > 0 {
		return
	}
	select {
	case <-b.drain.idle:
	default:
		close(b.drain.idle)
	}
}

// endStarts and endDone bracket a call's end (see removeCall).
func (b *B2BUA) endStarts() {
	b.mu.Lock()
	b.ending++
	b.mu.Unlock()
}

func (b *B2BUA) endDone() {
	b.mu.Lock()
	b.ending--
	b.closeIdleLocked()
	b.mu.Unlock()
}

// refuseWhileDraining answers a new INVITE 503 while draining; it reports
// whether it did.
func (b *B2BUA) refuseWhileDraining(req *sip.Request, tx sip.ServerTransaction) bool {
	draining, until := b.Draining()
	if !draining {
		return false
	}
	res := sip.NewResponseFromRequest(req, 503, "Service Unavailable", nil)
	res.AppendHeader(sip.NewHeader("Retry-After", strconv.Itoa(max(1, int(time.Until(until).Seconds())+1))))
	addHeaders(res, b.current().Settings.warnings())
	_ = tx.Respond(res)
	return true
}
