package b2bua

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/media/sdprewrite"
)

// party is our dialog with one remote party of an answered call: the
// caller's leg (we were UAS) or a callee's leg (we were UAC). Once the
// call is up, every in-dialog request is built here rather than by
// sipgo's dialog sessions: the B2BUA owns the CSeq space (an ACK for a
// re-INVITE must carry that re-INVITE's number even if a keep-alive
// OPTIONS went out meanwhile), pins the listener (Laddr) and follows
// target refreshes.
//
// The call owns its parties: the fields after home are guarded by
// home.mu, the lock of the call the party is in (doc.go, "State and
// locks").
type party struct {
	b *B2BUA
	dialog
	user string // the party's user part (CDR, transfer identities)
	name string // where it is, for the CDR: contact URI or "udp:ip:port"
	// trusted parties are local users (an authenticated caller, a
	// registered contact); a REFER from anyone else may only transfer to
	// local users (no toll fraud through a transfer).
	trusted bool

	cseq atomic.Uint32 // our last CSeq in this dialog
	conf confirmation

	// onBye, for a dialog outside any bridge (a media connection on a
	// remote MSR, msranchor.go), is called when the other side ends it.
	onBye func()

	// home is the call whose lock guards the fields below: the bridge the
	// party is in (or was last in), or a lone home (loneHome). It changes
	// only under the old home's lock (attachLocked).
	home atomic.Pointer[call]

	c     *call // the bridge the party is in; nil once replaced; changes on a transfer
	leg   Leg
	setup partySetup
	rem   remoteState
	sdp   offerAnswer
	timer sessionTimer
}

// dialog is our dialog with the party as it was set up: who we are to
// each other and where our requests go. Set when the party is made, then
// only read.
type dialog struct {
	key    string // dialog ID as sip.DialogIDFromRequestUAS gives it for requests from the party
	callID string
	local  sip.FromHeader // our side, with our tag: From of our requests
	remote sip.ToHeader   // their side, with their tag: To of our requests

	transport string
	laddr     *sip.Addr // UDP listener our requests leave from; nil = sipgo's choice
	localIP   netip.Addr
	contact   sip.Uri  // our Contact in this dialog
	routes    []string // route set (Route header values), in order
	dest      string   // where requests go without a route set: the party's source address (NAT)
	// inviteCSeq is the CSeq of the INVITE that made the dialog: the
	// caller's, whose ACK confirms it, or a fork's.
	inviteCSeq uint32
}

// confirmation is the 2xx that set up the dialog and its ACK.
type confirmation struct {
	// done is closed when the dialog's 2xx was ACKed (by the party for
	// the caller's leg, by us for a callee's); a BYE waits for it (RFC
	// 3261 §15: no BYE on a confirmed dialog before the ACK).
	done chan struct{}
	once sync.Once
	// acked: the ACK of the dialog's 2xx is taken care of, once: sent
	// (a callee's, call.ackCallee) or handled (a caller's, call.onAck).
	acked atomic.Bool
}

// partySetup is the sipgo dialog session the party's dialog was made
// with, until the call drops it (call.setupDone): cli, the INVITE client
// session of a callee's leg (its 2xx retransmissions are re-ACKed by
// sipgo), or srv, the server session of a caller's leg.
type partySetup struct {
	cli *sipgo.DialogClientSession
	srv *sipgo.DialogServerSession
}

// remoteState is the party's side of the dialog as it changes.
type remoteState struct {
	target sip.Uri // remote target (Contact), updated by target refreshes
	cseq   uint32  // the party's last CSeq
	gone   bool    // BYE sent or received
}

// offerAnswer is what the party sent and got in its offer/answer
// exchanges (RFC 3264).
type offerAnswer struct {
	in     []byte // last session description from the party
	inType string
	out    []byte            // last session description sent to it
	oOut   sdprewrite.Origin // o= of out
	oSrc   sdprewrite.Origin // o= of the SDP out was made from (continuity, see prepare)
}

// sessionTimer is the party's RFC 4028 session timer (sessiontimer.go).
type sessionTimer struct {
	st sessionState
	t  *time.Timer // stopped when the party goes
}

