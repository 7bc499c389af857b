package b2bua

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
)

// call is one call: the A leg's INVITE until it has its final response,
// then, once answered, a bridge of two parties until it ends. A bridge
// made by a transfer is a call without an A-leg INVITE (setup.a == nil).
type call struct {
	b   *B2BUA
	set *Settings // the configuration this call started with
	// router is the Router of set's push: the call's voicemail and HQ
	// fallback are routed as the call was.
	router Router
	key    string // key in b.calls
	token  string // loop marker on our INVITEs (loopHeader)
	// trusted: the caller is a local user (see party.trusted)
	trusted bool

	initial bool   // an initial call (A's INVITE), not a transfer's bridge
	branch  string // Via branch of A's INVITE (Looped)
	d       dialplan.Decision
	// The forwards the call followed (ringing phase only): the Diversion
	// headers, latest first, the local users it reached, and why c.d was
	// last forwarded to.
	diversions    []sip.Header
	reached       map[string]bool
	forwardReason string
	// behalf: a delegate's call made as this boss (delegation.go)
	behalf *Boss
	// pick is the phone picking the ringing call up (pickup.go), under mu
	pick  *pickup
	local callLocal
	setup callSetup // dropped under mu (setupDone)
	// rel sends the caller's provisionals reliably (its INVITE had
	// Require: 100rel); nil = unreliably, as RFC 3261 does.
	rel   *uasReliable
	ring  context.Context         // the ringing phase: until answer or failure
	abort context.CancelCauseFunc // ends ring with a cause

	// mu guards what follows, and the state of the parties whose home
	// this call is (party.home; doc.go, "State and locks").
	mu sync.Mutex
	// info's State, Target, Route and Answered change under mu; the rest
	// is set before the call is listed (logs read info.ID unlocked).
	info      CallInfo
	parties   [2]*party // LegA, LegB once answered
	anchor    Anchor    // nil = SDP passes through
	confirmed bool      // the answer was ACKed: in-dialog exchanges may start
	ended     bool
	ex        *exchange   // the offer/answer exchange in progress, if any
	acking    []*exchange // exchanges that only wait for their ACK
	xfer      *party      // the transferor while a transfer of this call runs
	orbit     string      // the orbit the call is parked in, "" when none (park.go)
	rung      []string    // the members a group call rings now, for pickup (groups.go)
	cdr       CDR
	// toVoicemail: the call went to the voicemail pilot (the disposition
	// of its answer)
	toVoicemail bool
	vmLine      VoicemailLine // the box's voicemail answering the call; nil = none
	keepTimer   *time.Timer   // the keep-alive (startKeepalive)

	life context.Context    // ends with the call
	kill context.CancelFunc // ends life
}

// callSetup is the A leg's INVITE and what rang it; zero for bridges made
// by a transfer. It is written before the call runs, read by its setup,
// and dropped by setupDone once the call is up (under mu then): an
// answered call keeps its parties' dialog state, not the messages that
// made it.
type callSetup struct {
	// aReq is the dialog's copy (a.InviteRequest, with our To tag), not
	// the request as parsed: a call up holds one copy of its INVITE.
	a     *sipgo.DialogServerSession
	aTx   sip.ServerTransaction
	aReq  *sip.Request
	offer []byte   // the offer sent to B legs (A's SDP through the Anchor)
	early []target // c.d's targets, looked up at admission for the Anchor
	// users counts who still needs the setup of an answered call: answer
	// (until A's ACK) and onAck (until B is ACKed).
	users int
}

// callLocal is where the call meets the box: set before the call runs,
// then only read (a transfer's bridge copies its call's).
type callLocal struct {
	arrived *sip.Addr // the listener A's INVITE arrived on (for requests to A)
	laddr   *sip.Addr // the listener B legs leave from
	contact sip.Uri   // our Contact
}

func newCall(b *B2BUA, pol Policy) *call {
	c := &call{b: b, set: pol.Settings, router: pol.Router, token: sip.GenerateTagN(16)}
	c.ring, c.abort = context.WithCancelCause(context.Background())
	c.life, c.kill = context.WithCancel(context.Background())
	return c
}

func (c *call) setState(s string) {
	c.mu.Lock()
	c.info.State = s
	if s == StateAnswered {
		c.info.Answered = time.Now()
	}
	from, target := c.info.From, c.info.Target
	c.mu.Unlock()
	c.b.watchedChanged(from, target)
}

