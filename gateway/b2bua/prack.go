package b2bua

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// RFC 3262 reliable provisional responses, on each leg on its own: the
// box PRACKs a callee's reliable 18x itself, and sends the caller its 18x
// reliably only when the caller's INVITE required it. See doc.go.

// reliableState is the callee side (we are the UAC) of one B leg.
type reliableState struct {
	cseq atomic.Uint32 // the CSeq of our last PRACK in the early dialog; 0 = none

	mu    sync.Mutex
	rseq  uint32 // RSeq of the last reliable provisional PRACKed
	early []byte // the SDP of a reliable 18x: the callee's answer
}

// earlyAnswer is the session description the callee gave in a reliable
// provisional response (nil = none).
func (s *reliableState) earlyAnswer() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.early
}

// rseqOf reads a reliable provisional response's RSeq; ok is false when
// the response is not reliable (no Require: 100rel or no usable RSeq).
func rseqOf(res *sip.Response) (uint32, bool) {
	if !hasOption(res, "100rel", "Require") {
		return 0, false
	}
	h := headerNamed(res, "RSeq")
	if h == nil {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(h.Value()), 10, 32)
	if err != nil || n == 0 {
		return 0, false
	}
	return uint32(n), true
}

// provisional handles a B leg's 101-199 response before it is relayed:
// a reliable one (RFC 3262 §4) gets our PRACK; a retransmission of one
// already PRACKed is not relayed again. It reports whether to relay res.
func (r *ringer) provisional(l *leg, res *sip.Response) bool {
	rseq, ok := rseqOf(res)
	if !ok {
		return true
	}
	l.rel.mu.Lock()
	if l.rel.rseq != 0 && rseq <= l.rel.rseq {
		l.rel.mu.Unlock()
		return false // a retransmission (our PRACK's own retransmissions answer it)
	}
	l.rel.rseq = rseq
	if len(res.Body()) > 0 && isSDP(contentTypeOf(res)) {
		l.rel.early = append([]byte(nil), res.Body()...)
	}
	l.rel.mu.Unlock()
	req := r.prackFor(l, res, rseq)
	r.b.inflight.Add(1)
	go func() {
		defer r.b.inflight.Add(-1)
		ctx, cancel := withTimeout(byeTimeout)
		defer cancel()
		ans, err := r.b.client.Do(ctx, req, sipgo.ClientRequestAddVia)
		switch {
		case err != nil:
			r.b.log.Debug("b2bua: PRACK", "target", l.t.name(), "err", err)
		case !ans.IsSuccess():
			r.b.log.Debug("b2bua: PRACK refused", "target", l.t.name(), "status", ans.StatusCode)
		}
	}()
	return true
}

// prackFor builds the PRACK of reliable provisional res (RFC 3262 §7.2:
// RAck names its RSeq and the INVITE's CSeq) in the leg's early dialog
// (RFC 3261 §12.2.1.1: its Contact, its Record-Route reversed).
func (r *ringer) prackFor(l *leg, res *sip.Response, rseq uint32) *sip.Request {
	inv := l.sess.InviteRequest
	target := inv.Recipient
	if ct := res.Contact(); ct != nil {
		target = ct.Address
	}
	req := sip.NewRequest(sip.PRACK, *target.Clone())
	req.AppendHeader(sip.HeaderClone(inv.From()))
	req.AppendHeader(sip.HeaderClone(res.To()))
	req.AppendHeader(sip.HeaderClone(inv.CallID()))
	seq := inv.CSeq().SeqNo
	for {
		old := l.rel.cseq.Load()
		next := max(old, seq) + 1
		if l.rel.cseq.CompareAndSwap(old, next) {
			seq = next
			break
		}
	}
	req.AppendHeader(&sip.CSeqHeader{SeqNo: seq, MethodName: sip.PRACK})
	req.AppendHeader(sipMaxForwards(70))
	req.AppendHeader(sip.NewHeader("RAck", strconv.FormatUint(uint64(rseq), 10)+" "+strconv.FormatUint(uint64(inv.CSeq().SeqNo), 10)+" INVITE"))
	rr := headersNamed(res, "Record-Route")
	for i := len(rr) - 1; i >= 0; i-- {
		req.AppendHeader(sip.NewHeader("Route", rr[i].Value()))
	}
	req.SetTransport(l.t.transport)
	if len(rr) == 0 && res.Source() != "" {
		req.SetDestination(res.Source())
	}
	setLaddr(req, l.t.transport, l.localAddr(r.spec.laddr))
	req.SetBody(nil)
	return req
}

// uasReliable is the caller side (we are the UAS) of reliable provisional
// responses, used when the caller's INVITE had Require: 100rel. One
// reliable provisional is outstanding at a time (RFC 3262 §3); a later
// 18x while one waits for its PRACK is not relayed.
type uasReliable struct {
	wg sync.WaitGroup // the retransmitter

	mu      sync.Mutex
	next    uint32        // RSeq of the next reliable provisional
	pending uint32        // RSeq waiting for its PRACK; 0 = none
	sdp     bool          // the pending one carries a session description
	acked   uint32        // the last RSeq PRACKed
	prack   chan struct{} // closed by the pending one's PRACK
	stop    chan struct{} // closed to stop retransmitting (final response sent)
	stopped bool
}

