package gateway

import (
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/b2bua"
	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/overload"
	"github.com/outpost/outpost/gateway/registrar"
	"github.com/outpost/outpost/gateway/sanity"
)

// onInvite admits a new call. A call from a configured PSTN gateway (by
// source address: a gateway trunk does not answer digest challenges) is an
// inbound call: its Request-URI is a DID, routed by the inbound rules to a
// local user. A call from an HQ target's address goes to the extension in
// its Request-URI. Any other caller must be a local user who authenticates as
// the user in its From header (the PSTN is reachable from here, so an open
// INVITE would be toll fraud); its call is routed by the dial plan. While
// a pool member drains, a new call goes to the member its user now
// registers at (movedCall); a member's own call does not move.
func (s *Server) onInvite(req *sip.Request, tx sip.ServerTransaction) {
	run := s.now.Load() // the one push this call is trusted, routed and dialled under
	if s.refused(run, req, tx) {
		return
	}
	if to := req.To(); to != nil && to.Params.Has("tag") {
		s.b2b.OnInvite(req, tx) // in-dialog (re-INVITE): the dialog authorises it
		return
	}
	if s.b2b.Looped(req) {
		s.respond(run, tx, sip.NewResponseFromRequest(req, sip.StatusLoopDetected, "Loop Detected", nil))
		return
	}
	// A UDP INVITE was admitted on the fast path (admitInvite), which
	// verified its credentials (verifying them again would see a replayed
	// nonce count) and decided on overload; its queueing delay since then
	// is the overload signal. Over TCP (no amplification, so no stateless
	// path) both happen here.
	at, admittedUnder, state := s.admitted.take(admittedKey(req))
	fast := state == admittedNew
	if fast {
		run = admittedUnder
	}
	if state == admittedTaken {
		// A retransmission that outlived its transaction (retainFinished):
		// absorbed, as the transaction would have done.
		s.lateInvites.Add(1)
		tx.Terminate()
		return
	}
	if fast {
		s.overload.Observe(time.Since(at))
	} else if s.overload.RefuseNew() {
		s.respond(run, tx, s.overloadResponse(run, req))
		return
	}
	defer s.overload.Finish()
	pol := run.policy(s.Mode())
	if gw, ok := run.pstnGatewayOf(req); ok {
		did := req.Recipient.User
		ext, rule, ok := run.plan.InboundDID(did)
		if !ok {
			s.respond(run, tx, sip.NewResponseFromRequest(req, sip.StatusNotFound, "Not Found", nil))
			return
		}
		if s.movedCall(run, req, tx, ext) {
			return
		}
		s.b2b.InboundInvite(req, tx, pol, dialplan.Decision{Number: did, Target: ext, Route: dialplan.RouteLocal,
			Rule: "inbound", RuleIndex: rule, Explain: "inbound DID " + did + " -> " + ext},
			b2bua.End{Route: dialplan.RoutePSTN, Name: gw.String()})
		return
	}
	if s.fromPool(run, req) {
		s.b2b.InboundInvite(req, tx, pol, poolDecision(req), b2bua.End{})
		return
	}
	if run.fromHQ(req) {
		// HQ calls a branch user it knows through upstream registration:
		// the Request-URI user is the extension (the box is its Contact).
		ext := req.Recipient.User
		if s.movedCall(run, req, tx, ext) {
			return
		}
		s.b2b.InboundInvite(req, tx, pol, dialplan.Decision{Number: ext, Target: ext, Route: dialplan.RouteLocal,
			Rule: "from-hq", Explain: "call from HQ to extension " + ext}, b2bua.End{Route: dialplan.RouteHQ})
		return
	}
	if !fast {
		if _, res := s.reg.AuthorizeCall(req); res != nil {
			s.respond(run, tx, res)
			return
		}
	}
	if from := req.From(); from != nil && s.movedCall(run, req, tx, from.Address.User) {
		return
	}
	s.b2b.Invite(req, tx, pol)
}

