package b2bua

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/emiago/sipgo/sip"
)

// exchange is an offer/answer exchange in progress on a bridge: a
// re-INVITE or UPDATE from party from, or one the B2BUA runs itself for a
// transfer (from == nil). One at a time per bridge; a second one gets 491
// (RFC 3261 §14.1, RFC 3311 §5.2).
type exchange struct {
	from  *party
	cseq  uint32        // CSeq of from's re-INVITE, to match its ACK
	acked chan struct{} // closed by from's ACK
	ack   *sip.Request
	once  sync.Once
	// late: from's ACK carries the answer the other party still waits for,
	// so the exchange ends only once that is relayed. Otherwise the ACK
	// ends it at once: from may send its next offer right after its ACK.
	late bool
	// answered: our 2xx went out; only the ACK is missing.
	answered atomic.Bool
}

func newExchange(from *party, req *sip.Request) *exchange {
	ex := &exchange{from: from, acked: make(chan struct{})}
	if req != nil && req.CSeq() != nil {
		ex.cseq = req.CSeq().SeqNo
	}
	return ex
}

func (ex *exchange) ackOnce(req *sip.Request) {
	ex.once.Do(func() {
		ex.ack = req
		close(ex.acked)
	})
}

// begin makes ex the bridge's exchange; otherwise it returns the status
// to refuse the request with: 481 when the call or the party is gone; 500
// (with Retry-After, see refuseExchange) when the sender's own earlier
// offer is still unanswered (RFC 3261 §14.2, RFC 3311 §5.2); 491 while an
// offer we sent it is pending (the other party's exchange, a transfer's)
// or the answer is not ACKed yet.
// An exchange whose 2xx is out and only waits for its ACK no longer
// blocks: the sender may well have ACKed already (sipgo hands each
// message to its own goroutine, so a new request can overtake that ACK).
func (c *call) begin(ex *exchange) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || ex.from != nil && !ex.from.inLocked(c) {
		return 481
	}
	if old := c.ex; old != nil && ex.from != nil && old.from == ex.from && !old.late && old.answered.Load() && ex.cseq > old.cseq {
		old.ackOnce(nil) // its sender moved on: it got our 2xx
		c.ex = nil
	}
	c.settle()
	if old := c.ex; old != nil && ex.from != nil && old.from == ex.from && !old.answered.Load() {
		return 500
	}
	if !c.confirmed || c.ex != nil || c.xfer != nil {
		return 491
	}
	c.ex = ex
	return 0
}

// refuseExchange answers a re-INVITE or UPDATE that begin refused; a 500
// carries Retry-After, a random 0-10 s (RFC 3261 §14.2).
func refuseExchange(tx sip.ServerTransaction, req *sip.Request, code int) {
	if code != 500 {
		respond(tx, req, code, "")
		return
	}
	_ = respondBody(tx, req, 500, "Server Internal Error", nil, "", sip.NewHeader("Retry-After", strconv.Itoa(rand.IntN(11))))
}

// settle sets aside an exchange that only waits for its ACK, so that it
// does not block the next request. c.mu is held.
func (c *call) settle() {
	if old := c.ex; old != nil && !old.late && old.answered.Load() {
		c.acking = append(c.acking, old)
		c.ex = nil
	}
}

// finishExchange forgets ex.
func (c *call) finishExchange(ex *exchange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ex == ex {
		c.ex = nil
	}
	c.acking = slices.DeleteFunc(c.acking, func(e *exchange) bool { return e == ex })
}

// ackFor finds the exchange an ACK from p with CSeq cseq ends; an
// exchange that only waited for it is over at once.
func (c *call) ackFor(p *party, cseq uint32) *exchange {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ex := c.ex; ex != nil && ex.from == p && ex.cseq == cseq {
		if !ex.late {
			c.ex = nil
		}
		return ex
	}
	for i, ex := range c.acking {
		if ex.from == p && ex.cseq == cseq {
			c.acking = slices.Delete(c.acking, i, i+1)
			return ex
		}
	}
	return nil
}