// respondA answers the A leg's INVITE with a final non-2xx status and
// records it for the CDR.
//
// It writes to the INVITE's server transaction rather than through
// DialogServerSession.Respond, which waits for the ACK of a non-2xx final
// (up to Timer H, 32 s): a caller that never ACKs would hold the call's end,
// and its CDR, that long. The transaction outlives the handler (sipgo
// retains it for its timers), so it still retransmits the answer and
// absorbs the ACK.
func (c *call) respondA(code int, reason string) {
	c.mu.Lock()
	c.cdr.Status = code
	c.mu.Unlock()
	if reason == "" {
		reason = reasonPhrase(code)
	}
	c.stopReliable()
	res := sip.NewResponseFromRequest(c.setup.a.InviteRequest, code, reason, nil)
	addHeaders(res, c.set.warnings())
	c.setup.a.InviteResponse = res
	_ = c.setup.aTx.Respond(res)
}

// run drives an initial call: it rings the dial-plan decision, forwards
// to voicemail when that applies, and answers the A leg. It returns once
// the A leg has its final response (and, for a 2xx, its ACK).
func (c *call) run() {
	defer c.abort(nil)
	defer c.stopReliable()
	stopWatch := context.AfterFunc(c.setup.a.Context(), func() { c.abort(errCallerGone) })
	defer stopWatch()

	if c.d.Route == dialplan.RouteLocal {
		c.ringLocal()
		return
	}

	spec, err := c.specOf(c.d, c.setup.early)
	if err != nil {
		c.b.log.Warn("b2bua: no targets", "call", c.info.ID, "route", c.d.Route, "err", err)
		if c.d.Route == dialplan.RouteHQ {
			if res, ok := c.fallback(err.Error()); ok {
				c.finish(res, nil)
				return
			}
		}
		c.respondA(503, "Service Unavailable")
		c.end(Failed, BySystem)
		return
	}
	res := c.b.dial(c.ring, c.set, spec)
	c.notePeer(res)
	if c.d.Route == dialplan.RouteHQ && !res.answered && res.cause == nil &&
		(res.best == nil || res.best.leg.t.retryable(res.best.status, res.best.err)) {
		if fres, ok := c.fallback(hqFailure(res)); ok {
			res = fres
		}
	}
	c.finish(res, nil)
}

// ringLocal rings a local user with the user's services (a forward
// always out of the box was followed at admission, before the media was
// anchored, and that call runs as one to its route): forward always,
// do-not-disturb (busy without ringing), and the forwards on busy and no
// answer, which may lead to another local user (rung the same way), or
// out by the dial plan; then the voicemail of the last user reached.
func (c *call) ringLocal() {
	early := c.setup.early
	for {
		if !c.followAlways() {
			return
		}
		if c.d.Route != dialplan.RouteLocal {
			c.forward(c.d, c.forwardReason, false)
			return
		}
		if g, ok := c.set.group(c.d.Target); ok {
			if c.ringGroup(g) {
				return
			}
			early = nil
			continue // to the overflow
		}
		sv := c.set.services(c.d.Target)
		vm := c.voicemailOf(c.d.Target)
		var res dialResult
		reason := "do-not-disturb"
		ts := early
		if sv.DND {
			ts = c.delegateTargets(c.d.Target, true) // they ring in the boss's place
		}
		if sv.DND && len(ts) == 0 {
			res.best = &legEvent{status: 486}
			c.b.log.Debug("b2bua: do not disturb", "call", c.info.ID, "extension", c.d.Target)
		} else {
			spec, err := c.specOf(c.d, ts)
			if err != nil {
				c.respondA(503, "Service Unavailable")
				c.end(Failed, BySystem)
				return
			}
			if !sv.DND {
				if dts := c.delegateTargets(c.d.Target, len(spec.targets) == 0); len(dts) > 0 {
					spec.targets = append(slices.Clone(spec.targets), dts...)
				}
			}
			switch {
			case sv.ForwardNoAnswer != "":
				spec.timeout, spec.cause = cmp.Or(sv.NoAnswerAfter, c.set.cfg.VoicemailAfter), errNoAnswer
			case vm.rings():
				spec.timeout, spec.cause = c.set.cfg.VoicemailAfter, errNoAnswer
			}
			res = c.b.dial(c.ring, c.set, spec)
			c.notePeer(res)
			if res.cause == errPickedUp && c.answerPickup() {
				return
			}
			_, reason = failure(res)
		}
		early = nil // they were c.d's before this forward
		if fwd := sv.forwardOn(reason); fwd != "" && !res.answered && res.cause != errCallerGone && res.cause != errCallerBye {
			switch c.divert(fwd, reason) {
			case diverted:
				continue
			case refused:
				return
			}
		}
		c.finish(res, vm)
		return
	}
}

