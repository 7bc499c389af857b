package b2bua

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/siptarget"
)

var (
	errRingTimeout = errors.New("b2bua: ring timeout")
	errNoAnswer    = errors.New("b2bua: no answer, forwarding to voicemail")
	errCallerGone  = errors.New("b2bua: caller cancelled")
	errCallerBye   = errors.New("b2bua: caller sent BYE before the answer")
	errLostRace    = errors.New("b2bua: another leg answered first")
	errFlowFailed  = errors.New("b2bua: the contact's outbound flow is gone")
)

// eventBurst sizes the event buffer beyond one final event per first
// target. A leg may send any number of provisional responses
// (waitAnswer); the dial loop reads them while the legs ring, a collector
// reads the stopped legs' finals after the outcome, and a stopped leg's
// provisionals are dropped (runLeg): a full buffer only makes a leg's
// goroutine wait for the reader, so it only absorbs bursts. (It was sized
// for every leg a phase may ever have, 204 events, 11 KiB a call: a fifth
// of all the memory a call allocated, bench/RESULTS.md issue 16 item 1.)
const eventBurst = 8

// errProvisionalBatch ends one sipgo WaitAnswer call of waitAnswer.
var errProvisionalBatch = errors.New("b2bua: provisional batch")

// provisionalBatch is how many provisional responses one WaitAnswer call
// takes: sipgo's gives up after 11 responses of any kind.
const provisionalBatch = 8

// waitAnswer is sess.WaitAnswer for any number of provisional responses
// (RFC 3261 §13.2.2.1 sets no limit; an HQ ring group forking to many
// phones sends a 180 or 183 per phone). sipgo's WaitAnswer returns an
// error after 11 responses, without a CANCEL, and a later 2xx would then
// never be ACKed. Its count is per call, so the wait goes on in a new
// call after each batch; the transaction, its CANCEL on ctx's end and the
// session's last response are the session's throughout. onResp sees
// every response (it may be nil).
func waitAnswer(ctx context.Context, sess *sipgo.DialogClientSession, onResp func(*sip.Response)) error {
	for {
		n := 0
		err := sess.WaitAnswer(ctx, sipgo.AnswerOptions{OnResponse: func(res *sip.Response) error {
			if onResp != nil {
				onResp(res)
			}
			if res.IsProvisional() {
				if n++; n >= provisionalBatch {
					return errProvisionalBatch
				}
			}
			return nil
		}})
		if !errors.Is(err, errProvisionalBatch) {
			return err
		}
	}
}

// target is where one B leg goes.
type target struct {
	uri       sip.Uri // Request-URI
	user      string  // To user
	transport string  // "UDP" / "TCP"
	dest      string  // host:port to send to; "" = from the URI
	trunk     string  // the HQ target name to report outcomes for; "" = none
	gateway   string  // the PSTN gateway to report outcomes for (Config.PSTNHealth); "" = none
	hops      int     // redirects (3xx) followed to reach this target
	// failover is the route's failover limits (a redirect's targets
	// inherit them); nil = health.Retryable, Config.AttemptTimeout.
	failover *Failover
	contact  bool // a registered contact (named by its URI in CDRs)
	// viaHQ: an HQ target, or reached by redirects from one; only such a
	// redirect is followed over TLS (the box's TLS client trust is HQ's).
	viaHQ  bool
	signed bool // another registrar pool member: Config.SignPool signs the INVITE
	// laddr is the UDP listener the leg leaves from: a contact's
	// registration listener (Contact.Local), else the one facing dest
	// (Config.LocalFor); nil = the call's default (Config.LocalAddr or the
	// A leg's listener).
	laddr *sip.Addr
	// stream: laddr is the TCP or TLS listener a contact registered on,
	// which our Contact names with its transport (streamContact).
	stream bool
	// flowFailed: an RFC 5626 outbound contact whose flow is gone: the
	// leg fails with 430 without an INVITE (Contact.FlowFailed).
	flowFailed bool
	// delay holds a forked leg back after the others started (a boss's
	// delegates); such targets come last, all with the same delay.
	delay time.Duration
}

