package b2bua

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
)

// OnRefer handles a REFER (RFC 3515) from a party of an answered call:
// the transfer of the other party (the transferee). It is answered 202;
// the transferor then gets NOTIFYs with a message/sipfrag body, "SIP/2.0
// 100 Trying" and the final status. Without Replaces in the Refer-To URI
// (blind transfer) the Refer-To user is routed like a dialled number and
// called with the transferee's session; with Replaces naming another
// dialog of ours (attended transfer) the transferee is bridged to the
// other party of that dialog's call. On success the transferor's legs get
// a BYE; on failure the call goes on.
func (b *B2BUA) OnRefer(req *sip.Request, tx sip.ServerTransaction) {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	x, c, l := b.inDialog(req, tx)
	if x == nil {
		return
	}
	rt := req.ReferTo()
	if len(headersNamed(req, "Refer-To")) != 1 || rt == nil || rt.Address.Host == "" && rt.Address.User == "" {
		respond(tx, req, 400, "Bad Refer-To") // RFC 3515 §2.4.1: exactly one
		return
	}
	c.mu.Lock()
	c.settle()
	code := 0
	switch {
	case c.ended:
		code = 481
	case !c.confirmed || c.ex != nil || c.xfer != nil:
		code = 491
	}
	if code != 0 {
		c.mu.Unlock()
		respond(tx, req, code, "")
		return
	}
	y := c.parties[l.other()]
	if y == nil { // a parked call: nobody to transfer
		c.mu.Unlock()
		respond(tx, req, 491, "")
		return
	}
	c.xfer = x
	c.mu.Unlock()
	respond(tx, req, 202, "Accepted")
	id := req.CSeq().SeqNo
	x.notify(id, 100, "Trying", false)

	to := rt.Address
	if orbit, isPark := c.set.parkTarget(to.User); isPark && uriHeader(to, "Replaces") == "" {
		pk, code := c.park(x, y, orbit)
		if pk != nil {
			x.notify(id, 200, "OK", true)
			pk.parked(l)
			return
		}
		b.log.Info("b2bua: park refused", "call", c.info.ID, "orbit", orbit, "status", code)
		c.mu.Lock()
		c.xfer = nil
		c.mu.Unlock()
		x.notify(id, code, reasonPhrase(code), true)
		return
	}
	var other *call
	if rep := uriHeader(to, "Replaces"); rep != "" {
		code, other = c.attended(x, y, to, rep)
	} else {
		code = c.blind(x, y, to, nil)
	}
	by := ByCaller
	if l == LegB {
		by = ByCallee
	}
	if code >= 200 && code < 300 {
		b.log.Info("b2bua: transferred", "call", c.info.ID, "by", x.name)
		x.notify(id, code, reasonPhrase(code), true)
		c.end(Transferred, by)
		if other != nil {
			other.end(Transferred, other.roleOf(other.transferor()))
		}
		return
	}
	b.log.Info("b2bua: transfer failed", "call", c.info.ID, "status", code)
	c.mu.Lock()
	c.xfer = nil // the call goes on: the transferor may take it back at once
	c.mu.Unlock()
	x.notify(id, code, reasonPhrase(code), true)
	if x.isGone() {
		c.end("", by) // the transferor left: nothing to return the transferee to
	}
}

// awaitAck waits until the 2xx that answered p's INVITE is ACKed (for
// an initial call's caller: and its ACK passed on to the callee, which a
// transfer may re-INVITE next), c ends, or a UAS's wait for an ACK
// (64*T1) is over. A transferor may REFER right after ACKing its
// consultation call, and sipgo hands each message to its own goroutine:
// the REFER can overtake that ACK, and a transfer the phone made in order
// must not then get 491.
func (p *party) awaitAck(c *call) {
	if p.isConfirmed() {
		return
	}
	t := time.NewTimer(64 * sip.T1)
	defer t.Stop()
	select {
	case <-p.conf.done:
	case <-c.life.Done():
	case <-t.C:
	}
}

// transferor is the party whose transfer runs on c, if any.
func (c *call) transferor() *party {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.xfer
}

// roleOf names who p is in c for CDR.HangupBy.
func (c *call) roleOf(p *party) string {
	if p != nil && p.legOf() == LegB {
		return ByCallee
	}
	return ByCaller
}

