package b2bua

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
)

// Subscriptions (RFC 6665) to the state of local users, for busy lamps
// and presence: the dialog event package (RFC 4235: a user's calls,
// trying, early, confirmed) and presence (RFC 3856: open while a phone
// is registered and the user is not in do-not-disturb). The box is the
// notifier for its own users, in every mode.
//
// A SUBSCRIBE comes from an authenticated local user (the gateway
// challenges it like a call); one for someone who is not a local user
// gets 404, another event package 489. Each subscriber has at most
// maxSubsPerUser subscriptions (more: 403) and the box maxSubsTotal
// (more: 503). Expires is bounded to [minSubExpires, maxSubExpires]
// (below: 423). Every state change of a watched user (a call's state, a
// registration, do-not-disturb) is pushed at once: the NOTIFYs of one
// subscription go one at a time, the latest state after the one in
// flight, so a burst of changes costs one NOTIFY per round trip, not one
// per change. A subscription ends when it expires (NOTIFY terminated,
// reason timeout), on Expires 0, or when its NOTIFY gets 481 or no
// answer.

// Subscription bounds.
const (
	maxSubsPerUser    = 100 // a phone with expansion modules has some 60 lamps
	maxSubsTotal      = 5000
	minSubExpires     = 60
	maxSubExpires     = 3600
	defaultSubExpires = 3600
)

// Event packages served.
const (
	eventDialog   = "dialog"
	eventPresence = "presence"
)

// subscription is one subscriber's dialog with the box.
type subscription struct {
	key     string // dialog ID: Call-ID, our tag, theirs
	event   string
	watcher string // the subscriber (authenticated user)
	target  string // the watched user
	entity  string // sip:target@host, the body's entity
	// The dialog, for NOTIFYs: our From (the SUBSCRIBE's To with our
	// tag), their To (its From), their Contact, where it came from.
	local, remote     sip.Uri
	localTag, remTag  string
	callID            string
	remoteTarget      sip.Uri
	transport, dest   string
	laddr             *sip.Addr
	contact           sip.Uri
	eventHeader       string // as subscribed (with its id parameter)
	expireTimer       *time.Timer
	mu                sync.Mutex // what follows
	expires           time.Time
	cseq              uint32
	version           int
	sending, ended    bool
	pending, lastSent string // the body to send next, and the last one sent
	final             bool   // pending is the terminating NOTIFY
}

// watchers are the B2BUA's subscriptions.
type watchers struct {
	mu        sync.Mutex
	subs      map[string]*subscription
	byWatcher map[string]int
	// The users whose state changed since the last scan (all: any of
	// them, e.g. a registration), and whether a scan runs.
	dirty   map[string]bool
	all     bool
	running bool
}