// retryable is the route's retry rule for an attempt at t.
func (t target) retryable(status int, err error) bool {
	if t.failover == nil {
		return health.Retryable(status, err)
	}
	return t.failover.retryable(status, err)
}

// name is the target as a CDR names it.
func (t target) name() string {
	if t.contact || t.dest == "" {
		return t.uri.String()
	}
	return strings.ToLower(t.transport) + ":" + t.dest
}

// leg is one B leg (one INVITE client transaction and its dialog).
type leg struct {
	t         target
	ctx       context.Context
	cancel    context.CancelCauseFunc
	timer     *time.Timer
	responded atomic.Bool // any response, 100 included, was received
	stopped   atomic.Bool // stop was called
	// settled: the leg's final event is sent (by runLeg, or by the attempt
	// timer for a silent target, which then lingers for a late answer).
	settled atomic.Bool
	sess    *sipgo.DialogClientSession
	rel     reliableState // RFC 3262 (prack.go)
}

// localAddr is the listener the leg's requests leave from.
func (l *leg) localAddr(def *sip.Addr) *sip.Addr {
	if l.t.laddr != nil {
		return l.t.laddr
	}
	return def
}

// contact is our Contact URI in the leg's dialog.
func (l *leg) contact(def sip.Uri) sip.Uri {
	if a := l.t.laddr; a != nil {
		return l.t.contactAt(a)
	}
	return def
}

// contactAt is our Contact at listener a on the leg to t: over TCP or TLS
// to the listener a contact registered on, with its transport (and sips:
// for a sips: contact, RFC 3261 §8.1.1.8), so the phone's requests in the
// dialog come back over it.
func (t target) contactAt(a *sip.Addr) sip.Uri {
	u := sip.Uri{Scheme: "sip", Host: a.IP.String(), Port: a.Port}
	if t.stream {
		u = streamContact(u, t.transport, t.uri.Scheme)
	}
	return u
}