// notify reports the progress of a REFER to the transferor (RFC 3515
// §2.4.5): a message/sipfrag status line; the last one ends the implicit
// subscription.
func (p *party) notify(id uint32, code int, reason string, final bool) {
	if p.isGone() {
		return
	}
	req := p.newRequest(sip.NOTIFY)
	req.AppendHeader(sip.NewHeader("Event", "refer;id="+strconv.FormatUint(uint64(id), 10)))
	state := "active;expires=60"
	if final {
		state = "terminated;reason=noresource"
	}
	req.AppendHeader(sip.NewHeader("Subscription-State", state))
	req.AppendHeader(sip.NewHeader("Content-Type", "message/sipfrag;version=2.0"))
	req.SetBody(fmt.Appendf(nil, "SIP/2.0 %d %s\r\n", code, reason))
	ctx, cancel := withTimeout(byeTimeout)
	defer cancel()
	if res, err := p.do(ctx, req); err != nil {
		p.b.log.Debug("b2bua: notify", "to", p.name, "err", err)
	} else if res.StatusCode >= 300 {
		p.b.log.Debug("b2bua: notify refused", "to", p.name, "status", res.StatusCode)
	}
}

func (p *party) isGone() bool {
	h := p.lock()
	defer h.mu.Unlock()
	return p.rem.gone
}

// leave marks the party gone (it sent BYE) and forgets its dialog.
func (p *party) leave() {
	h := p.lock()
	p.rem.gone = true
	p.stopSessionLocked()
	h.mu.Unlock()
	p.b.forget(p)
}

// bridgeCall makes the call object of a bridge created by a transfer: a
// new call, under the policy in force now (pol).
func (c *call) bridgeCall(pol Policy, y *party, dialled string) *call {
	nc := newCall(c.b, pol)
	nc.local = c.local
	now := time.Now()
	id := sip.GenerateTagN(32)
	nc.key = "xfer:" + id
	nc.info = CallInfo{ID: id, From: y.user, To: dialled, State: StateRouting, Started: now}
	nc.cdr = CDR{CallID: id, Start: now, Caller: y.user, Dialled: dialled, TransferOf: c.info.ID}
	return nc
}

// newAnchor makes the bridge's Anchor when Config.Media is set.
func (nc *call) newAnchor(a, b netip.Addr) (Anchor, error) {
	if nc.set.cfg.Media == nil {
		return nil, nil
	}
	an, err := nc.set.cfg.Media(Bridge{CallID: nc.info.ID, A: a, B: b}, nc.onMediaDead)
	if err != nil {
		return nil, err
	}
	nc.mu.Lock()
	nc.anchor = an
	nc.mu.Unlock()
	return an, nil
}

// blind places a new call from the transferee y to the Refer-To user and
// bridges y to whoever answers. It returns the status for the NOTIFY.
func (c *call) blind(x, y *party, to sip.Uri, extra []sip.Header) int {
	return c.blindRing(x, y, to, extra, 0)
}

// blindRing is blind with the target's ring time (0 = Config.RingTimeout);
// x nil is the box itself moving y (a parked call's ring-back, a group
// queue): no Referred-By, no check of x's trust.
func (c *call) blindRing(x, y *party, to sip.Uri, extra []sip.Header, ring time.Duration) int {
	b := c.b
	pol := b.current()
	d, ok := pol.Router.Outbound(to.User)
	if !ok || d.Route == "" {
		return 404
	}
	if x != nil && !x.trusted && d.Route != dialplan.RouteLocal {
		return 403 // only local users may transfer to the PSTN or HQ
	}
	nc := c.bridgeCall(pol, y, to.User)
	set := nc.set
	nc.d = d
	nc.info.Target, nc.info.Route = d.Target, d.Route
	nc.cdr.Target, nc.cdr.Route, nc.cdr.Rule = d.Target, d.Route, d.Rule
	ts, err := b.targets(c.life, set, d)
	if err != nil || len(ts) == 0 {
		b.log.Info("b2bua: transfer target unreachable", "call", c.info.ID, "to", to.User, "err", err)
		return 480
	}
	ySDP, yct := y.lastSDP()
	offer := withSendrecv(ySDP) // the transferee was probably held by the transferor
	an, err := nc.newAnchor(y.localIP, addrOf(nc.local.laddr, nc.local.contact))
	if err == nil && an != nil && len(offer) > 0 {
		offer, err = an.Offer(LegA, offer)
	}
	if err != nil {
		b.log.Info("b2bua: transfer media refused", "call", c.info.ID, "err", err)
		nc.recordStatus(488)
		nc.end(Failed, BySystem)
		return 488
	}
	if yct == "" {
		yct = "application/sdp"
	}
	b.addCall(nc)
	headers := []sip.Header{sip.NewHeader(loopHeader, nc.token)}
	if x != nil {
		headers = append(headers, sip.NewHeader("Referred-By", "<sip:"+x.user+"@"+nc.local.contact.Host+">"))
	}
	if ring <= 0 {
		ring = set.cfg.RingTimeout
	}
	spec := dialSpec{d: d, targets: ts, body: offer, ctype: yct, maxFwd: 70,
		from:    sip.FromHeader{DisplayName: y.remote.DisplayName, Address: sip.Uri{User: y.user}},
		headers: append(headers, extra...), timeout: ring, laddr: nc.local.laddr, contact: nc.local.contact,
		onAnswer: func(l *leg) bool { return nc.takeOver(c, y, l, offer) }}
	res := b.dial(c.life, set, spec)
	nc.notePeer(res)
	if res.answered {
		if res.up {
			return 200
		}
		nc.end(Failed, BySystem)
		return 500
	}
	disp, _ := failure(res)
	code := 480
	switch {
	case res.cause != nil && c.life.Err() != nil:
		code, disp = 487, Cancelled
	case res.best != nil && res.best.status >= 400:
		code = res.best.status
	case res.best != nil && res.best.status == 0 && res.cause == nil:
		code = 408
	}
	nc.recordStatus(code)
	nc.end(disp, BySystem)
	return code
}

