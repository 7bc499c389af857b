package b2bua

import (
	"net/netip"
	"strings"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// onReplaces handles an initial INVITE with a Replaces header (RFC 3891)
// naming an answered dialog of ours: the new caller takes that party's
// place in its call. The other party is re-INVITEd with the new caller's
// offer, its answer goes back in our 2xx, and the replaced party gets a
// BYE. A dialog we do not know, or one not answered yet, gets 481;
// "early-only" on an answered dialog gets 486 (RFC 3891 §3); a requester
// who is not the replaced party (identity) gets 403 (RFC 3891 §6).
func (b *B2BUA) onReplaces(req *sip.Request, a *sipgo.DialogServerSession, arrived *sip.Addr, contact sip.Uri, trusted bool) {
	v := headerNamed(req, "Replaces").Value()
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
	if who := requester(req, trusted); who == "" || who != old.identity() {
		// RFC 3891 §6: only a participant of the replaced dialog may
		// replace it; anyone else could take over (or listen to) a call
		// by naming its dialog.
		b.log.Info("b2bua: replacement by a non-participant refused", "call", c.info.ID, "from", req.Source())
		_ = a.Respond(403, "Forbidden", nil)
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
	q := c.peer(l)
	if q == nil { // parked (park.go): retrieved by dialling the orbit instead
		_ = a.Respond(491, "Request Pending", nil)
		return
	}
	an := c.media()
	offer := body
	if an != nil {
		var err error
		if offer, err = an.Offer(l, body); err != nil {
			_ = a.Respond(488, "Not Acceptable Here", nil)
			return
		}
	}
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
	w := newCallerParty(b, c, req, a, arrived, contact)
	w.trusted = trusted
	w.noteIn(body, ct)
	ans = w.outSDP(ans)
	c.mu.Lock()
	if c.ended || !old.inLocked(c) {
		c.mu.Unlock()
		_ = a.Respond(481, "Call/Transaction Does Not Exist", nil)
		return
	}
	w.attachLocked(c, l)
	old.attachLocked(nil, l) // it keeps c as its home: c's lock guards it until it is gone
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

// identity names who a party is, for RFC 3891 §6: a request that
// replaces a dialog must come from a participant of that dialog. A local
// user (an authenticated caller, a registered contact: trusted) is its
// extension, which the gateway has verified; a trunk peer (a PSTN gateway
// or HQ, admitted by address) is the IP address it talks from, the UA
// that holds the dialog whatever number it represents. "" = unknown,
// never equal to anything.
func (p *party) identity() string {
	if p.trusted {
		if p.user == "" {
			return ""
		}
		return "user:" + p.user
	}
	return peerIdentity(p.dest)
}

// requester is the identity (see party.identity) of the sender of an
// initial request; trusted says the gateway authenticated it as the user
// of its From header.
func requester(req *sip.Request, trusted bool) string {
	if trusted {
		if f := req.From(); f != nil && f.Address.User != "" {
			return "user:" + f.Address.User
		}
		return ""
	}
	return peerIdentity(req.Source())
}

func peerIdentity(hostport string) string {
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return ""
	}
	return "peer:" + ap.Addr().Unmap().String()
}