// loneHome is the home of a dialog outside any bridge (an MSR media
// connection, a fork's 2xx): a call value that is never listed, whose
// lock guards that one party.
func loneHome(b *B2BUA) *call { return &call{b: b} }

// lock locks the lock that guards p's state, its home's, and returns the
// home; the caller unlocks home.mu.
func (p *party) lock() *call {
	for {
		h := p.home.Load()
		h.mu.Lock()
		if p.home.Load() == h {
			return h
		}
		h.mu.Unlock() // a transfer moved p meanwhile
	}
}

func (p *party) bridge() (*call, Leg) {
	h := p.lock()
	defer h.mu.Unlock()
	return p.c, p.leg
}

// in reports whether the party is (still) in bridge c.
func (p *party) in(c *call) bool {
	h := p.lock()
	defer h.mu.Unlock()
	return p.c == c
}

// inLocked is in with c.mu held.
func (p *party) inLocked(c *call) bool {
	return p.home.Load() == c && p.c == c
}

// legOf is the party's leg in its bridge.
func (p *party) legOf() Leg {
	h := p.lock()
	defer h.mu.Unlock()
	return p.leg
}

// session is the sipgo dialog session the party's dialog was made with
// (nil once the call is up: see call.setupDone).
func (p *party) session() (*sipgo.DialogServerSession, *sipgo.DialogClientSession) {
	h := p.lock()
	defer h.mu.Unlock()
	return p.setup.srv, p.setup.cli
}

func (p *party) dropSession() {
	h := p.lock()
	p.setup = partySetup{}
	h.mu.Unlock()
}

// confirm marks the dialog confirmed; it reports whether it already was.
func (p *party) confirm() (already bool) {
	already = true
	p.conf.once.Do(func() {
		already = false
		close(p.conf.done)
	})
	return already
}

func (p *party) isConfirmed() bool {
	select {
	case <-p.conf.done:
		return true
	default:
		return false
	}
}

// attach puts the party in bridge c as leg l.
func (p *party) attach(c *call, l Leg) {
	h := p.lock()
	p.attachLocked(c, l)
	h.mu.Unlock()
}

// attachLocked is attach with the lock of p's home held. A party that
// joins another call moves its home there: from then on that call's lock
// guards it. Detached (c nil), it keeps its home.
func (p *party) attachLocked(c *call, l Leg) {
	p.c, p.leg = c, l
	if c != nil {
		p.home.Store(c)
	}
}

// remoteTarget is the party's current Contact.
func (p *party) remoteTarget() sip.Uri {
	h := p.lock()
	defer h.mu.Unlock()
	return *p.rem.target.Clone()
}

// newRequest builds an in-dialog request (RFC 3261 §12.2.1.1). Via is
// added when it is sent.
func (p *party) newRequest(method sip.RequestMethod) *sip.Request {
	req := sip.NewRequest(method, p.remoteTarget())
	from := p.local
	from.Params = p.local.Params.Clone()
	to := p.remote
	to.Params = p.remote.Params.Clone()
	callID := sip.CallIDHeader(p.callID)
	mf := sip.MaxForwardsHeader(70)
	req.AppendHeader(&from)
	req.AppendHeader(&to)
	req.AppendHeader(&callID)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: p.cseq.Add(1), MethodName: method})
	req.AppendHeader(&mf)
	p.finish(req)
	return req
}

// finish adds the route set, Contact (for target refreshes) and the
// transport details.
func (p *party) finish(req *sip.Request) {
	for _, r := range p.routes {
		req.AppendHeader(sip.NewHeader("Route", r))
	}
	switch req.Method {
	case sip.INVITE, sip.UPDATE, sip.REFER, sip.NOTIFY, sip.SUBSCRIBE:
		req.AppendHeader(&sip.ContactHeader{Address: p.contact})
	}
	req.SetTransport(p.transport)
	if len(p.routes) == 0 && p.dest != "" {
		req.SetDestination(p.dest)
	}
	setLaddr(req, p.transport, p.laddr)
}