// OnSubscribe handles a SUBSCRIBE from an authenticated local user (the
// gateway has checked the credentials of one outside a dialog), or a
// refresh in an existing subscription's dialog.
func (b *B2BUA) OnSubscribe(req *sip.Request, tx sip.ServerTransaction, pol Policy) {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	set := pol.Settings
	expires := defaultSubExpires
	if h := req.GetHeader("Expires"); h != nil {
		n, err := strconv.Atoi(strings.TrimSpace(h.Value()))
		if err != nil || n < 0 {
			respondWarn(set, tx, req, 400, "Bad Expires")
			return
		}
		expires = n
	}
	if expires > 0 && expires < minSubExpires {
		respondWarn(set, tx, req, 423, "Interval Too Brief", sip.NewHeader("Min-Expires", strconv.Itoa(minSubExpires)))
		return
	}
	expires = min(expires, maxSubExpires)
	if to := req.To(); to != nil && to.Params.Has("tag") {
		b.refreshSubscription(req, tx, set, expires)
		return
	}
	ev := eventPackage(req)
	if ev != eventDialog && ev != eventPresence && (ev != eventMessageSummary || set.cfg.Voicemail == nil) {
		respondWarn(set, tx, req, 489, "Bad Event", sip.NewHeader("Allow-Events", set.allowEvents()))
		return
	}
	target := req.Recipient.User
	if from := req.From(); ev == eventMessageSummary && from != nil && from.Address.User != target {
		respondWarn(set, tx, req, 403, "Forbidden") // only one's own mailbox
		return
	}
	orbit, isPark := set.parkTarget(target)
	isOrbit := isPark && orbit != "" && ev == eventDialog // a lamp on a park orbit (park.go)
	if !isOrbit && (set.cfg.Services == nil || !set.cfg.Services.IsUser(target)) {
		respondWarn(set, tx, req, 404, "Not Found")
		return
	}
	from, cid := req.From(), req.CallID()
	if from == nil || cid == nil || req.Contact() == nil {
		respondWarn(set, tx, req, 400, "Bad Request")
		return
	}
	_, laddr, contact, err := b.localFor(set, tx)
	if err != nil {
		respondWarn(set, tx, req, 500, "Server Internal Error")
		return
	}
	if laddr == nil {
		contact = streamContact(contact, req.Transport(), req.Recipient.Scheme)
	}
	s := &subscription{event: ev, watcher: from.Address.User, target: target, callID: cid.Value(),
		localTag: sip.GenerateTagN(16), remTag: from.Params.GetOr("tag", ""),
		local: req.To().Address, remote: from.Address, remoteTarget: req.Contact().Address,
		transport: req.Transport(), dest: req.Source(), laddr: laddr, contact: contact,
		eventHeader: req.GetHeader("Event").Value()}
	s.entity = "sip:" + target + "@" + cmp.Or(req.Recipient.Host, contact.Host)
	s.key = s.callID + "\x00" + s.localTag + "\x00" + s.remTag
	if code := b.watch.add(s); code != 0 {
		respondWarn(set, tx, req, code, "")
		return
	}
	res := sip.NewResponseFromRequest(req, 200, "OK", nil)
	res.To().Params.Add("tag", s.localTag)
	res.AppendHeader(&sip.ContactHeader{Address: contact})
	res.AppendHeader(sip.NewHeader("Expires", strconv.Itoa(expires)))
	addHeaders(res, set.warnings())
	_ = tx.Respond(res)
	b.log.Debug("b2bua: subscription", "watcher", s.watcher, "target", target, "event", ev, "expires", expires)
	b.armSubscription(s, expires)
	b.notify(s, b.bodyOf(s, nil), expires == 0)
}

// allowEvents are the event packages served.
func (s *Settings) allowEvents() string {
	if s.cfg.Voicemail != nil {
		return "dialog, presence, message-summary"
	}
	return "dialog, presence"
}

// eventPackage is the Event header's package, parameters cut.
func eventPackage(req *sip.Request) string {
	h := req.GetHeader("Event")
	if h == nil {
		return ""
	}
	p, _, _ := strings.Cut(h.Value(), ";")
	return strings.ToLower(strings.TrimSpace(p))
}

// add registers s unless a bound says no (the status to answer).
func (w *watchers) add(s *subscription) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.subs == nil {
		w.subs, w.byWatcher = map[string]*subscription{}, map[string]int{}
	}
	switch {
	case w.byWatcher[s.watcher] >= maxSubsPerUser:
		return 403
	case len(w.subs) >= maxSubsTotal:
		return 503
	}
	w.subs[s.key] = s
	w.byWatcher[s.watcher]++
	return 0
}

func (w *watchers) remove(s *subscription) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.subs[s.key] == s {
		delete(w.subs, s.key)
		if w.byWatcher[s.watcher]--; w.byWatcher[s.watcher] <= 0 {
			delete(w.byWatcher, s.watcher)
		}
	}
}

func (w *watchers) find(req *sip.Request) *subscription {
	cid, from, to := req.CallID(), req.From(), req.To()
	if cid == nil || from == nil || to == nil {
		return nil
	}
	key := cid.Value() + "\x00" + to.Params.GetOr("tag", "") + "\x00" + from.Params.GetOr("tag", "")
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.subs[key]
}

// refreshSubscription handles a SUBSCRIBE in an existing subscription:
// a new expiry (0 = end it), and a NOTIFY with the state (RFC 6665
// §4.2.1.2).
func (b *B2BUA) refreshSubscription(req *sip.Request, tx sip.ServerTransaction, set *Settings, expires int) {
	s := b.watch.find(req)
	if s == nil {
		respondWarn(set, tx, req, 481, "Subscription Does Not Exist")
		return
	}
	res := sip.NewResponseFromRequest(req, 200, "OK", nil)
	res.AppendHeader(&sip.ContactHeader{Address: s.contact})
	res.AppendHeader(sip.NewHeader("Expires", strconv.Itoa(expires)))
	_ = tx.Respond(res)
	b.armSubscription(s, expires)
	b.notify(s, b.bodyOf(s, nil), expires == 0)
}

