package b2bua

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/health"
)

var (
	errRingTimeout = errors.New("b2bua: ring timeout")
	errCallerGone  = errors.New("b2bua: caller cancelled")
	errCallerBye   = errors.New("b2bua: caller sent BYE before the answer")
	errLostRace    = errors.New("b2bua: another leg answered first")
)

// maxEventsPerLeg bounds the events one B leg sends: WaitAnswer gives up
// after 11 responses, plus the final event.
const maxEventsPerLeg = 12

// target is where one B leg goes.
type target struct {
	uri       sip.Uri // Request-URI
	user      string  // To user
	transport string  // "UDP" / "TCP"
	dest      string  // host:port to send to; "" = from the URI
	trunk     string  // the HQ target name to report outcomes for; "" = none
}

// leg is one B leg (one INVITE client transaction and its dialog).
type leg struct {
	t         target
	ctx       context.Context
	cancel    context.CancelCauseFunc
	timer     *time.Timer
	responded atomic.Bool // any response, 100 included, was received
	timedOut  atomic.Bool // AttemptTimeout fired before any response
	stopped   atomic.Bool // stop was called
	sess      *sipgo.DialogClientSession
}

// stop ends the leg while it has no final response. A CANCEL may only
// follow a response (RFC 3261 §9.1): with one seen, WaitAnswer sends the
// CANCEL now; otherwise the first response triggers it (see runLeg), and
// the attempt timer drops a target that never answers.
func (l *leg) stop() {
	l.stopped.Store(true)
	if l.responded.Load() {
		l.cancel(context.Canceled)
	}
}

type legEvent struct {
	leg    *leg
	prov   *sip.Response // a 101-199 response to relay
	won    bool          // this leg's 2xx is the call's answer
	status int           // final status; 0 = none
	res    *sip.Response // the final response, if any
	err    error
}

// call is one A leg and its B legs.
type call struct {
	b       *B2BUA
	set     *settings // the configuration this call started with
	dua     *sipgo.DialogUA
	a       *sipgo.DialogServerSession
	aReq    *sip.Request
	d       dialplan.Decision
	arrived *sip.Addr // the listener A's INVITE arrived on (for BYE to A)
	laddr   *sip.Addr // the listener B legs leave from
	contact sip.Uri
	aID     string

	// guarded by b.mu
	bID  string
	info CallInfo

	events chan legEvent
	ring   context.Context         // the ringing phase: until answer or failure
	abort  context.CancelCauseFunc // ends ring with a cause

	mu       sync.Mutex
	legs     []*leg
	winner   *leg
	stopping bool // no new winner is accepted
	bAcked   bool
	ended    bool // BYE seen or sent
}

func newCall(b *B2BUA, set *settings, dua *sipgo.DialogUA, a *sipgo.DialogServerSession, req *sip.Request,
	d dialplan.Decision, arrived, laddr *sip.Addr, contact sip.Uri) *call {
	c := &call{b: b, set: set, dua: dua, a: a, aReq: req, d: d, arrived: arrived, laddr: laddr, contact: contact, aID: a.ID}
	c.ring, c.abort = context.WithCancelCause(context.Background())
	c.info = CallInfo{To: d.Number, Target: d.Target, Route: d.Route, State: StateRouting, Started: time.Now()}
	if h := req.CallID(); h != nil {
		c.info.ID = h.Value()
	}
	if f := req.From(); f != nil {
		c.info.From = f.Address.User
	}
	return c
}

func (c *call) setState(s string) {
	c.b.mu.Lock()
	c.info.State = s
	if s == StateAnswered {
		c.info.Answered = time.Now()
	}
	c.b.mu.Unlock()
}