// peer is the other party of p's bridge.
func (c *call) peer(l Leg) *party {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parties[l.other()]
}

var acceptSDP = sip.NewHeader("Accept", "application/sdp")

// inDialog finds the party a request belongs to and checks its CSeq; on
// failure it answers the request (481, 500) and returns nil.
func (b *B2BUA) inDialog(req *sip.Request, tx sip.ServerTransaction) (*party, *call, Leg) {
	p := b.partyOf(req)
	if p == nil {
		respond(tx, req, 481, "Call/Transaction Does Not Exist")
		return nil, nil, 0
	}
	c, l := p.bridge()
	if c == nil {
		respond(tx, req, 481, "Call/Transaction Does Not Exist")
		return nil, nil, 0
	}
	if !p.inCSeq(req) {
		respond(tx, req, 500, "CSeq Out of Order") // RFC 3261 §12.2.2
		return nil, nil, 0
	}
	return p, c, l
}

// onReinvite relays an in-dialog INVITE from one party to the other: the
// offer (or its absence) goes to the other party's dialog as a re-INVITE,
// the answer comes back in our 2xx. The relayed leg's 2xx is ACKed here;
// the sender's ACK is absorbed (and carries the answer to an offerless
// re-INVITE on to the other party).
func (b *B2BUA) onReinvite(req *sip.Request, tx sip.ServerTransaction) {
	p, c, l := b.inDialog(req, tx)
	if p == nil {
		return
	}
	body, ct := req.Body(), contentTypeOf(req)
	if len(body) > 0 && !isSDP(ct) {
		_ = respondBody(tx, req, 488, "Not Acceptable Here", nil, "", acceptSDP)
		return
	}
	if tooSmall422(tx, req) {
		return
	}
	ex := newExchange(p, req)
	ex.late = len(body) == 0
	if code := c.begin(ex); code != 0 {
		refuseExchange(tx, req, code)
		return
	}
	defer c.finishExchange(ex)
	respond(tx, req, 100, "Trying")
	p.refresh(req.Contact())

	// A refresh repeating the party's last description changes nothing
	// (RFC 3264 §8): answer it here with what the party last got, so a
	// session refresh (RFC 4028 phones) stays on its own leg.
	if len(body) > 0 {
		h := p.lock()
		same, last := bytes.Equal(body, p.sdp.in), p.sdp.out
		h.mu.Unlock()
		if same && len(last) > 0 {
			c.respondInvite(p, req, tx, ex, 200, "OK", last, "application/sdp")
			return
		}
	}

	if c.peer(l) == nil { // parked (park.go): nobody to offer it to
		respond(tx, req, 491, "Request Pending")
		return
	}
	an := c.media()
	offer := body
	if an != nil && len(body) > 0 {
		var err error
		if offer, err = an.Offer(l, body); err != nil {
			b.log.Info("b2bua: re-INVITE offer refused by media", "call", c.info.ID, "err", err)
			_ = respondBody(tx, req, 488, "Not Acceptable Here", nil, "")
			return
		}
	}
	q := c.peer(l)
	out := q.newRequest(sip.INVITE)
	out.AppendHeader(sip.NewHeader("Allow", allowInDialog))
	q.addSessionHeaders(out)
	if mf := req.MaxForwards(); mf != nil {
		if mf.Val() == 0 {
			respond(tx, req, 483, "Too Many Hops")
			return
		}
		out.ReplaceHeader(sipMaxForwards(mf.Val() - 1))
	}
	if len(offer) > 0 {
		h := sip.ContentTypeHeader(ct)
		out.AppendHeader(&h)
		out.SetBody(q.outSDP(offer))
	}
	// A CANCEL of the sender's re-INVITE (sipgo answers it with 200 and
	// 487) cancels ours.
	ctx, cancel := context.WithCancelCause(c.life)
	defer cancel(nil)
	tx.OnCancel(func(*sip.Request) { cancel(errCallerGone) })

	res, err := q.invite(ctx, out)
	switch {
	case err != nil:
		if an != nil && len(body) > 0 {
			an.Reject(l)
		}
		if errors.Is(context.Cause(ctx), errCallerGone) {
			return // the sender got its 487
		}
		if c.life.Err() != nil {
			respond(tx, req, 487, "Request Terminated")
			return
		}
		// No answer from the other party: it is gone (RFC 3261 §14.1).
		b.log.Info("b2bua: re-INVITE not answered", "call", c.info.ID, "to", q.name, "err", err)
		respond(tx, req, 408, "Request Timeout")
		c.end(Dead, BySystem)
		return
	case !res.IsSuccess():
		if an != nil && len(body) > 0 {
			an.Reject(l)
		}
		var hdrs []sip.Header
		if h := headerNamed(res, "Retry-After"); h != nil {
			hdrs = append(hdrs, sip.HeaderClone(h))
		}
		if res.StatusCode == 488 || res.StatusCode == 606 {
			hdrs = append(hdrs, acceptSDP)
		}
		_ = respondBody(tx, req, res.StatusCode, res.Reason, nil, "", hdrs...)
		if res.StatusCode == 481 || res.StatusCode == 408 {
			c.end(Dead, BySystem) // RFC 3261 §14.1: the dialog is gone
		}
		return
	}

	// 2xx from the other party.
	q.refreshedOut(res)
	ans, act := res.Body(), contentTypeOf(res)
	q.noteIn(ans, act)
	if len(body) > 0 {
		q.ackNow(out.CSeq().SeqNo, nil, "")
	}
	if an != nil && len(ans) > 0 {
		var err error
		if len(body) > 0 {
			ans, err = an.Answer(l.other(), ans)
		} else {
			ans, err = an.Offer(l.other(), ans) // offerless re-INVITE: the 2xx carries the offer
		}
		if err != nil {
			b.log.Warn("b2bua: re-INVITE answer refused by media", "call", c.info.ID, "err", err)
			if len(body) == 0 {
				q.ackNow(out.CSeq().SeqNo, nil, "")
			}
			_ = respondBody(tx, req, 488, "Not Acceptable Here", nil, "")
			return
		}
	}
	p.noteIn(body, ct)
	if !c.respondInvite(p, req, tx, ex, res.StatusCode, res.Reason, p.outSDP(ans), act) {
		if len(body) == 0 {
			q.ackNow(out.CSeq().SeqNo, nil, "")
		}
		return
	}
	if len(body) == 0 {
		// The sender's ACK carries the answer for the other party.
		ackBody, ackCT := ex.ack.Body(), contentTypeOf(ex.ack)
		p.noteIn(ackBody, ackCT)
		if an != nil && len(ackBody) > 0 {
			if a, err := an.Answer(l, ackBody); err == nil {
				ackBody = a
			} else {
				b.log.Warn("b2bua: late answer refused by media", "call", c.info.ID, "err", err)
			}
		}
		q.ackNow(out.CSeq().SeqNo, q.outSDP(ackBody), ackCT)
	}
}