// armSubscription sets s to expire in expires seconds (0: it ends with
// the NOTIFY being sent).
func (b *B2BUA) armSubscription(s *subscription, expires int) {
	s.mu.Lock()
	s.expires = time.Now().Add(time.Duration(expires) * time.Second)
	if s.expireTimer != nil {
		s.expireTimer.Stop()
	}
	if expires > 0 {
		s.expireTimer = time.AfterFunc(time.Duration(expires)*time.Second, func() { b.notify(s, b.bodyOf(s, nil), true) })
	}
	s.mu.Unlock()
}

// EndSubscriptions forgets every subscription and stops its expiry
// timer, when the box stops: no NOTIFY goes out after that (phones
// subscribe again when their refresh gets 481 from the next run).
func (b *B2BUA) EndSubscriptions() {
	w := &b.watch
	w.mu.Lock()
	subs := w.subs
	w.subs, w.byWatcher = nil, nil
	w.mu.Unlock()
	for _, s := range subs {
		s.mu.Lock()
		s.ended = true
		if s.expireTimer != nil {
			s.expireTimer.Stop()
		}
		s.mu.Unlock()
	}
}

// UsersChanged tells the B2BUA that local users' registrations changed:
// their presence is looked at again.
func (b *B2BUA) UsersChanged() { b.watchedChanged() }

// watchedChanged says that the state of users (none named: any user)
// may have changed: the subscriptions to them are looked at again, and
// those whose state changed get a NOTIFY. One scan runs at a time;
// changes during it make it run once more.
func (b *B2BUA) watchedChanged(users ...string) {
	w := &b.watch
	w.mu.Lock()
	if len(w.subs) == 0 {
		w.mu.Unlock()
		return
	}
	if len(users) == 0 {
		w.all = true
	}
	for _, u := range users {
		if u != "" {
			if w.dirty == nil {
				w.dirty = map[string]bool{}
			}
			w.dirty[u] = true
		}
	}
	if w.running {
		w.mu.Unlock()
		return
	}
	w.running = true
	w.mu.Unlock()
	b.inflight.Add(1)
	go b.scanWatched()
}

func (b *B2BUA) scanWatched() {
	defer b.inflight.Add(-1)
	w := &b.watch
	for {
		w.mu.Lock()
		if !w.all && len(w.dirty) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		all, dirty := w.all, w.dirty
		w.all, w.dirty = false, nil
		subs := make([]*subscription, 0, len(w.subs))
		for _, s := range w.subs {
			if all || dirty[s.target] {
				subs = append(subs, s)
			}
		}
		w.mu.Unlock()
		if len(subs) == 0 {
			continue
		}
		watched := make(map[string]bool, len(subs))
		for _, s := range subs {
			watched[s.target] = true
		}
		dialogs := b.dialogsOf(watched)
		for _, s := range subs {
			b.notify(s, b.bodyOf(s, dialogs), false)
		}
	}
}

// dialogStates are the RFC 4235 states of the call states.
var dialogStates = map[string]string{StateRouting: "trying", StateRinging: "early", StateAnswered: "confirmed", StateParked: "confirmed", StateQueued: "confirmed"}

// dialogsOf is the part of users in the calls in progress.
func (b *B2BUA) dialogsOf(users map[string]bool) map[string][]userDialog {
	out := map[string][]userDialog{}
	b.mu.Lock()
	calls := make([]*call, 0, len(b.calls))
	for _, c := range b.calls {
		calls = append(calls, c)
	}
	b.mu.Unlock()
	for _, x := range calls {
		x.mu.Lock() // not under b.mu: see doc.go, "State and locks"
		c := x.info
		x.mu.Unlock()
		st := dialogStates[c.State]
		if users[c.From] {
			out[c.From] = append(out[c.From], userDialog{id: c.ID + "-i", callID: c.ID, initiator: true, state: st, remote: c.To})
		}
		if c.Route == dialplan.RouteLocal && users[c.Target] && c.Target != c.From {
			out[c.Target] = append(out[c.Target], userDialog{id: c.ID + "-r", callID: c.ID, state: st, remote: c.From})
		}
	}
	return out
}