func (c *call) targets() ([]target, error) {
	switch c.d.Route {
	case dialplan.RouteLocal:
		var ts []target
		for _, ct := range c.b.loc.Contacts(c.d.Target) {
			var u sip.Uri
			if err := sip.ParseUri(ct.URI, &u); err != nil {
				c.b.log.Warn("b2bua: bad contact", "uri", ct.URI, "err", err)
				continue
			}
			tr := strings.ToUpper(ct.Transport)
			if tr == "" {
				tr = "UDP"
			}
			ts = append(ts, target{uri: u, user: c.d.Target, transport: tr, dest: ct.Addr})
		}
		return ts, nil
	case dialplan.RoutePSTN:
		ts := make([]target, 0, len(c.set.gateways))
		for _, g := range c.set.gateways {
			u := sip.Uri{Scheme: "sip", User: c.d.Target, Host: g.host, Port: g.port}
			ts = append(ts, target{uri: u, user: c.d.Target, transport: g.transport, dest: g.hostport})
		}
		return ts, nil
	case dialplan.RouteHQ:
		ctx, cancel := context.WithTimeout(c.ring, c.set.cfg.AttemptTimeout)
		defer cancel()
		names, err := c.set.cfg.HQ.Targets(ctx)
		if err != nil {
			return nil, fmt.Errorf("hq targets: %w", err)
		}
		ts := make([]target, 0, len(names))
		for _, n := range names {
			g, err := parseGateway(n)
			if err != nil {
				c.b.log.Warn("b2bua: bad hq target", "target", n, "err", err)
				continue
			}
			u := sip.Uri{Scheme: "sip", User: c.d.Target, Host: g.host, Port: g.port}
			ts = append(ts, target{uri: u, user: c.d.Target, transport: g.transport, dest: g.hostport, trunk: n})
		}
		return ts, nil
	}
	return nil, fmt.Errorf("route %q not supported", c.d.Route)
}

// run drives the call until the A leg has a final response and every B
// leg is finished or answered. It reports whether the call is up.
func (c *call) run() bool {
	ts, err := c.targets()
	if err != nil {
		c.b.log.Warn("b2bua: no targets", "call", c.info.ID, "route", c.d.Route, "err", err)
		_ = c.a.Respond(503, "Service Unavailable", nil)
		return false
	}
	if len(ts) == 0 {
		_ = c.a.Respond(480, "Temporarily Unavailable", nil)
		return false
	}
	sequential := c.d.Route != dialplan.RouteLocal // gateways and HQ targets: one after another

	ctx, cancel := c.ring, c.abort
	defer cancel(nil)
	ringTimer := time.AfterFunc(c.set.cfg.RingTimeout, func() { cancel(errRingTimeout) })
	defer ringTimer.Stop()
	stopWatch := context.AfterFunc(c.a.Context(), func() { cancel(errCallerGone) })
	defer stopWatch()

	c.events = make(chan legEvent, len(ts)*maxEventsPerLeg)
	pending, next := 0, 0
	start := func() {
		l := c.newLeg(ts[next])
		next++
		pending++
		go c.runLeg(l)
	}
	if sequential {
		start()
	} else {
		for next < len(ts) {
			start()
		}
	}

	final, up := false, false
	var best *legEvent
	done := ctx.Done()
	for pending > 0 {
		select {
		case ev := <-c.events:
			if ev.prov != nil {
				if !final {
					c.relayProvisional(ev.prov)
				}
				continue
			}
			pending--
			if t := ev.leg.t.trunk; t != "" {
				status := ev.status
				if ev.won {
					status = 200
				}
				c.set.cfg.HQ.Report(t, status, ev.err)
			}
			if ev.won {
				final = true
				ringTimer.Stop()
				c.stopLegs(ev.leg)
				up = c.answer(ev.leg)
				continue
			}
			if final {
				continue
			}
			c.b.log.Debug("b2bua: leg failed", "call", c.info.ID, "target", ev.leg.t.uri.String(), "status", ev.status, "err", ev.err)
			if sequential || best == nil || rank(ev.status) > rank(best.status) {
				e := ev
				best = &e
			}
			if ev.status >= 600 {
				final = true
				c.stopLegs(nil)
				c.respondFinal(best)
				continue
			}
			if sequential && next < len(ts) && ctx.Err() == nil && health.Retryable(ev.status, ev.err) {
				start()
			}
		case <-done:
			done = nil
			if final {
				continue
			}
			final = true
			c.stopLegs(nil)
			switch context.Cause(ctx) {
			case errRingTimeout:
				_ = c.a.Respond(480, "Temporarily Unavailable", nil)
			case errCallerBye:
				_ = c.a.Respond(487, "Request Terminated", nil)
			}
			// errCallerGone: sipgo already answered the CANCEL and the INVITE (487).
		}
	}
	if !final {
		c.respondFinal(best)
	}
	return up
}