// respondInvite sends a 2xx (or any final) to a party's re-INVITE and
// waits for its ACK; it reports whether the ACK came.
func (c *call) respondInvite(p *party, req *sip.Request, tx sip.ServerTransaction, ex *exchange, code int, reason string, body []byte, ct string) bool {
	res := sip.NewResponseFromRequest(req, code, reason, body)
	if len(body) > 0 {
		h := sip.ContentTypeHeader(ct)
		res.AppendHeader(&h)
	}
	if code >= 300 {
		return tx.Respond(res) == nil
	}
	res.AppendHeader(&sip.ContactHeader{Address: p.contact})
	res.AppendHeader(sip.NewHeader("Allow", allowInDialog))
	p.refreshedIn(req) // any answered re-INVITE refreshes the session (RFC 4028 §9)
	addHeaders(res, p.answerSessionHeaders(req))
	ex.answered.Store(true)
	if !respond2xx(tx, res, ex.acked, c.life.Done()) {
		c.b.log.Info("b2bua: no ACK for re-INVITE 2xx", "call", c.info.ID, "from", p.name)
		return false
	}
	return true
}

func sipMaxForwards(n uint32) sip.Header {
	mf := sip.MaxForwardsHeader(n)
	return &mf
}

// invite sends a re-INVITE to the party and waits for its final response;
// a CANCEL goes out when ctx ends first (the 487 then comes back as the
// final response, or an error after Timer B). The 2xx is not ACKed here.
func (p *party) invite(ctx context.Context, req *sip.Request) (*sip.Response, error) {
	tx, err := p.send(context.WithoutCancel(ctx), req)
	if err != nil {
		return nil, err
	}
	// A 2xx's retransmissions find no transaction once it is passed up
	// (Timer M 0): ackNow's ACK, kept, answers them (acks.go).
	defer tx.Terminate()
	done := ctx.Done()
	var provisional bool
	for {
		select {
		case res := <-tx.Responses():
			if res.IsProvisional() {
				provisional = true
				continue
			}
			if res.IsSuccess() {
				p.refresh(res.Contact())
			}
			return res, nil
		case <-tx.Done():
			return nil, fmt.Errorf("%w to INVITE to %s: %w", errNoResponse, p.name, tx.Err())
		case <-done:
			done = nil
			if !provisional {
				// RFC 3261 §9.1: no CANCEL before a provisional response;
				// the other party answers a re-INVITE quickly or not at all.
				return nil, fmt.Errorf("%w to INVITE to %s: %w", errNoResponse, p.name, context.Cause(ctx))
			}
			cctx, cancel := withTimeout(byeTimeout)
			if _, err := p.b.client.Do(cctx, cancelFor(req), sendAsIs); err != nil {
				p.b.log.Debug("b2bua: cancel of re-INVITE", "to", p.name, "err", err)
			}
			cancel()
		}
	}
}