// forwardOn is the forward for a reason failure gave ("" = none).
func (sv Services) forwardOn(reason string) string {
	switch reason {
	case "user-busy", "do-not-disturb":
		return sv.ForwardBusy
	case "no-answer":
		return sv.ForwardNoAnswer
	}
	return ""
}

// followAlways follows the forward-always settings from c.d on. It
// reports false when the call got its final answer here (a loop).
func (c *call) followAlways() bool {
	for c.d.Route == dialplan.RouteLocal {
		fwd := c.set.services(c.d.Target).ForwardAlways
		if fwd == "" {
			return true
		}
		switch c.divert(fwd, "unconditional") {
		case refused:
			return false
		case unrouted:
			return true // the user is rung instead
		}
	}
	return true
}

// Outcomes of divert.
const (
	diverted = iota // c.d is the forward's decision now
	unrouted        // the number has no route: nothing changed
	refused         // a loop: the caller got 482, the call ended
)

// divert moves the call from the local user c.d names to number (the
// user's forward, for reason): the Diversion (RFC 5806) naming the user
// is added to the B legs' INVITEs, the caller gets 181, and the CDR the
// first forwarding user. A forward back to a user the call already
// reached, or one more than maxForwards, is a loop.
func (c *call) divert(number, reason string) int {
	d, ok := c.router.Outbound(number)
	if !ok || d.Route == "" {
		c.b.log.Info("b2bua: forward has no route", "call", c.info.ID, "extension", c.d.Target, "forward", number)
		return unrouted
	}
	from := c.d.Target
	if c.reached == nil {
		c.reached = map[string]bool{from: true}
	}
	if len(c.diversions) >= maxForwards || d.Route == dialplan.RouteLocal && c.reached[d.Target] {
		c.b.log.Info("b2bua: forwarding loop", "call", c.info.ID, "extension", from, "forward", number)
		c.respondA(482, "Loop Detected")
		c.end(Failed, BySystem)
		return refused
	}
	if d.Route == dialplan.RouteLocal {
		c.reached[d.Target] = true
	}
	c.addDiversion(from, reason)
	_ = c.setup.a.Respond(181, "Call Is Being Forwarded", nil)
	c.mu.Lock()
	if c.cdr.ForwardedFrom == "" {
		c.cdr.ForwardedFrom, c.cdr.ForwardReason = from, reason
	}
	c.cdr.Target, c.cdr.Route, c.cdr.Rule = d.Target, d.Route, d.Rule
	c.info.Target, c.info.Route = d.Target, d.Route
	c.mu.Unlock()
	c.b.log.Info("b2bua: call forwarded", "call", c.info.ID, "extension", from, "reason", reason, "to", d.Target, "route", d.Route)
	c.d, c.forwardReason = d, reason
	c.b.watchedChanged(from, d.Target)
	return diverted
}

// addDiversion puts the Diversion of a forward by ext on top of the
// call's (RFC 5806 §3: the latest first, counting the forwards).
func (c *call) addDiversion(ext, reason string) {
	v := "<sip:" + ext + "@" + c.local.contact.Host + ">;reason=" + reason + ";counter=" + strconv.Itoa(len(c.diversions)+1)
	c.diversions = slices.Insert(c.diversions, 0, sip.Header(sip.NewHeader("Diversion", v)))
}

// finish ends a call after its ringing phase res: nothing more to do when
// it was answered, else the caller's cancellation, voicemail (vm, nil =
// none), or the failure answer.
func (c *call) finish(res dialResult, vm *voicemailPlan) {
	if res.answered {
		if !res.up {
			c.end(Failed, BySystem)
		}
		return
	}
	switch {
	case res.cause == errCallerGone:
		c.recordStatus(487) // sipgo answered the CANCEL and the INVITE
		c.end(Cancelled, ByCaller)
		return
	case res.cause == errCallerBye:
		c.respondA(487, "Request Terminated")
		c.end(Cancelled, ByCaller)
		return
	}
	disp, reason := failure(res)
	if vm != nil && reason != "" && c.toVoicemailOf(vm, reason) {
		return
	}
	c.respondFailure(res)
	c.end(disp, BySystem)
}