// ack builds the ACK for a 2xx to our INVITE number cseq (RFC 3261
// §13.2.2.4: the INVITE's CSeq number, a new branch).
func (p *party) ack(cseq uint32, body []byte, ct string) *sip.Request {
	req := sip.NewRequest(sip.ACK, p.remoteTarget())
	from := p.local
	from.Params = p.local.Params.Clone()
	to := p.remote
	to.Params = p.remote.Params.Clone()
	callID := sip.CallIDHeader(p.callID)
	mf := sip.MaxForwardsHeader(70)
	req.AppendHeader(&from)
	req.AppendHeader(&to)
	req.AppendHeader(&callID)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: cseq, MethodName: sip.ACK})
	req.AppendHeader(&mf)
	p.finish(req)
	if len(body) > 0 {
		h := sip.ContentTypeHeader(ct)
		req.AppendHeader(&h)
	}
	req.SetBody(body)
	return req
}

// ackNow sends the ACK for a 2xx to our INVITE number cseq, with body
// (ct "" = application/sdp), and keeps it for the 2xx's retransmissions
// (acks.go).
func (p *party) ackNow(cseq uint32, body []byte, ct string) {
	if ct == "" {
		ct = "application/sdp"
	}
	ack := p.ack(cseq, body, ct)
	_ = sipgo.ClientRequestAddVia(p.b.client, ack) // cannot fail
	// Kept before it leaves: a retransmitted 2xx may come back before
	// the write returns.
	p.b.acks.keep(ack)
	if err := p.b.client.WriteRequest(ack, sendAsIs); err != nil {
		p.b.log.Warn("b2bua: ack", "to", p.name, "cseq", cseq, "err", err)
	}
}

// send starts a client transaction for an in-dialog request.
func (p *party) send(ctx context.Context, req *sip.Request) (sip.ClientTransaction, error) {
	if req.Body() == nil {
		req.SetBody(nil) // Content-Length: 0
	}
	tx, err := p.b.client.TransactionRequest(ctx, req, sipgo.ClientRequestAddVia)
	if err != nil {
		return nil, fmt.Errorf("b2bua: %s to %s: %w", req.Method, p.name, err)
	}
	return tx, nil
}

// errNoResponse: an in-dialog request got no final response in time.
var errNoResponse = errors.New("b2bua: no response")

// do sends an in-dialog non-INVITE request and waits for its final
// response.
func (p *party) do(ctx context.Context, req *sip.Request) (*sip.Response, error) {
	tx, err := p.send(ctx, req)
	if err != nil {
		return nil, err
	}
	defer tx.Terminate()
	for {
		select {
		case res := <-tx.Responses():
			if res.IsProvisional() {
				continue
			}
			return res, nil
		case <-tx.Done():
			return nil, fmt.Errorf("%w to %s to %s: %w", errNoResponse, req.Method, p.name, tx.Err())
		case <-ctx.Done():
			return nil, fmt.Errorf("%w to %s to %s: %w", errNoResponse, req.Method, p.name, ctx.Err())
		}
	}
}

// bye ends the dialog from our side (bounded by byeTimeout); a party
// already gone is left alone.
func (p *party) bye() {
	h := p.lock()
	if p.rem.gone {
		h.mu.Unlock()
		return
	}
	p.rem.gone = true
	p.stopSessionLocked()
	h.mu.Unlock()
	select {
	case <-p.conf.done:
	case <-time.After(64 * sip.T1):
	}
	p.b.forget(p)
	ctx, cancel := withTimeout(byeTimeout)
	defer cancel()
	res, err := p.do(ctx, p.newRequest(sip.BYE))
	switch {
	case err != nil:
		p.b.log.Info("b2bua: bye", "to", p.name, "err", err)
	case res.StatusCode >= 300:
		p.b.log.Debug("b2bua: bye refused", "to", p.name, "status", res.StatusCode)
	}
}