// cancelFor builds the CANCEL of a request we sent (RFC 3261 §9.1: same
// Request-URI, top Via, From, To, Call-ID, CSeq number and Route).
func cancelFor(req *sip.Request) *sip.Request {
	cancel := sip.NewRequest(sip.CANCEL, *req.Recipient.Clone())
	cancel.AppendHeader(sip.HeaderClone(req.Via()))
	cancel.AppendHeader(sip.HeaderClone(req.From()))
	cancel.AppendHeader(sip.HeaderClone(req.To()))
	cancel.AppendHeader(sip.HeaderClone(req.CallID()))
	cancel.AppendHeader(&sip.CSeqHeader{SeqNo: req.CSeq().SeqNo, MethodName: sip.CANCEL})
	mf := sip.MaxForwardsHeader(70)
	cancel.AppendHeader(&mf)
	sip.CopyHeaders("Route", req, cancel)
	cancel.SetBody(nil)
	cancel.SetTransport(req.Transport())
	cancel.SetDestination(req.Destination())
	cancel.Laddr = req.Laddr
	return cancel
}

// onUpdate relays an UPDATE with an offer to the other party (RFC 3311);
// one without a body is a session or target refresh and is answered here.
func (b *B2BUA) onUpdate(req *sip.Request, tx sip.ServerTransaction) {
	p, c, l := b.inDialog(req, tx)
	if p == nil {
		return
	}
	if tooSmall422(tx, req) {
		return
	}
	body, ct := req.Body(), contentTypeOf(req)
	p.refresh(req.Contact())
	if len(body) == 0 {
		res := sip.NewResponseFromRequest(req, 200, "OK", nil)
		res.AppendHeader(&sip.ContactHeader{Address: p.contact})
		p.refreshedIn(req)
		addHeaders(res, p.answerSessionHeaders(req))
		_ = tx.Respond(res)
		return
	}
	if !isSDP(ct) {
		_ = respondBody(tx, req, 488, "Not Acceptable Here", nil, "", acceptSDP)
		return
	}
	ex := newExchange(p, req)
	if code := c.begin(ex); code != 0 {
		refuseExchange(tx, req, code)
		return
	}
	defer c.finishExchange(ex)
	q := c.peer(l)
	if q == nil { // parked (park.go)
		respond(tx, req, 491, "Request Pending")
		return
	}
	an := c.media()
	offer := body
	if an != nil {
		var err error
		if offer, err = an.Offer(l, body); err != nil {
			_ = respondBody(tx, req, 488, "Not Acceptable Here", nil, "")
			return
		}
	}
	out := q.newRequest(sip.UPDATE)
	q.addSessionHeaders(out)
	h := sip.ContentTypeHeader(ct)
	out.AppendHeader(&h)
	out.SetBody(q.outSDP(offer))
	ctx, cancel := context.WithTimeout(c.life, 64*sip.T1)
	defer cancel()
	res, err := q.do(ctx, out)
	if err != nil {
		if an != nil {
			an.Reject(l)
		}
		if c.life.Err() != nil {
			respond(tx, req, 481, "Call/Transaction Does Not Exist")
			return
		}
		respond(tx, req, 408, "Request Timeout")
		c.end(Dead, BySystem)
		return
	}
	if !res.IsSuccess() {
		if an != nil {
			an.Reject(l)
		}
		var hdrs []sip.Header
		if h := headerNamed(res, "Retry-After"); h != nil {
			hdrs = append(hdrs, sip.HeaderClone(h))
		}
		_ = respondBody(tx, req, res.StatusCode, res.Reason, nil, "", hdrs...)
		if res.StatusCode == 481 || res.StatusCode == 408 {
			c.end(Dead, BySystem)
		}
		return
	}
	q.refresh(res.Contact())
	q.refreshedOut(res)
	ans, act := res.Body(), contentTypeOf(res)
	q.noteIn(ans, act)
	if an != nil && len(ans) > 0 {
		if ans, err = an.Answer(l.other(), ans); err != nil {
			_ = respondBody(tx, req, 488, "Not Acceptable Here", nil, "")
			return
		}
	}
	p.noteIn(body, ct)
	out2 := sip.NewResponseFromRequest(req, res.StatusCode, res.Reason, p.outSDP(ans))
	if len(ans) > 0 {
		h := sip.ContentTypeHeader(act)
		out2.AppendHeader(&h)
	}
	out2.AppendHeader(&sip.ContactHeader{Address: p.contact})
	p.refreshedIn(req)
	addHeaders(out2, p.answerSessionHeaders(req))
	_ = tx.Respond(out2)
}

// reoffer runs an offer/answer exchange the B2BUA starts itself (a
// transfer): a re-INVITE with sdp to the party, ACKed here. It returns the
// party's answer, or the status it refused with.
func (p *party) reoffer(ctx context.Context, sdp []byte, ct string) ([]byte, int, error) {
	if ct == "" {
		ct = "application/sdp"
	}
	out := p.newRequest(sip.INVITE)
	out.AppendHeader(sip.NewHeader("Allow", allowInDialog))
	h := sip.ContentTypeHeader(ct)
	out.AppendHeader(&h)
	out.SetBody(p.outSDP(sdp))
	ctx, cancel := context.WithTimeout(ctx, 64*sip.T1)
	defer cancel()
	res, err := p.invite(ctx, out)
	if err != nil {
		return nil, 408, err
	}
	if !res.IsSuccess() {
		return nil, res.StatusCode, fmt.Errorf("b2bua: re-INVITE to %s: %d %s", p.name, res.StatusCode, res.Reason)
	}
	p.ackNow(out.CSeq().SeqNo, nil, "")
	p.noteIn(res.Body(), contentTypeOf(res))
	return res.Body(), res.StatusCode, nil
}