// hqFailure says why every HQ target failed, for the CDR and the log.
func hqFailure(res dialResult) string {
	switch {
	case res.best == nil:
		return "no hq target"
	case res.best.status != 0:
		return res.last.name() + ": " + strconv.Itoa(res.best.status)
	case res.best.err != nil:
		return res.last.name() + ": " + res.best.err.Error()
	}
	return res.last.name() + ": no response"
}

// fallback is the per-call fallback of a call to HQ that every HQ target
// failed by the retry rule (or that found no target): the call goes out at
// once by the route its number has in survivable mode (Router.HQFallback),
// without waiting for the probes to change the mode. ok is false when
// there is no fallback (or it has no target); the caller then answers with
// HQ's failure. The CDR names the new route and target and why.
func (c *call) fallback(why string) (dialResult, bool) {
	fr, ok := c.router.(HQFallback)
	if !ok || c.ring.Err() != nil {
		return dialResult{}, false
	}
	fd, ok := fr.HQFallback(c.d.Number)
	if !ok {
		return dialResult{}, false
	}
	spec, err := c.spec(fd)
	if err != nil || len(spec.targets) == 0 {
		c.b.log.Warn("b2bua: hq failed and the fallback has no target", "call", c.info.ID, "route", fd.Route, "err", err)
		return dialResult{}, false
	}
	c.b.log.Info("b2bua: hq failed: per-call fallback", "call", c.info.ID, "why", why, "route", fd.Route, "target", fd.Target)
	c.mu.Lock()
	c.cdr.Target, c.cdr.Route, c.cdr.Rule = fd.Target, fd.Route, fd.Rule
	c.cdr.FallbackFrom, c.cdr.FallbackReason = dialplan.RouteHQ, why
	c.info.Target, c.info.Route = fd.Target, fd.Route
	c.mu.Unlock()
	res := c.b.dial(c.ring, c.set, spec)
	c.notePeer(res)
	return res, true
}

// failure classifies a ringing phase nobody answered: the disposition and
// the voicemail forwarding reason (RFC 5806 §4: "user-busy", "no-answer",
// "unavailable"); "" = not a reason to forward.
func failure(res dialResult) (Disposition, string) {
	switch {
	case res.cause == errNoAnswer || res.cause == errRingTimeout:
		return NoAnswer, "no-answer"
	case res.best != nil && (res.best.status == 486 || res.best.status == 600):
		return Busy, "user-busy"
	case res.best == nil || res.best.status == 0 || res.best.status == 408 || res.best.status == 430 || res.best.status == 480 ||
		res.best.status >= 500 && res.best.status < 600 || res.best.status >= 300 && res.best.status < 400:
		return Unreachable, "unavailable"
	}
	return Failed, ""
}

// respondFailure answers the A leg after nobody answered.
func (c *call) respondFailure(res dialResult) {
	best := res.best
	switch {
	case res.cause == errNoAnswer || res.cause == errRingTimeout:
		c.respondA(480, "Temporarily Unavailable")
	case best != nil && best.status >= 300 && best.status < 400:
		// A redirect that was not followed (not 300/301/302/305, a loop, too
		// deep): relaying it with our own Contact would point the caller
		// back at us.
		c.respondA(480, "Temporarily Unavailable")
	case best != nil && best.res != nil:
		c.respondA(best.res.StatusCode, best.res.Reason)
	case best != nil && best.status >= 300:
		c.respondA(best.status, "")
	case c.d.Route == dialplan.RoutePSTN:
		c.respondA(503, "Service Unavailable")
	default:
		c.respondA(480, "Temporarily Unavailable")
	}
}

// spec is the ringing phase for decision d, carrying the A leg's offer.
func (c *call) spec(d dialplan.Decision) (dialSpec, error) { return c.specOf(d, nil) }