func (c *call) newLeg(t target) *leg {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &leg{t: t, ctx: ctx, cancel: cancel}
	l.timer = time.AfterFunc(c.set.cfg.AttemptTimeout, func() {
		if !l.responded.Load() {
			l.timedOut.Store(true)
			l.cancel(sipgo.WaitAnswerForceCancelErr)
		}
	})
	c.mu.Lock()
	c.legs = append(c.legs, l)
	c.mu.Unlock()
	return l
}

// stopLegs stops every B leg but keep (nil = all) and refuses later winners.
func (c *call) stopLegs(keep *leg) {
	c.mu.Lock()
	c.stopping = true
	legs := c.legs
	c.mu.Unlock()
	for _, l := range legs {
		if l != keep {
			l.stop()
		}
	}
}

// claim makes l the winner unless the call already has one or gave up.
func (c *call) claim(l *leg) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.winner != nil || c.stopping {
		return false
	}
	c.winner = l
	return true
}

// runLeg sends one B-leg INVITE and reports to c.events: any provisional
// responses, then exactly one final event.
func (c *call) runLeg(l *leg) {
	ev := legEvent{leg: l}
	defer func() {
		l.timer.Stop()
		l.cancel(nil)
		c.events <- ev
	}()
	sess, err := c.dua.WriteInvite(l.ctx, c.legRequest(l.t))
	if err != nil {
		ev.err = err
		return
	}
	l.sess = sess
	err = sess.WaitAnswer(l.ctx, sipgo.AnswerOptions{OnResponse: func(r *sip.Response) error {
		// Store responded before loading stopped (stop does the reverse):
		// one side or both see the other, so a stopped leg is cancelled.
		l.responded.Store(true)
		if l.stopped.Load() {
			l.cancel(context.Canceled)
		}
		if r.IsProvisional() && r.StatusCode > 100 {
			c.events <- legEvent{leg: l, prov: r}
		}
		return nil
	}})
	switch {
	case err == nil:
		if c.claim(l) {
			ev.won, ev.status, ev.res = true, sess.InviteResponse.StatusCode, sess.InviteResponse
			return
		}
		ev.err = errLostRace // status stays 0: this is not an answer for the caller
		c.discard(l)
	case errorStatus(err) != 0:
		var de *sipgo.ErrDialogResponse
		errors.As(err, &de)
		ev.status, ev.res, ev.err = de.Res.StatusCode, de.Res, err
	case sess.InviteResponse != nil && sess.InviteResponse.IsSuccess():
		// The 2xx crossed our CANCEL: the dialog exists, end it.
		ev.err = err
		c.discard(l)
	case l.timedOut.Load():
		ev.err = fmt.Errorf("b2bua: no response from %s within %v: %w", l.t.uri.String(), c.set.cfg.AttemptTimeout, context.DeadlineExceeded)
	default:
		ev.err = err
	}
}

// discard ACKs and BYEs a B leg that answered but is not wanted.
func (c *call) discard(l *leg) {
	ctx, cancel := withTimeout(byeTimeout)
	defer cancel()
	if err := l.sess.Ack(ctx); err != nil {
		c.b.log.Debug("b2bua: ack of unwanted leg", "err", err)
	}
	if err := l.sess.WriteBye(ctx, c.byeToB(l)); err != nil {
		c.b.log.Debug("b2bua: bye of unwanted leg", "err", err)
	}
}