// inCSeq checks a request's CSeq against the party's last one (RFC 3261
// §12.2.2: lower is out of order, 500) and records it.
func (p *party) inCSeq(req *sip.Request) bool {
	cs := req.CSeq()
	if cs == nil {
		return false
	}
	h := p.lock()
	defer h.mu.Unlock()
	if p.rem.cseq != 0 && cs.SeqNo <= p.rem.cseq {
		return false
	}
	p.rem.cseq = cs.SeqNo
	return true
}

// refresh follows a target refresh (a Contact in a re-INVITE, UPDATE or
// their 2xx: RFC 3261 §12.2.1.2, §12.2.2).
func (p *party) refresh(ct *sip.ContactHeader) {
	if ct == nil || ct.Address.Host == "" {
		return
	}
	h := p.lock()
	p.rem.target = *ct.Address.Clone()
	h.mu.Unlock()
}

// noteIn remembers the party's latest session description.
func (p *party) noteIn(sdp []byte, ct string) {
	if len(sdp) == 0 {
		return
	}
	in := append([]byte(nil), sdp...)
	h := p.lock()
	p.sdp.in, p.sdp.inType = in, ct
	h.mu.Unlock()
}

// outSDP prepares a session description for the party and remembers it
// (offerAnswer.prepare).
func (p *party) outSDP(sdp []byte) []byte {
	if len(sdp) == 0 {
		return sdp
	}
	s, ok := readSDP(sdp) // parsed before locking: the lock is the call's
	h := p.lock()
	defer h.mu.Unlock()
	return p.sdp.prepare(sdp, s, ok)
}

// prepare makes sdp (s, read when ok) the description sent to the party.
// RFC 3264 §8 wants the o= line of a dialog's descriptions to keep its
// username and session id and to raise the version on every change. A
// relayed description keeps its origin while the other party stays the
// same, so the body goes out untouched; once the other party changed (a
// transfer), its descriptions get the o= the party knows, version + 1.
func (oa *offerAnswer) prepare(sdp []byte, s *sdprewrite.SDP, ok bool) []byte {
	var o sdprewrite.Origin // zero: no usable o= line, the body goes as is
	if ok {
		o = s.Origin
	}
	out := sdp
	if !o.IsZero() && !oa.oOut.IsZero() && !o.SameSession(oa.oOut) {
		n := oa.oOut
		if o != oa.oSrc { // a repeat of the same description keeps its version
			n.Version++
		}
		out = s.WithOrigin(n)
		oa.oSrc, oa.oOut = o, n
	} else if !o.IsZero() {
		oa.oSrc, oa.oOut = o, o
	}
	oa.out = out
	return out
}

// lastSDP returns the party's latest description and Content-Type.
func (p *party) lastSDP() ([]byte, string) {
	h := p.lock()
	defer h.mu.Unlock()
	return p.sdp.in, p.sdp.inType
}

// respond answers an in-dialog request of the party.
func respondBody(tx sip.ServerTransaction, req *sip.Request, code int, reason string, body []byte, ct string, hdrs ...sip.Header) error {
	res := sip.NewResponseFromRequest(req, code, reason, body)
	if len(body) > 0 {
		h := sip.ContentTypeHeader(ct)
		res.AppendHeader(&h)
	}
	for _, h := range hdrs {
		res.AppendHeader(h)
	}
	return tx.Respond(res)
}

// respond2xx sends a 2xx to an INVITE and retransmits it until ack is
// signalled (RFC 3261 §13.3.1.4). It reports whether the ACK came.
func respond2xx(tx sip.ServerTransaction, res *sip.Response, ack <-chan struct{}, stop <-chan struct{}) bool {
	if err := tx.Respond(res); err != nil {
		return false
	}
	return retransmit(func() error { return tx.Respond(res) }, ack, stop)
}

// retransmit repeats send, T1 doubling up to T2 (RFC 3261 §13.3.1.4, RFC
// 3262 §3), until done is signalled (true), or stop is, send fails, or
// 64*T1 has passed (false).
func retransmit(send func() error, done, stop <-chan struct{}) bool {
	interval := sip.T1
	retrans := time.NewTimer(interval)
	defer retrans.Stop()
	giveUp := time.NewTimer(64 * sip.T1)
	defer giveUp.Stop()
	for {
		select {
		case <-done:
			return true
		case <-stop:
			return false
		case <-giveUp.C:
			return false
		case <-retrans.C:
			if err := send(); err != nil {
				return false
			}
			interval = min(2*interval, sip.T2)
			retrans.Reset(interval)
		}
	}
}