// specOf is spec with the targets already looked up (nil = look them up).
func (c *call) specOf(d dialplan.Decision, ts []target) (dialSpec, error) {
	if ts == nil {
		var err error
		if ts, err = c.b.targets(c.ring, c.set, d); err != nil {
			return dialSpec{}, err
		}
	}
	s := dialSpec{d: d, targets: ts, body: c.setup.offer, timeout: c.set.cfg.RingTimeout,
		laddr: c.local.laddr, contact: c.local.contact, onProv: c.relayProvisional, onAnswer: c.answer}
	if h := c.setup.aReq.ContentType(); h != nil {
		s.ctype = h.Value()
	}
	if f := c.setup.aReq.From(); f != nil {
		s.from = *f
	}
	s.maxFwd = 70
	if h := c.setup.aReq.MaxForwards(); h != nil {
		s.maxFwd = h.Val() - 1
	}
	s.headers = append([]sip.Header{sip.NewHeader(loopHeader, c.token)}, c.diversions...)
	if c.behalf != nil {
		c.behalf.behalfIdentity(&s, c.local.contact.Host)
	}
	// RFC 4028: the caller's Session-Expires (or the box's own) and a
	// Min-SE no lower than the caller's; RFC 3262: the box PRACKs a
	// callee's reliable provisionals itself (not with a late offer: the
	// PRACK would have to carry an answer only the caller has).
	sup := "timer"
	if len(c.setup.offer) > 0 {
		sup = "100rel, timer"
	}
	s.headers = append(s.headers, sip.NewHeader("Supported", sup))
	if se, mse := c.set.sessionOffer(c.setup.aReq); se > 0 {
		s.headers = append(s.headers, sip.NewHeader("Session-Expires", strconv.Itoa(se)), sip.NewHeader("Min-SE", strconv.Itoa(mse)))
	}
	return s, nil
}

// forward sends the call on to decision d after the local user c.d did
// not take it (reason): to the voicemail pilot (vm), or to where the
// user's forward leads out of the box (divert has then added its
// Diversion). It reports whether the A leg got its final response here;
// when not, the caller answers with the user's failure.
func (c *call) forward(d dialplan.Decision, reason string, vm bool) bool {
	if vm {
		c.addDiversion(c.d.Target, reason)
	}
	spec, err := c.spec(d)
	if err != nil || len(spec.targets) == 0 {
		c.b.log.Warn("b2bua: forward target unreachable", "call", c.info.ID, "number", d.Number, "voicemail", vm, "err", err)
		if !vm {
			c.respondA(480, "Temporarily Unavailable")
			c.end(Unreachable, BySystem)
			return true
		}
		return false
	}
	if vm {
		_ = c.setup.a.Respond(181, "Call Is Being Forwarded", nil) // RFC 3261 §21.1.3
		c.mu.Lock()
		if c.cdr.ForwardedFrom == "" {
			c.cdr.ForwardedFrom, c.cdr.ForwardReason = c.d.Target, reason
		}
		c.cdr.Target, c.cdr.Route, c.cdr.Rule = d.Target, d.Route, d.Rule
		c.info.Target, c.info.Route = d.Target, d.Route
		c.toVoicemail = true
		c.mu.Unlock()
		c.b.log.Info("b2bua: forwarding to voicemail", "call", c.info.ID, "extension", c.d.Target, "reason", reason, "pilot", d.Target)
	}
	res := c.b.dial(c.ring, c.set, spec)
	c.notePeer(res)
	if !vm {
		c.finish(res, nil)
		return true
	}
	if res.answered {
		if !res.up {
			c.end(Failed, BySystem)
		}
		return true
	}
	switch res.cause {
	case errCallerGone:
		c.recordStatus(487)
		c.end(Cancelled, ByCaller)
		return true
	case errCallerBye:
		c.respondA(487, "Request Terminated")
		c.end(Cancelled, ByCaller)
		return true
	}
	return false
}

func (c *call) notePeer(res dialResult) {
	if !res.tried {
		return
	}
	c.mu.Lock()
	c.cdr.Peer = res.last.name()
	c.mu.Unlock()
}

func (c *call) recordStatus(code int) {
	c.mu.Lock()
	c.cdr.Status = code
	c.mu.Unlock()
}

func contentTypeOf(m interface{ ContentType() *sip.ContentTypeHeader }) string {
	if h := m.ContentType(); h != nil {
		return h.Value()
	}
	return ""
}