// streamContact adds transport tcp or tls to u (sips: instead when
// scheme is sips).
func streamContact(u sip.Uri, transport, scheme string) sip.Uri {
	switch tr := strings.ToLower(transport); {
	case tr == "tls" && strings.EqualFold(scheme, "sips"):
		u.Scheme = "sips"
	case tr == "tcp" || tr == "tls":
		u.UriParams = sip.NewParams()
		u.UriParams.Add("transport", tr)
	}
	return u
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

// dialSpec is one ringing phase: where to call and with what.
type dialSpec struct {
	d       dialplan.Decision
	targets []target
	body    []byte // the offer (already through the Anchor)
	ctype   string
	from    sip.FromHeader // caller identity; the tag is made per leg
	maxFwd  uint32
	headers []sip.Header // extra headers on every INVITE
	timeout time.Duration
	// cause is the context cause when timeout fires (errRingTimeout, or
	// errNoAnswer when voicemail takes over).
	cause   error
	laddr   *sip.Addr
	contact sip.Uri
	// onProv relays a provisional response (may be nil); onAnswer takes
	// the winning leg (its 2xx not yet ACKed) and reports whether the
	// call is up.
	onProv   func(*sip.Response)
	onAnswer func(*leg) bool
}

// dialResult is how a ringing phase ended.
type dialResult struct {
	answered bool      // a leg won and onAnswer ran
	up       bool      // onAnswer's result
	best     *legEvent // the failure to report when nobody answered
	cause    error     // the context cause when the phase was cut short (nil: every target failed)
	last     target    // the target that answered, or the last one tried
	tried    bool      // last is set
}

// ringer runs one dialSpec.
type ringer struct {
	b    *B2BUA
	set  *Settings
	spec dialSpec
	dua  *sipgo.DialogUA

	events chan legEvent

	mu       sync.Mutex
	legs     []*leg
	winner   *leg
	stopping bool // no new winner is accepted
}

// targets lists where a decision goes: the live contacts (local), the
// PSTN gateways or the HQ targets, in the order to try.
func (b *B2BUA) targets(ctx context.Context, set *Settings, d dialplan.Decision) ([]target, error) {
	ts, err := b.targetsOf(ctx, set, d)
	for i := range ts {
		if t := &ts[i]; t.dest != "" && t.laddr == nil {
			set.face(t)
		}
	}
	return ts, err
}

// face sets the listener a leg to t leaves from: the TCP or TLS listener
// facing t.dest (StreamFor), else the UDP one (LocalFor).
func (set *Settings) face(t *target) {
	if f := set.cfg.StreamFor; f != nil && !strings.EqualFold(t.transport, "UDP") {
		if a := f(t.transport, t.dest); a != nil {
			t.laddr, t.stream = a, true
			return
		}
	}
	if f := set.cfg.LocalFor; f != nil {
		t.laddr = f(t.dest)
	}
}

func (b *B2BUA) targetsOf(ctx context.Context, set *Settings, d dialplan.Decision) ([]target, error) {
	switch d.Route {
	case dialplan.RouteLocal:
		var ts []target
		for _, ct := range b.loc.Contacts(d.Target) {
			var u sip.Uri
			if err := sip.ParseUri(ct.URI, &u); err != nil {
				b.log.Warn("b2bua: bad contact", "uri", ct.URI, "err", err)
				continue
			}
			tr := strings.ToUpper(ct.Transport)
			if tr == "" {
				tr = "UDP"
			}
			t := target{uri: u, user: d.Target, transport: tr, dest: ct.Addr, contact: true, flowFailed: ct.FlowFailed}
			if ct.Local != "" {
				// The listener the phone registered to (its NAT binding).
				// Over TCP or TLS the INVITE goes on the connection it
				// registered on (sipgo's pool holds it by the phone's
				// address, ct.Addr): laddr only names the listener in
				// our Contact.
				if a, err := parseIPAddr(ct.Local); err == nil {
					t.laddr = &a
					t.stream = tr == "TCP" || tr == "TLS"
				}
			}
			ts = append(ts, t)
		}
		if pl, ok := b.loc.(PoolLocator); ok && len(ts) == 0 && d.Rule != RuleFromPool {
			for _, ct := range pl.PoolContacts(d.Target) {
				var u sip.Uri
				if err := sip.ParseUri(ct.URI, &u); err != nil {
					continue
				}
				ts = append(ts, target{uri: u, user: d.Target, transport: cmp.Or(strings.ToUpper(ct.Transport), "UDP"), dest: ct.Addr, signed: true})
			}
		}
		return ts, nil
	case dialplan.RoutePSTN:
		if len(set.gateways) == 0 {
			return nil, errors.New("no PSTN gateway configured")
		}
		gws := set.gateways
		if tr := set.cfg.PSTNHealth; tr != nil {
			// Eligible gateways in order; if none is, one at random.
			names := make([]string, len(gws))
			for i, g := range gws {
				names[i] = g.String()
			}
			picked := tr.Pick(names)
			gws = make([]siptarget.Target, 0, len(picked))
			for _, n := range picked {
				gws = append(gws, set.gateways[slices.Index(names, n)])
			}
		}
		ts := make([]target, 0, len(gws))
		for _, g := range gws {
			u := sip.Uri{Scheme: "sip", User: d.Target, Host: g.Host, Port: int(g.Port)}
			ts = append(ts, target{uri: u, user: d.Target, transport: g.Transport.SIPName(), dest: g.HostPort(), gateway: g.String()})
		}
		return set.cfg.PSTNFailover.limit(ts), nil
	case dialplan.RouteHQ:
		if set.cfg.HQ == nil {
			return nil, errors.New("no HQ trunk configured")
		}
		ctx, cancel := context.WithTimeout(ctx, set.cfg.AttemptTimeout)
		defer cancel()
		names, err := set.cfg.HQ.Targets(ctx)
		if err != nil {
			return nil, fmt.Errorf("hq targets: %w", err)
		}
		ts := make([]target, 0, len(names))
		for _, n := range names {
			g, err := siptarget.Parse(n, siptarget.UDP)
			if err != nil {
				b.log.Warn("b2bua: bad hq target", "target", n, "err", err)
				continue
			}
			u := sip.Uri{Scheme: "sip", User: d.Target, Host: g.Host, Port: int(g.Port)}
			if rh, ok := set.cfg.HQ.(RequestHoster); ok {
				if h := rh.RequestHost(n); h != "" {
					u = sip.Uri{Scheme: "sip", User: d.Target, Host: h} // the target is only the next hop
				}
			}
			ts = append(ts, target{uri: u, user: d.Target, transport: g.Transport.SIPName(), dest: g.HostPort(), trunk: n, viaHQ: true})
		}
		bp, ok := set.cfg.HQ.(BackupPool)
		if !ok || set.cfg.HQBackupFailover == nil {
			return set.cfg.HQFailover.limit(ts), nil
		}
		var primary, backup []target
		for _, t := range ts {
			if bp.Backup(t.trunk) {
				backup = append(backup, t)
			} else {
				primary = append(primary, t)
			}
		}
		// Each pool's limits; the Trunk's order between the pools kept.
		keep := map[string]bool{}
		for _, t := range set.cfg.HQFailover.limit(primary) {
			keep[t.trunk] = true
		}
		for _, t := range set.cfg.HQBackupFailover.limit(backup) {
			keep[t.trunk] = true
		}
		fo := map[bool]*Failover{false: &set.cfg.HQFailover, true: set.cfg.HQBackupFailover}
		out := ts[:0]
		for _, t := range ts {
			if keep[t.trunk] {
				t.failover = fo[bp.Backup(t.trunk)]
				out = append(out, t)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("route %q not supported", d.Route)
}

// dial rings spec.targets until one answers, every one failed, or ctx
// ends. Local contacts ring at once (forking: the first 2xx wins, the
// others are CANCELled); gateways and HQ targets are tried one after
// another while health.Retryable allows. It returns when every leg has
// reported its end (the winner's onAnswer included).
func (b *B2BUA) dial(ctx context.Context, set *Settings, spec dialSpec) dialResult {
	r := &ringer{b: b, set: set, spec: spec,
		dua: &sipgo.DialogUA{Client: b.client, ContactHDR: sip.ContactHeader{Address: spec.contact}, RewriteContact: true}}
	ts := spec.targets
	var res dialResult
	if len(ts) == 0 {
		return res
	}
	sequential := spec.d.Route != dialplan.RouteLocal

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cause := spec.cause
	if cause == nil {
		cause = errRingTimeout
	}
	ringTimer := time.AfterFunc(spec.timeout, func() { cancel(cause) })
	defer ringTimer.Stop()

	r.events = make(chan legEvent, len(ts)+eventBurst)
	seen := make(map[string]bool, len(ts))
	for _, t := range ts {
		seen[t.key()] = true
	}
	redirected := 0 // redirect targets added so far
	pending, next := 0, 0
	start := func() {
		l := r.newLeg(ts[next])
		res.last, res.tried = ts[next], true
		next++
		pending++
		b.inflight.Add(1) // runLeg may outlive dial (a silent target lingers)
		go r.runLeg(l)
	}
	var held <-chan time.Time // the delayed targets' start
	var hold *time.Timer
	defer func() {
		if hold != nil {
			hold.Stop()
		}
	}()
	startRest := func() {
		held = nil
		for next < len(ts) {
			start()
		}
	}
	startForks := func() {
		for next < len(ts) && ts[next].delay == 0 {
			start()
		}
		if next < len(ts) && pending > 0 {
			hold = time.NewTimer(ts[next].delay)
			held = hold.C
			return
		}
		startRest() // nothing else rings: no reason to wait
	}
	if sequential {
		start()
	} else {
		startForks()
	}

	decided := false
	for pending > 0 && !decided {
		select {
		case <-held:
			startRest()
		case ev := <-r.events:
			if ev.prov != nil {
				if spec.onProv != nil {
					spec.onProv(ev.prov)
				}
				continue
			}
			pending--
			r.report(ev)
			if ev.won {
				decided = true
				ringTimer.Stop()
				r.stopLegs(ev.leg)
				res.answered, res.last = true, ev.leg.t
				res.up = spec.onAnswer(ev.leg)
				continue
			}
			if more := r.redirect(ev, seen, maxRedirectTargets-redirected); len(more) > 0 && ctx.Err() == nil {
				// Try the Contacts of a 3xx next, in their q order; a
				// followed redirect is not an answer for the caller.
				b.log.Debug("b2bua: following redirect", "target", ev.leg.t.name(), "status", ev.status, "contacts", len(more))
				redirected += len(more)
				ts = slices.Insert(ts, next, more...)
				start()
				continue
			}
			b.log.Debug("b2bua: leg failed", "target", ev.leg.t.uri.String(), "status", ev.status, "err", ev.err)
			if sequential || res.best == nil || rank(ev.status) > rank(res.best.status) {
				e := ev
				res.best = &e
				if !sequential {
					res.last = ev.leg.t
				}
			}
			if ev.status >= 600 {
				decided = true
				r.stopLegs(nil)
				continue
			}
			// Gateways, HQ targets and the targets of a redirect are tried
			// one after another by the retry rule.
			if (sequential || ev.leg.t.hops > 0) && next < len(ts) && ctx.Err() == nil && ev.leg.t.retryable(ev.status, ev.err) {
				start()
			}
			if pending == 0 && held != nil && ctx.Err() == nil {
				startRest() // the others failed before the delay was up
			}
		case <-ctx.Done():
			decided = true
			res.cause = context.Cause(ctx)
			r.stopLegs(nil)
		}
	}
	if pending > 0 {
		// The outcome is known; the stopped legs still owe their last
		// event (a CANCEL waits for its 487). Collect them without making
		// the caller wait; inflight keeps tests honest about it.
		b.inflight.Add(1)
		go func() {
			defer b.inflight.Add(-1)
			for pending > 0 {
				if ev := <-r.events; ev.prov == nil {
					pending--
					r.report(ev)
				}
			}
		}()
	}
	return res
}

// Redirects (RFC 3261 §8.1.3.4): a 300, 301 or 302 names new targets in
// its Contacts, a 305 the proxy to send the same request through. They are tried next, highest q first, one after another by the
// retry rule, at most maxRedirects hops deep and at most
// maxRedirectTargets per ringing phase; a target already tried in the
// phase is not tried again, so a loop (A → B → A) ends with the last 3xx
// as the failure (answered 480).
const (
	maxRedirects       = 5
	maxRedirectTargets = 16
)

// key identifies a target for loop detection: where the INVITE goes and
// for whom.
func (t target) key() string {
	dest := t.dest
	if dest == "" {
		dest = t.uri.HostPort()
	}
	return strings.ToUpper(t.transport) + ":" + strings.ToLower(dest) + "/" + t.uri.User
}

// redirect lists the new targets a leg's 300, 301, 302 or 305 names (at
// most limit, highest q first), marking them seen; nil when the event is
// not a redirect to follow. A 300's choices are tried like a 302's: the
// box cannot ask its caller to choose.
func (r *ringer) redirect(ev legEvent, seen map[string]bool, limit int) []target {
	switch ev.status {
	case 300, 301, 302, 305:
	default:
		return nil
	}
	if ev.res == nil || ev.leg.t.hops >= maxRedirects || limit <= 0 {
		return nil
	}
	type cand struct {
		t target
		q float64
	}
	var cs []cand
	for _, h := range headersNamed(ev.res, "Contact") {
		ch, ok := h.(*sip.ContactHeader)
		if !ok {
			continue
		}
		t, ok := r.redirectTarget(ev.leg.t, ch.Address)
		if ok && ev.status == 305 {
			// Use Proxy (RFC 3261 §21.3.5): the same request, sent
			// through the proxy the Contact names.
			t.uri, t.user = ev.leg.t.uri, ev.leg.t.user
		}
		if !ok || seen[t.key()] {
			continue
		}
		q := 1.0
		if v, ok := ch.Params.Get("q"); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f <= 1 {
				q = f
			}
		}
		seen[t.key()] = true
		cs = append(cs, cand{t, q})
	}
	// RFC 3261 §8.1.3.4 / §16.6: highest q first; equal q in the order given.
	slices.SortStableFunc(cs, func(a, b cand) int { return cmp.Compare(b.q, a.q) })
	var out []target
	for _, c := range cs[:min(len(cs), limit)] {
		out = append(out, c.t)
	}
	return out
}

// redirectTarget is the target a redirect Contact u names, reached from
// the redirecting target from; ok is false for what cannot be called (a
// tel: URI, no host, TLS from a target that is not HQ's or without a
// TLSRedirector). A TLS target's dest stays the Contact's "host:port"
// until runLeg connects to it.
func (r *ringer) redirectTarget(from target, u sip.Uri) (target, bool) {
	sips := strings.EqualFold(u.Scheme, "sips")
	if !sips && !strings.EqualFold(u.Scheme, "sip") || u.Host == "" || u.Wildcard {
		return target{}, false
	}
	tr := "UDP"
	if v, ok := u.UriParams.Get("transport"); ok {
		tr = strings.ToUpper(v)
	}
	if sips {
		tr = "TLS" // RFC 3261 §26.2.2 (transport=tcp in a sips: URI means TLS too)
	}
	switch tr {
	case "UDP", "TCP":
	case "TLS":
		if _, ok := r.set.cfg.HQ.(TLSRedirector); !ok || !from.viaHQ {
			return target{}, false
		}
	default:
		return target{}, false
	}
	port := u.Port
	if port == 0 {
		port = 5060
		if tr == "TLS" {
			port = 5061
		}
	}
	uri := sip.Uri{Scheme: strings.ToLower(u.Scheme), User: u.User, Host: u.Host, Port: u.Port, UriParams: u.UriParams}
	user := u.User
	if user == "" {
		user = from.user
	}
	t := target{uri: uri, user: user, transport: tr, dest: net.JoinHostPort(u.Host, strconv.Itoa(port)), hops: from.hops + 1,
		failover: from.failover, viaHQ: from.viaHQ}
	r.set.face(&t)
	return t, true
}

// report feeds a finished HQ or PSTN gateway attempt back to its health
// (passive health).
func (r *ringer) report(ev legEvent) {
	status := ev.status
	if ev.won {
		status = 200
	}
	if t := ev.leg.t.trunk; t != "" {
		r.set.cfg.HQ.Report(t, status, ev.err)
	}
	if g, tr := ev.leg.t.gateway, r.set.cfg.PSTNHealth; g != "" && tr != nil {
		o := health.ClassifyAttempt(status, ev.err)
		if f := ev.leg.t.failover; f != nil && f.retries(status) {
			o = health.Failure
		}
		tr.Observe(g, o)
	}
}

func (r *ringer) newLeg(t target) *leg {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &leg{t: t, ctx: ctx, cancel: cancel}
	timeout := t.failover.attemptTimeout(r.set.cfg.AttemptTimeout)
	l.timer = time.AfterFunc(timeout, func() {
		// Silent for AttemptTimeout (not even 100 Trying): the leg fails
		// now, so the next target is tried, but its transaction lingers
		// for another AttemptTimeout: a late first response still gets
		// its CANCEL (after a provisional) or ACK and BYE (a 2xx), instead
		// of meeting a terminated transaction and going unanswered.
		if l.responded.Load() || !l.settled.CompareAndSwap(false, true) {
			return
		}
		r.events <- legEvent{leg: l, err: fmt.Errorf("b2bua: no response from %s within %v: %w", t.uri.String(), timeout, context.DeadlineExceeded)}
		l.stop()
		time.AfterFunc(timeout, func() {
			if !l.responded.Load() {
				l.cancel(sipgo.WaitAnswerForceCancelErr) // no CANCEL before a response (RFC 3261 §9.1)
			}
		})
	})
	r.mu.Lock()
	r.legs = append(r.legs, l)
	r.mu.Unlock()
	return l
}

// stopLegs stops every B leg but keep (nil = all) and refuses later winners.
func (r *ringer) stopLegs(keep *leg) {
	r.mu.Lock()
	r.stopping = true
	legs := r.legs
	r.mu.Unlock()
	for _, l := range legs {
		if l != keep {
			l.stop()
		}
	}
}

// claim makes l the winner unless the phase already has one or gave up.
func (r *ringer) claim(l *leg) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.winner != nil || r.stopping {
		return false
	}
	r.winner = l
	return true
}

// runLeg sends one B-leg INVITE and reports to r.events: any provisional
// responses, then exactly one final event.
func (r *ringer) runLeg(l *leg) {
	defer r.b.inflight.Add(-1)
	ev := legEvent{leg: l}
	send := false // the final event is this goroutine's to send
	defer func() {
		l.timer.Stop()
		l.cancel(nil)
		if send {
			r.events <- ev
		}
	}()
	if l.t.flowFailed {
		ev.status, ev.err = 430, errFlowFailed
		send = l.settled.CompareAndSwap(false, true)
		return
	}
	var sess *sipgo.DialogClientSession
	var err error
	t := l.t // the target as requests address it
	if c, ok := r.set.cfg.HQ.(Connector); ok && t.trunk != "" {
		if err := c.Connect(l.ctx, t.trunk); err != nil {
			ev.err = err
			send = l.settled.CompareAndSwap(false, true)
			return
		}
	}
	if c, ok := r.set.cfg.HQ.(TLSRedirector); ok && t.trunk == "" && t.viaHQ && t.transport == "TLS" {
		if t.dest, err = c.ConnectRedirect(l.ctx, t.dest); err != nil {
			ev.err = err
			send = l.settled.CompareAndSwap(false, true)
			return
		}
	}
	minSE := 0 // the Min-SE a 422 asked for (RFC 4028 §7.4); 0 = none
	for attempt := 0; ; attempt++ {
		req := r.legRequest(t)
		if minSE > 0 {
			v := strconv.Itoa(minSE)
			req.RemoveHeader("Session-Expires")
			req.RemoveHeader("Min-SE")
			req.AppendHeader(sip.NewHeader("Session-Expires", v))
			req.AppendHeader(sip.NewHeader("Min-SE", v))
		}
		sess, err = r.dua.WriteInvite(l.ctx, req)
		if err != nil {
			ev.err = err
			send = l.settled.CompareAndSwap(false, true)
			return
		}
		l.sess = sess
		err = waitAnswer(l.ctx, sess, func(res *sip.Response) {
			// Store responded before loading stopped (stop does the
			// reverse): one side or both see the other, so a stopped leg
			// is cancelled.
			l.responded.Store(true)
			if l.stopped.Load() {
				l.cancel(context.Canceled)
				return // nobody relays a stopped leg's ringing
			}
			if res.IsProvisional() && res.StatusCode > 100 && r.provisional(l, res) {
				r.events <- legEvent{leg: l, prov: res}
			}
		})
		tried, _, _ := sessionExpires(req)
		n := retryMinSE(err, max(minSE, tried))
		if n == 0 || attempt >= maxSessionRetries || l.stopped.Load() || l.ctx.Err() != nil {
			break
		}
		minSE = n
	}
	if !l.settled.CompareAndSwap(false, true) {
		// The attempt timer reported the leg failed; it answered late.
		if err == nil || sess.InviteResponse != nil && sess.InviteResponse.IsSuccess() {
			r.discard(l)
		}
		return
	}
	send = true
	switch {
	case err == nil:
		if r.claim(l) {
			ev.won, ev.status, ev.res = true, sess.InviteResponse.StatusCode, sess.InviteResponse
			return
		}
		ev.err = errLostRace // status stays 0: this is not an answer for the caller
		r.discard(l)
	case errorStatus(err) != 0:
		var de *sipgo.ErrDialogResponse
		errors.As(err, &de)
		ev.status, ev.res, ev.err = de.Res.StatusCode, de.Res, err
	case sess.InviteResponse != nil && sess.InviteResponse.IsSuccess():
		// The 2xx crossed our CANCEL: the dialog exists, end it.
		ev.err = err
		r.discard(l)
	default:
		ev.err = err
	}
}

// maxSessionRetries bounds the 422 retries of one target.
const maxSessionRetries = 2

// retryMinSE reads a 422 Session Interval Too Small (RFC 4028 §7.4): the
// Min-SE to retry with, or 0 when err is not one worth retrying (no
// usable Min-SE, not above the one already tried, or beyond a day).
func retryMinSE(err error, tried int) int {
	var de *sipgo.ErrDialogResponse
	if !errors.As(err, &de) || de.Res == nil || de.Res.StatusCode != 422 {
		return 0
	}
	h := headerNamed(de.Res, "Min-SE")
	if h == nil {
		return 0
	}
	v, _, _ := strings.Cut(h.Value(), ";")
	n, perr := strconv.Atoi(strings.TrimSpace(v))
	if perr != nil || n <= tried || n < 90 || n > 86400 {
		return 0
	}
	return n
}

// discard ACKs and BYEs a B leg that answered but is not wanted.
func (r *ringer) discard(l *leg) {
	discardLeg(r.b, l, r.spec.laddr)
}

func discardLeg(b *B2BUA, l *leg, laddr *sip.Addr) {
	ctx, cancel := withTimeout(byeTimeout)
	defer cancel()
	if err := b.ackLeg(ctx, l.sess); err != nil {
		b.log.Debug("b2bua: ack of unwanted leg", "err", err)
	}
	if err := l.sess.WriteBye(ctx, byeToLeg(l, laddr)); err != nil {
		b.log.Debug("b2bua: bye of unwanted leg", "err", err)
	}
}

// byeToLeg builds a BYE for a B leg before it became a party (sipgo's
// DialogClientSession.Bye would not set Laddr).
func byeToLeg(l *leg, laddr *sip.Addr) *sip.Request {
	if l.t.laddr != nil {
		laddr = l.t.laddr
	}
	recipient := l.sess.InviteRequest.Recipient
	if res := l.sess.InviteResponse; res != nil {
		if ct := res.Contact(); ct != nil {
			recipient = ct.Address
		}
	}
	bye := sip.NewRequest(sip.BYE, *recipient.Clone())
	bye.SetTransport(l.t.transport)
	setLaddr(bye, l.t.transport, laddr)
	return bye
}

func (r *ringer) legRequest(t target) *sip.Request {
	s := &r.spec
	req := sip.NewRequest(sip.INVITE, t.uri)
	req.SetTransport(t.transport)
	if t.dest != "" {
		req.SetDestination(t.dest)
	}
	contact := s.contact
	if t.laddr != nil {
		setLaddr(req, t.transport, t.laddr)
		contact = t.contactAt(t.laddr)
	} else {
		setLaddr(req, t.transport, s.laddr)
	}

	from := &sip.FromHeader{DisplayName: s.from.DisplayName, Address: sip.Uri{Scheme: "sip", User: s.from.Address.User, Host: contact.Host}}
	from.Params.Add("tag", sip.GenerateTagN(16))
	to := &sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: t.user, Host: t.uri.Host}}
	callID := sip.CallIDHeader(sip.GenerateTagN(32))
	cseq := &sip.CSeqHeader{SeqNo: 1, MethodName: sip.INVITE}
	mf := sip.MaxForwardsHeader(s.maxFwd)
	req.AppendHeader(from)
	req.AppendHeader(to)
	req.AppendHeader(&callID)
	req.AppendHeader(cseq)
	req.AppendHeader(&mf)
	req.AppendHeader(&sip.ContactHeader{Address: contact})
	req.AppendHeader(sip.NewHeader("Allow", allowInDialog))
	for _, h := range s.headers {
		req.AppendHeader(sip.HeaderClone(h))
	}
	if len(s.body) > 0 {
		ct := sip.ContentTypeHeader(s.ctype)
		cl := sip.ContentLengthHeader(len(s.body))
		// appended first, SetBody finds it without a lookup by name
		// through every header (which lowers each name not in sipgo's
		// table, an allocation apiece)
		req.AppendHeader(&ct)
		req.AppendHeader(&cl)
		req.SetBody(append([]byte(nil), s.body...))
	}
	if t.signed && r.set.cfg.SignPool != nil {
		r.set.cfg.SignPool(req)
	}
	return req
}

// allowInDialog is what a dialog with the B2BUA accepts (RFC 3261 §20.5).
const allowInDialog = "INVITE, ACK, CANCEL, BYE, OPTIONS, UPDATE, REFER, NOTIFY"

// setLaddr pins a UDP request to the listener at a (sipgo otherwise picks
// a socket by peer, or opens an ephemeral one).
func setLaddr(req *sip.Request, transport string, a *sip.Addr) {
	if a == nil || !strings.EqualFold(transport, "UDP") {
		return
	}
	req.Laddr = sip.Addr{IP: append(net.IP(nil), a.IP...), Port: a.Port}
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