// admitInvite is the fast path's Admit (gateway/fastpath): it decides a
// new UDP INVITE before a transaction is made of it. A trusted trunk's
// INVITE, or one whose credentials verify, goes on to onInvite; any other
// gets the registrar's 407 (no or stale credentials), 403 or 400, sent
// statelessly by the fast path, and leaves nothing behind. Credentials are
// verified here only, once per transaction: a retransmission of an
// admitted INVITE goes to its transaction without asking here, and one
// that outlived it is admitted again without a second check (onInvite
// then absorbs it: retainFinished). While the overload gate sheds
// (gateway/overload), an INVITE that would be admitted gets 503 instead; the
// second result is true for that answer only: its source passed the trust
// or credential check, so the fast path does not limit it per source like
// the refusals of unauthenticated requests.
func (s *Server) admitInvite(req *sip.Request, _ string) (*sip.Response, bool) {
	run := s.now.Load()
	if res := sanity.Check(req); res != nil {
		// Malformed or unsupported (RFC 3261 §8.2): refused statelessly
		// too, before any challenge.
		res.AppendHeader(sip.NewHeader("Server", run.cfg.serverName()))
		return res, false
	}
	key := admittedKey(req)
	if s.admitted.has(key) {
		return nil, false // a retransmission (onInvite absorbs it)
	}
	if !run.fromPSTN(req) && !run.fromHQ(req) && !s.fromPool(run, req) {
		if _, res := s.reg.AuthorizeCall(req); res != nil {
			run.warn(res, s.Mode())
			res.AppendHeader(sip.NewHeader("Server", run.cfg.serverName()))
			return res, false
		}
	}
	if s.overload.RefuseNew() {
		return s.overloadResponse(run, req), true
	}
	s.admitted.put(key, time.Now(), run)
	return nil, false
}

// overloadResponse is the 503 of a call shed by the overload gate.
func (s *Server) overloadResponse(run *running, req *sip.Request) *sip.Response {
	res := sip.NewResponseFromRequest(req, sip.StatusServiceUnavailable, "Service Unavailable", nil)
	res.AppendHeader(sip.NewHeader("Retry-After", overload.RetryAfter))
	run.warn(res, s.Mode())
	res.AppendHeader(sip.NewHeader("Server", run.cfg.serverName()))
	return res
}

// OverloadRefusals counts the new calls refused with 503 by the overload
// gate (gateway/overload): while setups queued, and while the heap was full.
func (s *Server) OverloadRefusals() (queue, memory uint64) {
	return s.overload.Refused()
}

// admittedKey names an INVITE's server transaction as sipgo matches a
// retransmission (RFC 3261 §17.2.3: the top Via's branch, plus the
// transport and address it came from and its CSeq), hashed: the set keeps
// 16 bytes a call for 32 s instead of the text. Two INVITEs colliding in
// 64 bits within 32 s are not a concern at any call rate a box sees.
func admittedKey(req *sip.Request) uint64 {
	var h maphash.Hash
	h.SetSeed(admittedSeed)
	h.WriteString(req.Transport())
	h.WriteByte('|')
	if via := req.Via(); via != nil {
		branch, _ := via.Params.Get("branch")
		h.WriteString(branch)
	}
	h.WriteByte('|')
	h.WriteString(req.Source())
	if c := req.CSeq(); c != nil {
		var b [10]byte
		h.WriteByte('|')
		h.Write(strconv.AppendUint(b[:0], uint64(c.SeqNo), 10))
	}
	return h.Sum64()
}

var admittedSeed = maphash.MakeSeed()

// admittedWindow is how long an admitted INVITE is remembered: its
// retransmissions stop once it has a provisional or final response, at
// the latest after Timer B (64*T1 = 32 s).
const admittedWindow = 32 * time.Second

// maxAdmitted bounds the memory (two generations of at most this many
// keys: about 7 MiB). Every admitted UDP INVITE is remembered, so a
// generation lasts 32 s up to 2,048 calls a second; beyond that the older
// generation goes early, and a late retransmission of its INVITEs is
// decided again.
const maxAdmitted = 65536

// admission is what the set knows of an INVITE's transaction.
type admission int

const (
	notAdmitted   admission = iota
	admittedNew             // admitted on the fast path, not yet seen by onInvite
	admittedTaken           // onInvite has seen it: any later copy is a retransmission
)

// admittedCalls remembers the UDP INVITEs admitted on the fast path.
type admittedCalls struct {
	mu       sync.Mutex
	cur, old map[uint64]admitted
	rotated  time.Time
}

// admitted is when an INVITE was admitted (Unix nanoseconds; 0 once
// onInvite took it) and what ran then: onInvite works under the push the
// fast path trusted or authenticated the caller under, so a push between
// the two cannot make an HQ's call a local user's (whose credentials
// were never asked for).
type admitted struct {
	at  int64
	run *running
}