// relayProvisional sends a B leg's 18x to the A leg (its SDP, early media,
// through the Anchor: as an answer, or with a late offer, an INVITE
// without SDP, as the callee's offer, which its 2xx repeats).
func (c *call) relayProvisional(r *sip.Response) {
	body := r.Body()
	if an := c.media(); len(body) > 0 && an != nil {
		var out []byte
		var err error
		if len(c.setup.offer) > 0 {
			out, err = an.Answer(LegB, body)
		} else {
			out, err = an.Offer(LegB, body)
		}
		if err != nil {
			c.b.log.Debug("b2bua: early media not bridged", "call", c.info.ID, "err", err)
			body = nil
		} else {
			body = out
		}
	}
	if c.rel != nil && len(c.setup.offer) == 0 {
		// A reliable 18x with SDP would be our offer, answered in the
		// caller's PRACK, which the callee never gets: the caller's
		// answer comes in its ACK to our 2xx instead.
		body = nil
	}
	var hdrs []sip.Header
	if len(body) > 0 {
		ct := sip.ContentTypeHeader(contentTypeOf(r))
		hdrs = append(hdrs, &ct)
	}
	if c.rel != nil {
		if !c.sendReliable(r.StatusCode, r.Reason, body, hdrs) {
			c.b.log.Debug("b2bua: provisional not relayed: the last reliable one waits for its PRACK", "call", c.info.ID, "status", r.StatusCode)
			return
		}
		c.setState(StateRinging)
		return
	}
	if err := c.setup.a.Respond(r.StatusCode, r.Reason, body, hdrs...); err != nil {
		c.b.log.Debug("b2bua: relay provisional", "call", c.info.ID, "err", err)
		return
	}
	c.setState(StateRinging)
}

// answer sends the winner's 2xx to the A leg and waits for A's ACK (OnAck
// then ACKs the B leg). It reports whether the call is up.
func (c *call) answer(l *leg) bool {
	res := l.sess.InviteResponse
	body := res.Body()
	late := len(c.setup.offer) == 0 // A sent no offer: B's 2xx carries it, A's ACK the answer
	if len(body) == 0 && !late {
		// The answer came in a reliable 18x (RFC 3262) and the 2xx does
		// not repeat it: the caller, which got that 18x unreliably or not
		// at all, gets it in our 2xx.
		body = l.rel.earlyAnswer()
	}
	if an := c.media(); an != nil && len(body) > 0 {
		var err error
		if late {
			body, err = an.Offer(LegB, body)
		} else {
			body, err = an.Answer(LegB, body)
		}
		if err != nil {
			c.b.log.Info("b2bua: media cannot be bridged", "call", c.info.ID, "err", err)
			discardLeg(c.b, l, c.local.laddr)
			c.respondA(488, "Not Acceptable Here")
			return false
		}
	}
	pa := newCallerParty(c.b, c, c.setup.aReq, c.setup.a, c.local.arrived, c.local.contact)
	pb := newCalleeParty(c.b, c, l, l.localAddr(c.local.laddr), l.contact(c.local.contact))
	pa.trusted = c.trusted
	pa.noteIn(c.setup.aReq.Body(), contentTypeOf(c.setup.aReq))
	if len(res.Body()) > 0 {
		pb.noteIn(res.Body(), contentTypeOf(res))
	} else {
		pb.noteIn(l.rel.earlyAnswer(), "application/sdp")
	}
	pa.timer.st = c.set.callerSession(c.setup.aReq, pb.timer.st.interval) // neither is shared yet
	pb.outSDP(c.setup.offer)
	body = pa.outSDP(body)
	pa.attach(c, LegA)
	pb.attach(c, LegB)
	c.mu.Lock()
	c.parties = [2]*party{pa, pb}
	c.setup.users = 2
	c.cdr.Answer = time.Now()
	c.cdr.Status = res.StatusCode
	c.cdr.Peer = l.t.name()
	rang := c.info.Target
	if l.t.contact && !c.toVoicemail {
		// The user who answered: a group's member, a boss's delegate.
		c.cdr.Target, c.info.Target = l.t.user, l.t.user
	}
	if c.toVoicemail {
		c.cdr.Disposition = Voicemail
	} else {
		c.cdr.Disposition = Answered
	}
	c.mu.Unlock()
	c.b.register(pa, pb)
	c.setState(StateAnswered)
	c.b.watchedChanged(rang) // a boss's or group's lamp, when someone else answered

	hdrs := c.set.warnings()
	if len(body) > 0 {
		ct := sip.ContentTypeHeader(cmp.Or(contentTypeOf(res), "application/sdp"))
		hdrs = append(hdrs, &ct)
	}
	hdrs = append(hdrs, sip.NewHeader("Supported", "100rel, timer"))
	hdrs = append(hdrs, pa.answerSessionHeaders(c.setup.aReq)...)
	c.awaitPrack()
	if err := c.setup.a.Respond(res.StatusCode, res.Reason, body, hdrs...); err != nil {
		c.b.log.Info("b2bua: caller did not confirm the answer", "call", c.info.ID, "err", err)
		pa.confirm()
		c.ackCallee(pb, nil)
		c.end(Failed, BySystem)
		return false
	}
	c.setupDone()
	c.mu.Lock()
	c.confirmed = true
	ended := c.ended
	c.mu.Unlock()
	if !ended {
		pa.startSession()
		pb.startSession()
	}
	if !ended && c.set.cfg.KeepAlive > 0 {
		c.startKeepalive()
	}
	return true
}