func newUASReliable() *uasReliable {
	// RFC 3262 §3: the first RSeq is random in 1..2**31-1; a small one
	// leaves room for many.
	return &uasReliable{next: uint32(time.Now().UnixNano()%1000000) + 1, stop: make(chan struct{})}
}

// start reserves the RSeq of a new reliable provisional; ok is false while
// an earlier one waits for its PRACK, or after the final response.
func (u *uasReliable) start(sdp bool) (rseq uint32, prack chan struct{}, ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pending != 0 || u.stopped {
		return 0, nil, false
	}
	rseq = u.next
	u.next++
	u.pending, u.sdp, u.prack = rseq, sdp, make(chan struct{})
	return rseq, u.prack, true
}

// ack takes a PRACK for rseq; false when it names no provisional we sent
// (RFC 3262 §3: 481). A PRACK retransmitted after the first is still 200.
// done, called once the PRACK is answered, lets our 2xx go (so that the
// PRACK's 200 leaves first).
func (u *uasReliable) ack(rseq uint32) (ok bool, done func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.pending != 0 && rseq == u.pending:
		u.acked, u.pending = rseq, 0
		ch := u.prack
		return true, func() { close(ch) }
	case rseq != 0 && rseq == u.acked:
		return true, func() {}
	}
	return false, nil
}

// finish stops retransmitting and waits for the retransmitter.
func (u *uasReliable) finish() {
	u.mu.Lock()
	if !u.stopped {
		u.stopped = true
		close(u.stop)
	}
	u.mu.Unlock()
	u.wg.Wait()
}

// sendReliable sends a provisional response to the caller reliably
// (Require: 100rel, RSeq) and retransmits it, T1 doubling (RFC 3262 §3),
// until its PRACK, the final response, or 64*T1. It reports false when
// the response was not sent (one is still unacknowledged).
func (c *call) sendReliable(code int, reason string, body []byte, hdrs []sip.Header) bool {
	u := c.rel
	rseq, prack, ok := u.start(len(body) > 0)
	if !ok {
		return false
	}
	hdrs = append(hdrs, sip.NewHeader("Require", "100rel"), sip.NewHeader("RSeq", strconv.FormatUint(uint64(rseq), 10)))
	a := c.setup.a
	if err := a.Respond(code, reason, body, hdrs...); err != nil {
		c.b.log.Debug("b2bua: reliable provisional", "call", c.info.ID, "err", err)
		return false
	}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		// A failed retransmission is not the end: the next may go out.
		resend := func() error { _ = a.Respond(code, reason, body, hdrs...); return nil }
		if retransmit(resend, prack, u.stop) {
			return
		}
		select {
		case <-u.stop:
		default:
			c.b.log.Info("b2bua: caller never PRACKed a reliable provisional", "call", c.info.ID, "rseq", rseq)
		}
	}()
	return true
}

// awaitPrack runs before our 2xx to the caller: a reliable provisional
// with a session description must be PRACKed first (RFC 3262 §3); the
// wait is bounded by 64*T1 and the ringing phase. Retransmissions stop.
func (c *call) awaitPrack() {
	u := c.rel
	if u == nil {
		return
	}
	u.mu.Lock()
	wait, prack := u.prack != nil && u.sdp, u.prack // closed once PRACKed and answered
	u.mu.Unlock()
	if wait {
		t := time.NewTimer(64 * sip.T1)
		select {
		case <-prack:
		case <-t.C:
		case <-c.ring.Done():
		}
		t.Stop()
	}
	u.finish()
}

// parseRAck reads "RSeq CSeq Method" (RFC 3262 §7.2).
func parseRAck(v string) (rseq, cseq uint32, method string, ok bool) {
	f := strings.Fields(v)
	if len(f) != 3 {
		return 0, 0, "", false
	}
	r, err1 := strconv.ParseUint(f[0], 10, 32)
	c, err2 := strconv.ParseUint(f[1], 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, "", false
	}
	return uint32(r), uint32(c), strings.ToUpper(f[2]), true
}

// OnPrack handles a PRACK from a caller (RFC 3262 §3): 200 when it
// acknowledges a reliable provisional response we sent it, 481 otherwise
// (an unknown dialog or RSeq).
func (b *B2BUA) OnPrack(req *sip.Request, tx sip.ServerTransaction) {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	var c *call
	if id, err := sip.DialogIDFromRequestUAS(req); err == nil {
		b.mu.Lock()
		c = b.calls[id]
		b.mu.Unlock()
	}
	var inv *sip.Request
	if c != nil {
		c.mu.Lock()
		inv = c.setup.aReq // nil once the call is up (setupDone)
		c.mu.Unlock()
	}
	h := headerNamed(req, "RAck")
	if c == nil || c.rel == nil || inv == nil || h == nil {
		respond(tx, req, 481, "Call/Transaction Does Not Exist")
		return
	}
	rseq, cseq, method, ok := parseRAck(h.Value())
	if ok {
		ok = method == string(sip.INVITE) && inv.CSeq() != nil && cseq == inv.CSeq().SeqNo
	}
	var done func()
	if ok {
		ok, done = c.rel.ack(rseq)
	}
	if !ok {
		respond(tx, req, 481, "Call/Transaction Does Not Exist")
		return
	}
	respond(tx, req, 200, "OK")
	done()
}

// stopReliable ends the caller's reliable provisionals once its INVITE
// has a final response.
func (c *call) stopReliable() {
	if c.rel != nil {
		c.rel.finish()
	}
}