func newAdmittedCalls() *admittedCalls {
	return &admittedCalls{cur: map[uint64]admitted{}, old: map[uint64]admitted{}, rotated: time.Now()}
}

func (a *admittedCalls) has(key uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.cur[key]
	if !ok {
		_, ok = a.old[key]
	}
	return ok
}

// take reports what the set knows of key, and when it was admitted the
// first time it is taken: onInvite sees each admitted transaction once.
// A copy of the INVITE that reaches onInvite after that came after its
// transaction ended (retainFinished) and is absorbed, never made a
// second call. The key stays until its generation goes, so that the fast
// path passes the transaction's retransmissions on to sipgo instead of
// deciding them again (under overload: a 503 for a call in progress).
func (a *admittedCalls) take(key uint64) (time.Time, *running, admission) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.cur
	e, ok := m[key]
	if !ok {
		m = a.old
		e, ok = m[key]
	}
	switch {
	case !ok:
		return time.Time{}, nil, notAdmitted
	case e.at == 0:
		return time.Time{}, nil, admittedTaken
	}
	m[key] = admitted{}
	return time.Unix(0, e.at), e.run, admittedNew
}

func (a *admittedCalls) put(key uint64, now time.Time, run *running) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now.Sub(a.rotated) >= admittedWindow || len(a.cur) >= maxAdmitted {
		a.old, a.cur, a.rotated = a.cur, make(map[uint64]admitted, len(a.cur)), now
	}
	a.cur[key] = admitted{at: now.UnixNano(), run: run}
}

// locator hands the B2BUA the registrar's live bindings.
type locator struct {
	reg *registrar.Registrar
	// flow reports whether the connection a stream binding registered
	// over is still open (RFC 5626 outbound); nil = always.
	flow func(transport, addr string) bool
}

func (l locator) Contacts(ext string) []b2bua.Contact {
	var out []b2bua.Contact
	for _, b := range l.reg.Lookup(ext) {
		transport, addr, _ := strings.Cut(b.Source, ":")
		var u sip.Uri
		if err := sip.ParseUri(contactURI(b.Contact), &u); err != nil {
			continue
		}
		c := b2bua.Contact{URI: u.String(), Transport: transport, Addr: addr}
		if lt, la, ok := strings.Cut(b.Local, ":"); ok && lt == transport {
			c.Local = la // calls leave from the listener it registered to
		}
		if b.Outbound && l.flow != nil && !l.flow(transport, addr) {
			c.FlowFailed = true // RFC 5626 §5.3: 430, no new connection
		}
		out = append(out, c)
	}
	return out
}

// Voicemail is the voicemail forwarding of local users (docs/design.md §1:
// calls a user does not take go to the HQ voicemail pilot).
type Voicemail struct {
	// Pilot is the voicemail pilot number (hq.voicemail_pilot). It is
	// routed by the dial plan of the current mode like a dialled number,
	// so the plan needs a rule for it (hq, with a survivable pstn
	// alternative or the pstn_prefix fallback). "" = no forwarding.
	Pilot string
	// Users are the extensions whose voicemail is the pilot
	// (users[].voicemail hq or fallback).
	Users []string
	// Local are the extensions whose messages the box records
	// (users[].voicemail local); Fallback those it records when the
	// pilot is not used: outside normal mode, without a pilot, or when
	// the call to the pilot fails (b2bua.BoxVoicemail). Both need
	// Config.Calls.Voicemail.
	Local, Fallback []string
}

// contactURI is the URI of a Contact value: inside <> when present
// (`"Alice" <sip:1002@198.18.0.20;transport=udp>;expires=60`), else up to
// the first header parameter (RFC 3261 §20.10: without <> the URI has no
// parameters of its own).
func contactURI(v string) string {
	if i := strings.IndexByte(v, '<'); i >= 0 {
		v = v[i+1:]
		if j := strings.IndexByte(v, '>'); j >= 0 {
			v = v[:j]
		}
		return strings.TrimSpace(v)
	}
	v, _, _ = strings.Cut(v, ";")
	return strings.TrimSpace(v)
}

// flowOpen reports whether the box still holds the connection (tcp or
// tls) to addr that a phone registered over: sipgo's pool keeps it by the
// phone's address while it is open.
func (s *Server) flowOpen(transport, addr string) bool {
	pool := s.ua.TransportLayer().Pool(transport)
	if pool == nil {
		return false
	}
	c := pool.Get(addr)
	if c == nil {
		return false
	}
	_, _ = c.TryClose() // Get took a reference
	return true
}