// setupDone is called by each of the answered call's setup.users when it
// is done with the setup; the last one drops the setup state: A's INVITE,
// our 2xx and A's transaction (the DialogServerSession), B's INVITE, its
// 2xx and the client transaction (the DialogClientSession), the offer and
// the targets. Half of a call's memory, which the overload gate's memory
// criterion and the collector pay for as long as the call is up.
func (c *call) setupDone() {
	c.mu.Lock()
	c.setup.users--
	drop := c.setup.users == 0
	if drop {
		c.setup = callSetup{}
	}
	parties := c.parties
	c.mu.Unlock()
	if !drop {
		return
	}
	for _, p := range parties {
		if p != nil {
			p.dropSession()
		}
	}
}

// ackCallee sends the ACK for the callee's 2xx once, with the A leg's
// late answer when there is one, and only then marks pb confirmed (a BYE
// or a transfer's re-INVITE waits for that and must not overtake the
// ACK). The party builds it from the dialog, as it does for a
// re-INVITE's 2xx: sipgo's WriteAck would copy it for a transaction that
// is already gone (acks.go).
func (c *call) ackCallee(pb *party, body []byte) {
	_, cli := pb.session()
	if cli == nil {
		return // not a callee: a picker (pickup.go) confirms with its own ACK
	}
	if !pb.conf.acked.CompareAndSwap(false, true) {
		return
	}
	defer pb.confirm()
	var ct string
	if len(body) > 0 && c.setup.aReq != nil {
		if an := c.media(); an != nil {
			out, err := an.Answer(LegA, body)
			if err != nil {
				c.b.log.Info("b2bua: late answer not bridged", "call", c.info.ID, "err", err)
			} else {
				body = out
			}
		}
		body = pb.outSDP(body)
		ct = contentTypeOf(c.setup.aReq)
	} else {
		body = nil
	}
	pb.ackNow(cli.InviteRequest.CSeq().SeqNo, body, ct)
}

// onAck handles an ACK from party p of this call: the ACK for the 2xx
// that answered p's INVITE (for the caller of an initial call, forwarded
// as the callee's ACK), or the ACK that ends p's re-INVITE exchange.
func (c *call) onAck(p *party, req *sip.Request, tx sip.ServerTransaction) {
	cs := req.CSeq()
	if cs == nil {
		return
	}
	if srv, _ := p.session(); srv != nil && !p.isConfirmed() && cs.SeqNo == p.inviteCSeq {
		if err := srv.ReadAck(req, tx); err != nil {
			c.b.log.Debug("b2bua: ack", "call", c.info.ID, "err", err)
			return
		}
		if !p.conf.acked.CompareAndSwap(false, true) {
			return // the same ACK twice at once
		}
		p.noteIn(req.Body(), contentTypeOf(req))
		c.mu.Lock()
		initial := c.initial && c.parties[LegA] == p
		pb := c.parties[LegB]
		c.confirmed = true // before the callee's ACK: it may send a request at once
		c.mu.Unlock()
		if initial && pb != nil {
			c.ackCallee(pb, req.Body())
			c.setupDone()
		}
		p.confirm() // after the callee's ACK: a transfer waits for it (party.awaitAck)
		return
	}
	if ex := c.ackFor(p, cs.SeqNo); ex != nil {
		ex.ackOnce(req)
	}
}