// bodyOf is s's state now (dialogs: dialogsByUser, nil = look it up).
func (b *B2BUA) bodyOf(s *subscription, dialogs map[string][]userDialog) string {
	if s.event == eventMessageSummary {
		n, o := b.waiting(s.target)
		return summaryBody(s.entity, n, o)
	}
	if s.event == eventPresence {
		open := len(b.loc.Contacts(s.target)) > 0
		if set := b.current().Settings; set != nil && set.cfg.Services != nil && set.cfg.Services.Services(s.target).DND {
			open = false
		}
		return pidf(s.entity, open)
	}
	if dialogs == nil {
		dialogs = b.dialogsOf(map[string]bool{s.target: true})
	}
	ds := slices.Clone(dialogs[s.target])
	slices.SortFunc(ds, func(x, y userDialog) int { return strings.Compare(x.id, y.id) })
	return dialogInfoBody(s.entity, ds)
}

// notify queues body for s: sent now when no NOTIFY of s is in flight,
// else after it (only the latest body waits). final ends s with it.
func (b *B2BUA) notify(s *subscription, body string, final bool) {
	s.mu.Lock()
	if s.ended || !final && !s.final && body == s.pending && (s.sending || body == s.lastSent) {
		s.mu.Unlock()
		return
	}
	s.pending, s.final = body, s.final || final
	if s.sending {
		s.mu.Unlock()
		return
	}
	s.sending = true
	s.mu.Unlock()
	b.inflight.Add(1)
	go b.sendNotifies(s)
}

// sendNotifies sends s's pending NOTIFYs one at a time.
func (b *B2BUA) sendNotifies(s *subscription) {
	defer b.inflight.Add(-1)
	for {
		s.mu.Lock()
		if s.ended || s.pending == s.lastSent && !s.final {
			s.sending = false
			s.mu.Unlock()
			return
		}
		body, final := s.pending, s.final
		s.cseq++
		s.version++
		req := s.notifyRequest(body, final)
		s.lastSent = body
		if final {
			s.ended = true
			if s.expireTimer != nil {
				s.expireTimer.Stop()
			}
		}
		s.mu.Unlock()
		if final {
			b.watch.remove(s)
		}
		ctx, cancel := context.WithTimeout(context.Background(), byeTimeout)
		res, err := b.client.Do(ctx, req)
		cancel()
		if !final && (err != nil || res.StatusCode == 481 || res.StatusCode == 408) {
			// RFC 6665 §4.2.2: the subscriber is gone.
			b.log.Debug("b2bua: subscription ended by its NOTIFY", "watcher", s.watcher, "target", s.target, "err", err)
			s.mu.Lock()
			s.ended, s.sending = true, false
			if s.expireTimer != nil {
				s.expireTimer.Stop()
			}
			s.mu.Unlock()
			b.watch.remove(s)
			return
		}
		if final {
			s.mu.Lock()
			s.sending = false
			s.mu.Unlock()
			return
		}
	}
}

// notifyRequest builds s's next NOTIFY. Called with s.mu held.
func (s *subscription) notifyRequest(body string, final bool) *sip.Request {
	req := sip.NewRequest(sip.NOTIFY, s.remoteTarget)
	req.SetTransport(s.transport)
	req.SetDestination(s.dest)
	setLaddr(req, s.transport, s.laddr)
	from := &sip.FromHeader{Address: s.local}
	from.Params.Add("tag", s.localTag)
	to := &sip.ToHeader{Address: s.remote}
	if s.remTag != "" {
		to.Params.Add("tag", s.remTag)
	}
	cid := sip.CallIDHeader(s.callID)
	mf := sip.MaxForwardsHeader(70)
	req.AppendHeader(from)
	req.AppendHeader(to)
	req.AppendHeader(&cid)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: s.cseq, MethodName: sip.NOTIFY})
	req.AppendHeader(&mf)
	req.AppendHeader(&sip.ContactHeader{Address: s.contact})
	req.AppendHeader(sip.NewHeader("Event", s.eventHeader))
	state := "active;expires=" + strconv.Itoa(max(0, int(time.Until(s.expires).Seconds())))
	if final {
		state = "terminated;reason=timeout"
	}
	req.AppendHeader(sip.NewHeader("Subscription-State", state))
	ct := sip.ContentTypeHeader("application/dialog-info+xml")
	switch s.event {
	case eventPresence:
		ct = "application/pidf+xml"
	case eventMessageSummary:
		ct = "application/simple-message-summary"
	}
	req.AppendHeader(&ct)
	body = strings.Replace(body, versionMark, strconv.Itoa(s.version-1), 1)
	req.SetBody([]byte(body))
	return req
}