// newParty makes the party of dialog d, guarded by home's lock.
func newParty(b *B2BUA, home *call, d dialog) *party {
	p := &party{b: b, dialog: d, conf: confirmation{done: make(chan struct{})}}
	p.home.Store(home)
	return p
}

// newCallerParty makes the party of a caller's leg (the INVITE req that
// a answers) before the answer is sent, for call home.
func newCallerParty(b *B2BUA, home *call, req *sip.Request, a *sipgo.DialogServerSession, arrived *sip.Addr, contact sip.Uri) *party {
	d := dialog{transport: req.Transport(), laddr: arrived, contact: contact, dest: req.Source(), key: a.ID,
		localIP: addrOf(arrived, contact)}
	if h := req.CallID(); h != nil {
		d.callID = h.Value()
	}
	if to := a.InviteRequest.To(); to != nil { // carries our tag
		d.local = to.AsFrom()
		d.local.Params = to.Params.Clone()
	}
	if f := req.From(); f != nil {
		d.remote = f.AsTo()
		d.remote.Params = f.Params.Clone()
	}
	for _, h := range headersNamed(req, "Record-Route") {
		d.routes = append(d.routes, h.Value()) // UAS: in order (RFC 3261 §12.1.1)
	}
	cs := req.CSeq()
	if cs != nil {
		d.inviteCSeq = cs.SeqNo
	}
	p := newParty(b, home, d)
	if f := req.From(); f != nil {
		p.user = f.Address.User
	}
	p.name = strings.ToLower(req.Transport() + ":" + req.Source())
	p.setup.srv = a
	p.rem.target = req.Recipient
	if ct := req.Contact(); ct != nil {
		p.rem.target = *ct.Address.Clone()
	}
	if cs != nil {
		p.rem.cseq = cs.SeqNo
		p.cseq.Store(cs.SeqNo) // any start will do; reuse theirs
	}
	return p
}

// uacRoutes is the route set of the dialog that res, a 2xx to our
// INVITE, sets up: its Record-Route reversed (RFC 3261 §12.1.2).
func uacRoutes(res *sip.Response) []string {
	rr := headersNamed(res, "Record-Route")
	routes := make([]string, 0, len(rr))
	for i := len(rr) - 1; i >= 0; i-- {
		routes = append(routes, rr[i].Value())
	}
	return routes
}

// newCalleeParty makes the party of an answered B leg, for call home
// (loneHome for a dialog outside any bridge).
func newCalleeParty(b *B2BUA, home *call, l *leg, laddr *sip.Addr, contact sip.Uri) *party {
	s := l.sess
	req, res := s.InviteRequest, s.InviteResponse
	d := dialog{transport: l.t.transport, laddr: laddr, contact: contact, dest: res.Source(),
		callID: req.CallID().Value(), local: *req.From(), remote: *res.To(), routes: uacRoutes(res),
		localIP: addrOf(laddr, contact), inviteCSeq: req.CSeq().SeqNo}
	d.local.Params = req.From().Params.Clone()
	d.remote.Params = res.To().Params.Clone()
	localTag, _ := d.local.Params.Get("tag")
	remoteTag, _ := d.remote.Params.Get("tag")
	d.key = sip.DialogIDMake(d.callID, localTag, remoteTag)
	p := newParty(b, home, d)
	p.name, p.user, p.trusted = l.t.name(), l.t.user, l.t.contact
	p.setup.cli = s
	p.rem.target = req.Recipient
	if ct := res.Contact(); ct != nil {
		p.rem.target = *ct.Address.Clone()
	}
	p.cseq.Store(max(req.CSeq().SeqNo, l.rel.cseq.Load())) // PRACKs (prack.go) used numbers after the INVITE's
	p.timer.st = calleeSession(req, res)
	return p
}