// end ends the call once: the parties still in it get a BYE (a party that
// sent BYE is already gone), the Anchor is closed and the CDR goes out.
// disp "" keeps the disposition set at the answer.
func (c *call) end(disp Disposition, by string) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended = true
	c.kill()
	if c.keepTimer != nil && c.keepTimer.Stop() {
		c.b.inflight.Add(-1) // stopped before it fired: done (see startKeepalive)
	}
	var inIt [2]*party // the parties still in the call
	for i, p := range c.parties {
		if p != nil && p.inLocked(c) {
			inIt[i] = p
		}
	}
	anchor := c.anchor
	c.anchor = nil
	orbit := c.orbit
	if disp != "" {
		c.cdr.Disposition = disp
	}
	if c.cdr.Disposition == "" {
		c.cdr.Disposition = Failed
	}
	c.cdr.HangupBy = by
	c.cdr.End = time.Now()
	cdr := c.cdr
	c.mu.Unlock()
	if cdr.Group != "" && !cdr.Answer.IsZero() && cdr.Disposition != Voicemail {
		c.b.groupState(cdr.Group).answeredEnded(cdr.Target, cdr.End)
	}
	c.b.parks.leave(c, orbit)
	defer c.b.callEnded.fire() // after removeCall: its parties are free
	c.b.endStarts()
	defer c.b.endDone()
	c.b.removeCall(c)
	c.b.watchedChanged(cdr.Caller, cdr.Target, cdr.Dialled)
	if anchor != nil {
		anchor.Close()
	}
	byes := make([]*party, 0, 2)
	for _, p := range inIt {
		if p == nil {
			continue
		}
		if _, cli := p.session(); cli != nil && !p.isConfirmed() {
			c.ackCallee(p, nil) // its 2xx still waits for the caller's ACK: ACK it so that it can be ended
		}
		byes = append(byes, p)
	}
	// The BYEs go out together; the usual one (the other party of a
	// hang-up) on this goroutine.
	var wg sync.WaitGroup
	for _, p := range byes[min(1, len(byes)):] {
		wg.Go(p.bye)
	}
	if len(byes) > 0 {
		byes[0].bye()
	}
	wg.Wait()
	if c.set.cfg.OnEnd != nil {
		c.set.cfg.OnEnd(cdr)
	}
}

// hangup handles a BYE from party p, leg leg of c (already answered with
// 200).
func (c *call) hangup(p *party, leg Leg) {
	c.mu.Lock()
	if c.xfer == p {
		// The transferor leaves while its transfer runs (RFC 5589 allows
		// it to hang up after the 202): the transferee stays.
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	by := ByCaller
	if leg == LegB {
		by = ByCallee
	}
	c.end("", by)
}

// media returns the call's Anchor (nil once the call ended).
func (c *call) media() Anchor {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.anchor
}

// startKeepalive arms the call's keep-alive: in-dialog OPTIONS to both
// parties every Config.KeepAlive; 408, 481 or no response ends the call as
// dead. It runs beside the RFC 4028 session timers (sessiontimer.go): an
// in-dialog OPTIONS (RFC 3261 §11) works with any UA, timer or not. A
// timer, not a goroutine a call (see startSession). It counts in inflight
// until it has stopped for good: stopped pending by end, or seeing the
// call ended when it fires.
func (c *call) startKeepalive() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || c.keepTimer != nil {
		return
	}
	c.b.inflight.Add(1)
	c.keepTimer = time.AfterFunc(c.set.cfg.KeepAlive, c.keepalive)
}

// keepalive is one round of probes, then the next round is armed.
func (c *call) keepalive() {
	if c.probe() {
		c.mu.Lock()
		if !c.ended {
			c.keepTimer.Reset(c.set.cfg.KeepAlive)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
	c.b.inflight.Add(-1)
}

// probe sends one OPTIONS to each party still in the call and reports
// whether the call goes on (it ends the call as dead when a party is).
func (c *call) probe() bool {
	if c.life.Err() != nil {
		return false
	}
	timeout := min(c.set.cfg.KeepAlive, 64*sip.T1)
	c.mu.Lock()
	parties := c.parties
	c.mu.Unlock()
	dead := make(chan string, len(parties))
	var wg sync.WaitGroup
	for _, p := range parties {
		if p == nil || !p.in(c) {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(c.life, timeout)
			defer cancel()
			res, err := p.do(ctx, p.newRequest(sip.OPTIONS))
			switch {
			case c.life.Err() != nil:
			case err != nil:
				dead <- p.name + ": no response"
			case res.StatusCode == 408 || res.StatusCode == 481:
				dead <- p.name + ": " + res.StartLine()
			}
		})
	}
	wg.Wait()
	select {
	case why := <-dead:
		c.b.log.Info("b2bua: dead call ended", "call", c.info.ID, "why", why)
		c.end(Dead, BySystem)
		return false
	default:
		return true // keepalive re-arms unless the call ended meanwhile
	}
}