func (c *call) legRequest(t target) *sip.Request {
	req := sip.NewRequest(sip.INVITE, t.uri)
	req.SetTransport(t.transport)
	if t.dest != "" {
		req.SetDestination(t.dest)
	}
	c.setLaddr(req, t.transport, c.laddr)

	af := c.aReq.From()
	from := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", Host: c.contact.Host}}
	if af != nil {
		from.DisplayName = af.DisplayName
		from.Address.User = af.Address.User
	}
	from.Params.Add("tag", sip.GenerateTagN(16))
	to := &sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: t.user, Host: t.uri.Host}}
	callID := sip.CallIDHeader(sip.GenerateTagN(32))
	cseq := &sip.CSeqHeader{SeqNo: 1, MethodName: sip.INVITE}
	mf := sip.MaxForwardsHeader(70)
	if h := c.aReq.MaxForwards(); h != nil {
		mf = sip.MaxForwardsHeader(h.Val() - 1)
	}
	contact := &sip.ContactHeader{Address: c.contact}
	req.AppendHeader(from)
	req.AppendHeader(to)
	req.AppendHeader(&callID)
	req.AppendHeader(cseq)
	req.AppendHeader(&mf)
	req.AppendHeader(contact)
	if h := c.aReq.ContentType(); h != nil {
		ct := sip.ContentTypeHeader(h.Value())
		req.AppendHeader(&ct)
	}
	if body := c.aReq.Body(); len(body) > 0 {
		req.SetBody(append([]byte(nil), body...))
	}
	return req
}

// setLaddr pins a UDP request to the listener at a (sipgo otherwise picks
// a socket by peer, or opens an ephemeral one).
func (c *call) setLaddr(req *sip.Request, transport string, a *sip.Addr) {
	if a == nil || !strings.EqualFold(transport, "UDP") {
		return
	}
	req.Laddr = sip.Addr{IP: append(net.IP(nil), a.IP...), Port: a.Port}
}

func contentType(res *sip.Response) []sip.Header {
	if h := res.ContentType(); h != nil && len(res.Body()) > 0 {
		ct := sip.ContentTypeHeader(h.Value())
		return []sip.Header{&ct}
	}
	return nil
}

func (c *call) relayProvisional(r *sip.Response) {
	if err := c.a.Respond(r.StatusCode, r.Reason, r.Body(), contentType(r)...); err != nil {
		c.b.log.Debug("b2bua: relay provisional", "call", c.info.ID, "err", err)
		return
	}
	c.setState(StateRinging)
}

// respondFinal answers the A leg after every B leg failed.
func (c *call) respondFinal(best *legEvent) {
	switch {
	case best != nil && best.status >= 300 && best.status < 400:
		// Redirects are not followed yet, and relaying one with our own
		// Contact would point the caller back at us.
		_ = c.a.Respond(480, "Temporarily Unavailable", nil)
	case best != nil && best.res != nil:
		_ = c.a.Respond(best.res.StatusCode, best.res.Reason, nil)
	case best != nil && best.status >= 300:
		_ = c.a.Respond(best.status, "", nil)
	case c.d.Route == dialplan.RoutePSTN:
		_ = c.a.Respond(503, "Service Unavailable", nil)
	default:
		_ = c.a.Respond(480, "Temporarily Unavailable", nil)
	}
}

// rank orders failed legs for the A leg's answer: busy first, then other
// definite answers, then unavailability, server errors and no answer.
func rank(status int) int {
	switch {
	case status >= 600:
		return 7
	case status == 486:
		return 6
	case status == 480:
		return 4
	case status == 408:
		return 2
	case status >= 400 && status < 500:
		return 5
	case status >= 300 && status < 400:
		return 4 // answered as 480
	case status >= 500:
		return 3
	}
	return 1
}