// takeOver bridges the transferee y (taken from call old) with the answered
// leg l: l is ACKed, y is re-INVITEd with l's session, and nc becomes the
// call of both.
func (nc *call) takeOver(old *call, y *party, l *leg, offer []byte) bool {
	b := nc.b
	res := l.sess.InviteResponse
	ctx, cancel := withTimeout(byeTimeout)
	if err := b.ackLeg(ctx, l.sess); err != nil {
		b.log.Warn("b2bua: ack to transfer target", "call", nc.info.ID, "err", err)
	}
	cancel()
	pc := newCalleeParty(b, nc, l, nc.local.laddr, nc.local.contact)
	pc.confirm()
	ans, act := res.Body(), contentTypeOf(res)
	pc.noteIn(ans, act)
	pc.outSDP(offer)
	pc.attach(nc, LegB)
	b.register(pc)
	nc.mu.Lock()
	nc.parties[LegB] = pc
	nc.mu.Unlock()

	forY := ans
	if an := nc.media(); an != nil && len(ans) > 0 {
		var err error
		if forY, err = an.Answer(LegB, ans); err != nil {
			b.log.Info("b2bua: transfer target's media refused", "call", nc.info.ID, "err", err)
			nc.recordStatus(488)
			return false
		}
	}
	// The transferee moves to the new bridge unless its call ended.
	old.mu.Lock()
	if old.ended || !y.inLocked(old) {
		old.mu.Unlock()
		return false
	}
	y.attachLocked(nc, LegA) // nc's lock guards y from here on
	old.mu.Unlock()
	nc.mu.Lock()
	nc.parties[LegA] = y
	nc.cdr.Answer, nc.cdr.Status, nc.cdr.Peer, nc.cdr.Disposition = time.Now(), res.StatusCode, l.t.name(), Answered
	nc.mu.Unlock()
	nc.setState(StateAnswered)
	if len(forY) > 0 {
		if _, code, err := y.reoffer(nc.life, forY, act); err != nil {
			b.log.Warn("b2bua: transferee refused the new session", "call", nc.info.ID, "status", code, "err", err)
		}
	}
	nc.up()
	return true
}

// up marks a bridge confirmed and starts its keep-alive.
func (c *call) up() {
	c.mu.Lock()
	c.confirmed = true
	ended := c.ended
	parties := c.parties
	c.mu.Unlock()
	for _, p := range parties {
		if p != nil && !ended {
			p.startSession() // a transfer target's timer; the transferee's goes on
		}
	}
	if !ended && c.set.cfg.KeepAlive > 0 {
		c.startKeepalive()
	}
}

