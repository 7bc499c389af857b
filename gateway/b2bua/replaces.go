package b2bua

import (
	"strings"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// onReplaces handles an initial INVITE with a Replaces header (RFC 3891)
// naming an answered dialog of ours: the new caller takes that party's
// place in its call. The other party is re-INVITEd with the new caller's
// offer, its answer goes back in our 2xx, and the replaced party gets a
// BYE. A dialog we do not know, or one not answered yet, gets 481;
// "early-only" on an answered dialog gets 486 (RFC 3891 §3).
func (b *B2BUA) onReplaces(req *sip.Request, a *sipgo.DialogServerSession, arrived *sip.Addr, contact sip.Uri, trusted bool) {
	v := req.GetHeader("Replaces").Value()
	callID, tags, ok := parseReplaces(v)
	if !ok {
		_ = a.Respond(400, "Bad Replaces", nil)
		return
	}
	old := b.partyByDialog(callID, tags[0], tags[1])
	if old == nil {
		_ = a.Respond(481, "Call/Transaction Does Not Exist", nil)
		return
	}
	if strings.Contains(strings.ToLower(v), "early-only") {
		_ = a.Respond(486, "Busy Here", nil)
		return
	}
	c, l := old.bridge()
	if c == nil {
		_ = a.Respond(481, "Call/Transaction Does Not Exist", nil)
		return
	}
	body, ct := req.Body(), contentTypeOf(req)
	if len(body) == 0 || !isSDP(ct) {
		// An offerless INVITE would need a three-way exchange; not done.
		_ = a.Respond(488, "Not Acceptable Here", nil, acceptSDP)
		return
	}
	ex := newExchange(nil, nil)
	if code := c.begin(ex); code != 0 {
		_ = a.Respond(code, reasonPhrase(code), nil)
		return
	}
	defer c.finishExchange(ex)
	an := c.media()
	offer := body
	if an != nil {
		var err error
		if offer, err = an.Offer(l, body); err != nil {
			_ = a.Respond(488, "Not Acceptable Here", nil)
			return
		}
	}
	q := c.peer(l)
	ans, code, err := q.reoffer(c.life, offer, ct)
	if err != nil {
		b.log.Info("b2bua: replacement refused", "call", c.info.ID, "by", q.name, "status", code, "err", err)
		if an != nil {
			an.Reject(l)
		}
		_ = a.Respond(code, reasonPhrase(code), nil)
		return
	}
	if an != nil && len(ans) > 0 {
		if ans, err = an.Answer(l.other(), ans); err != nil {
			_ = a.Respond(488, "Not Acceptable Here", nil)
			return
		}
	}
	w := newCallerParty(b, req, a, arrived, contact)
	w.trusted = trusted
	w.noteIn(body, ct)
	ans = w.outSDP(ans)
	c.mu.Lock()
	if c.ended || !old.in(c) {
		c.mu.Unlock()
		_ = a.Respond(481, "Call/Transaction Does Not Exist", nil)
		return
	}
	w.attach(c, l)
	old.attach(nil, l)
	c.parties[l] = w
	c.mu.Unlock()
	b.register(w)
	b.log.Info("b2bua: dialog replaced", "call", c.info.ID, "old", old.name, "new", w.name)

	var hdrs []sip.Header
	if len(ans) > 0 {
		h := sip.ContentTypeHeader(contentTypeOf(req))
		hdrs = append(hdrs, &h)
	}
	hdrs = append(hdrs, sip.NewHeader("Allow", allowInDialog))
	if err := a.Respond(200, "OK", ans, hdrs...); err != nil {
		b.log.Info("b2bua: replacing caller did not confirm", "call", c.info.ID, "err", err)
		w.confirm()
		old.bye()
		c.end(Failed, BySystem)
		return
	}
	old.bye()
}