// answer sends the winner's 2xx to the A leg and waits for A's ACK (which
// OnAck forwards to the B leg). It reports whether the call is up.
func (c *call) answer(l *leg) bool {
	res := l.sess.InviteResponse
	c.b.mu.Lock()
	c.bID = l.sess.ID
	c.b.bCalls[c.bID] = c
	c.info.State = StateAnswered
	c.info.Answered = time.Now()
	c.b.mu.Unlock()
	err := c.a.Respond(res.StatusCode, res.Reason, res.Body(), contentType(res)...)
	if err == nil {
		return true
	}
	c.b.log.Info("b2bua: caller did not confirm the answer", "call", c.info.ID, "err", err)
	c.mu.Lock()
	c.ended = true
	c.ackB()
	c.mu.Unlock()
	c.b.remove(c)
	ctx, cancel := withTimeout(byeTimeout)
	defer cancel()
	_ = l.sess.WriteBye(ctx, c.byeToB(l))
	_ = c.a.WriteBye(ctx, c.byeToA())
	return false
}

// ackB sends the ACK for the winner's 2xx once. c.mu is held.
func (c *call) ackB() {
	if c.bAcked || c.winner == nil || c.winner.sess == nil {
		return
	}
	c.bAcked = true
	if err := c.winner.sess.Ack(context.Background()); err != nil {
		c.b.log.Warn("b2bua: ack to callee", "call", c.info.ID, "err", err)
	}
}

func (c *call) onAck(req *sip.Request, tx sip.ServerTransaction) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.a.ReadAck(req, tx); err != nil {
		c.b.log.Debug("b2bua: ack", "call", c.info.ID, "err", err)
		return
	}
	c.ackB()
}

func (c *call) onBye(req *sip.Request, tx sip.ServerTransaction, fromA bool) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		respond(tx, req, 200, "OK")
		return
	}
	w := c.winner
	if w == nil {
		// BYE on the early dialog (RFC 3261 §15): end the ringing phase;
		// run answers the INVITE with 487 and removes the call.
		c.mu.Unlock()
		c.abort(errCallerBye)
		respond(tx, req, 200, "OK")
		return
	}
	c.ended = true
	c.ackB() // a BYE before the ACK still needs the B leg confirmed
	c.mu.Unlock()
	c.b.remove(c)

	ctx, cancel := withTimeout(byeTimeout)
	defer cancel()
	if fromA {
		if err := c.a.ReadBye(req, tx); err != nil {
			respond(tx, req, 200, "OK")
		}
		if err := w.sess.WriteBye(ctx, c.byeToB(w)); err != nil {
			c.b.log.Info("b2bua: bye to callee", "call", c.info.ID, "err", err)
		}
		return
	}
	if err := w.sess.ReadBye(req, tx); err != nil {
		respond(tx, req, 200, "OK")
	}
	if err := c.a.WriteBye(ctx, c.byeToA()); err != nil {
		c.b.log.Info("b2bua: bye to caller", "call", c.info.ID, "err", err)
	}
}

// byeToB builds a BYE for a B leg that leaves from the B legs' listener
// (DialogClientSession.Bye would not set Laddr).
func (c *call) byeToB(l *leg) *sip.Request {
	recipient := l.sess.InviteRequest.Recipient
	if res := l.sess.InviteResponse; res != nil {
		if ct := res.Contact(); ct != nil {
			recipient = ct.Address
		}
	}
	bye := sip.NewRequest(sip.BYE, *recipient.Clone())
	bye.SetTransport(l.t.transport)
	c.setLaddr(bye, l.t.transport, c.laddr)
	return bye
}

// byeToA builds a BYE for the A leg that leaves from the listener A's
// INVITE arrived on.
func (c *call) byeToA() *sip.Request {
	recipient := c.aReq.Recipient
	if ct := c.aReq.Contact(); ct != nil {
		recipient = ct.Address
	}
	bye := sip.NewRequest(sip.BYE, *recipient.Clone())
	tr := c.aReq.Transport()
	bye.SetTransport(tr)
	c.setLaddr(bye, tr, c.arrived)
	return bye
}