// attended bridges the transferee y with the other party of the dialog
// that Replaces names (the transferor's consultation call). The named
// dialog's party must be the transferor itself (party.identity; 403
// otherwise). When that dialog is not ours the transfer is done blind,
// with Replaces passed on for the target to match. It returns the NOTIFY status and, on success,
// the consultation call (ended by the caller).
func (c *call) attended(x, y *party, to sip.Uri, replaces string) (int, *call) {
	b := c.b
	callID, tags, ok := parseReplaces(replaces)
	if !ok {
		return 400, nil
	}
	x2 := b.partyByDialog(callID, tags[0], tags[1])
	if x2 == nil {
		return c.blind(x, y, to, []sip.Header{sip.NewHeader("Replaces", replaces)}), nil
	}
	c2, l2 := x2.bridge()
	if c2 == nil || c2 == c {
		return 403, nil
	}
	if id := x.identity(); id == "" || id != x2.identity() {
		// RFC 3891 §6 for a REFER: the dialog Replaces names must share a
		// participant with the REFER's own, i.e. the transferor must be
		// the named dialog's party (its consultation call). Otherwise a
		// party of any call could hijack another call by naming it.
		b.log.Info("b2bua: transfer naming a stranger's dialog refused", "call", c.info.ID, "by", x.name, "named", x2.name)
		return 403, nil
	}
	x2.awaitAck(c2)
	c2.mu.Lock()
	c2.settle()
	switch {
	case c2.ended:
		c2.mu.Unlock()
		return 481, nil
	case !c2.confirmed || c2.ex != nil || c2.xfer != nil:
		c2.mu.Unlock()
		return 491, nil
	}
	c2.xfer = x2
	z := c2.parties[l2.other()]
	c2.mu.Unlock()
	fail := func(code int) (int, *call) {
		c2.mu.Lock()
		c2.xfer = nil
		c2.mu.Unlock()
		if x2.isGone() {
			c2.end("", c2.roleOf(x2))
		}
		return code, nil
	}

	nc := c.bridgeCall(c.b.current(), y, z.user)
	c2.mu.Lock()
	nc.cdr.Target, nc.cdr.Route, nc.cdr.Rule = c2.cdr.Target, c2.cdr.Route, c2.cdr.Rule
	c2.mu.Unlock()
	nc.cdr.Peer = z.name
	nc.info.Target, nc.info.Route = nc.cdr.Target, nc.cdr.Route

	ySDP, yct := y.lastSDP()
	offer := withSendrecv(ySDP)
	an, err := nc.newAnchor(y.localIP, z.localIP)
	if err == nil && an != nil && len(offer) > 0 {
		offer, err = an.Offer(LegA, offer)
	}
	if err != nil {
		nc.recordStatus(488)
		nc.end(Failed, BySystem)
		return fail(488)
	}
	// The other party first: it gets the transferee's session.
	zAns, code, err := z.reoffer(c2.life, offer, yct)
	if err != nil {
		b.log.Info("b2bua: attended transfer refused", "call", c.info.ID, "to", z.name, "status", code, "err", err)
		if an != nil {
			an.Reject(LegA)
		}
		nc.recordStatus(code)
		nc.end(Failed, BySystem)
		return fail(code)
	}
	forY := zAns
	if an != nil && len(zAns) > 0 {
		if forY, err = an.Answer(LegB, zAns); err != nil {
			nc.end(Failed, BySystem)
			return fail(488)
		}
	}
	_, zct := z.lastSDP()
	c.mu.Lock()
	okY := !c.ended && y.inLocked(c)
	if okY {
		y.attachLocked(nc, LegA)
	}
	c.mu.Unlock()
	c2.mu.Lock()
	okZ := !c2.ended && z.inLocked(c2)
	if okZ && okY {
		z.attachLocked(nc, LegB)
	}
	c2.mu.Unlock()
	if !okY || !okZ {
		if okY {
			y.attach(c, LegA) // put it back; its call goes on
		}
		nc.end(Failed, BySystem)
		return fail(487)
	}
	now := time.Now()
	nc.mu.Lock()
	nc.parties = [2]*party{y, z}
	nc.cdr.Answer, nc.cdr.Status, nc.cdr.Disposition = now, 200, Answered
	nc.mu.Unlock()
	b.addCall(nc)
	nc.setState(StateAnswered)
	if len(forY) > 0 {
		if _, code, err := y.reoffer(nc.life, forY, zct); err != nil {
			b.log.Warn("b2bua: transferee refused the new session", "call", nc.info.ID, "status", code, "err", err)
		}
	}
	nc.up()
	return 200, c2
}

// parseReplaces reads a Replaces value (RFC 3891 §6.1): call-id, to-tag
// and from-tag.
func parseReplaces(v string) (callID string, tags [2]string, ok bool) {
	parts := strings.Split(v, ";")
	callID = strings.TrimSpace(parts[0])
	for _, p := range parts[1:] {
		k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch strings.ToLower(k) {
		case "to-tag":
			tags[0] = val
		case "from-tag":
			tags[1] = val
		}
	}
	return callID, tags, callID != "" && tags[0] != "" && tags[1] != ""
}

// uriHeader returns the unescaped value of a URI header (RFC 3261 §19.1.1:
// sip:user@host?Replaces=...).
func uriHeader(u sip.Uri, name string) string {
	for _, kv := range u.Headers {
		if strings.EqualFold(kv.K, name) {
			if v, err := url.PathUnescape(kv.V); err == nil {
				return v
			}
			return kv.V
		}
	}
	return ""
}

// addrOf is the IP of a listener, or of the contact host.
func addrOf(a *sip.Addr, contact sip.Uri) netip.Addr {
	if a != nil {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return ip.Unmap()
		}
	}
	ip, _ := netip.ParseAddr(contact.Host)
	return ip
}

// onMediaDead is the onDead callback given to Config.Media.
func (c *call) onMediaDead(reason string) {
	c.b.log.Info("b2bua: media dead", "call", c.info.ID, "reason", reason)
	c.b.inflight.Add(1)
	go func() {
		defer c.b.inflight.Add(-1)
		c.end(MediaTimeout, BySystem)
	}()
}
