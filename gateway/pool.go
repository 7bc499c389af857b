package gateway

import (
	"context"
	"reflect"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/b2bua"
	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/pool"
	"github.com/outpost/outpost/gateway/registrar"
	"github.com/outpost/outpost/siptarget"
)

// The registrar pool (gateway/pool): this box is one of several members
// serving one branch. poolPart owns the pool's state and the OPTIONS
// probes of the other members; the registrar asks it where a user's
// REGISTER belongs (redirect), the B2BUA which members to try for a user
// with no binding here (poolLocator), and onInvite whether an INVITE comes
// from a member (fromPool: its address and its signature).
type poolPart struct {
	cur    *pool.Pool // guarded by Server.mu; nil = one box
	cancel context.CancelFunc
	done   chan struct{}
}

// nextPool is the pool for cfg: old when its section did not change (its
// members' health goes on), a new one otherwise, nil for none.
func nextPool(old *pool.Pool, cfg Config) (*pool.Pool, error) {
	switch {
	case cfg.Pool == nil:
		return nil, nil
	case old != nil && reflect.DeepEqual(old.Config(), *cfg.Pool):
		return old, nil
	}
	return pool.New(*cfg.Pool)
}

// start probes the other members until stop (or ctx ends). Caller holds
// Server.mu.
func (pp *poolPart) start(ctx context.Context, s *Server) {
	if pp.cur == nil || ctx == nil {
		return
	}
	ctx, pp.cancel = context.WithCancel(ctx)
	pp.done = make(chan struct{})
	p, done := pp.cur, pp.done
	go func() {
		defer close(done)
		_ = p.Run(ctx, s.probe.Pinger(nil))
	}()
}

// stop ends the probes and waits for them. Caller holds Server.mu.
func (pp *poolPart) stop() {
	if pp.cancel != nil {
		pp.cancel()
		<-pp.done
		pp.cancel, pp.done = nil, nil
	}
}

// swap makes next the pool (probing it when the Server runs). Caller holds
// Server.mu.
func (pp *poolPart) swap(s *Server, next *pool.Pool) {
	if next == pp.cur {
		return
	}
	pp.stop()
	pp.cur = next
	pp.start(s.probe.Context(), s)
}

// redirect is the registrar's SetRedirect hook: when a user's home is
// another member, its URI and then its backup's (this box, often). A
// member that drains hands its own users over: to their backup.
func (s *Server) redirect(aor string) []string {
	var uris []string
	for _, m := range s.movedTo(aor) {
		uris = append(uris, memberURI(m.Target, ""))
	}
	return uris
}

// movedTo is where user's registration belongs instead of here, preferred
// first (none = here).
func (s *Server) movedTo(user string) []pool.Member {
	p := s.now.Load().pool
	if p == nil {
		return nil
	}
	draining, _ := s.Draining()
	m, away := p.Redirect(user)
	if !away {
		if !draining {
			return nil
		}
		b, ok := p.Backup(user)
		if !ok {
			return nil // no other member serves: stay here
		}
		return []pool.Member{b}
	}
	out := []pool.Member{m}
	if b, ok := p.Backup(user); ok && !(draining && b.Name == p.Self().Name) {
		out = append(out, b)
	}
	return out
}

// movedCall answers a new call while this member drains: 302 to where the
// registration of the user it is for goes (movedTo), its Request-URI kept,
// so the call is set up there instead of refused. The user is the callee
// of a trunk's call and the caller of a phone's: the member the phone now
// registers at places its calls. It reports whether it answered; when
// no other member serves (or the box does not drain), the B2BUA refuses
// the call with 503 and a Retry-After.
func (s *Server) movedCall(run *running, req *sip.Request, tx sip.ServerTransaction, user string) bool {
	if run.pool == nil {
		return false
	}
	if draining, _ := s.Draining(); !draining {
		return false
	}
	to := s.movedTo(user)
	if len(to) == 0 {
		return false
	}
	uris := make([]string, len(to))
	for i, m := range to {
		uris[i] = memberURI(m.Target, req.Recipient.User)
	}
	s.respond(run, tx, registrar.Redirect(req, sip.StatusMovedTemporarily, "Moved Temporarily", uris))
	return true
}

// memberURI is a member's SIP URI, as a 301 or 302 Contact names it, with
// user (none for a registrar's).
func memberURI(t siptarget.Target, user string) string {
	u := "sip:"
	if user != "" {
		u += user + "@"
	}
	u += t.HostPort()
	if t.Transport != siptarget.UDP {
		u += ";transport=" + string(t.Transport)
	}
	return u
}

// poolLocator adds the pool's members to the registrar's bindings.
type poolLocator struct {
	locator
	s *Server
}

func (l poolLocator) PoolContacts(ext string) []b2bua.Contact {
	p := l.s.now.Load().pool
	if p == nil {
		return nil
	}
	var out []b2bua.Contact
	for _, m := range p.Peers(ext) {
		u := sip.Uri{Scheme: "sip", User: ext, Host: m.Target.Host, Port: int(m.Target.Port)}
		out = append(out, b2bua.Contact{URI: u.String(), Transport: string(m.Target.Transport), Addr: m.Target.HostPort()})
	}
	return out
}

// signPool signs an INVITE to another member of p (the B2BUA's
// SignPool): the pool's HMAC over its Call-ID, From and To users and the
// time.
func signPool(p *pool.Pool, req *sip.Request) {
	if p == nil {
		return
	}
	callID, from, to := inviteIDs(req)
	req.AppendHeader(sip.NewHeader(pool.Header, pool.Sign(p.Config().Secret, callID, from, to, time.Now())))
}

func inviteIDs(req *sip.Request) (callID, from, to string) {
	if c := req.CallID(); c != nil {
		callID = c.Value()
	}
	if f := req.From(); f != nil {
		from = f.Address.User
	}
	if t := req.To(); t != nil {
		to = t.Address.User
	}
	return callID, from, to
}

// fromPool reports whether an initial INVITE comes from another member:
// from a member's address (the trust rule of trust.go) and signed with the
// pool's secret within its validity window. The address alone is never
// enough.
func (s *Server) fromPool(run *running, req *sip.Request) bool {
	p := run.pool
	if p == nil {
		return false
	}
	src, ok := sourceOf(req)
	if !ok {
		return false
	}
	tr, err := siptarget.ParseTransport(req.MessageData.Transport())
	if err != nil {
		return false
	}
	if _, ok := p.MemberAt(tr, src.String()); !ok {
		return false
	}
	h := req.GetHeader(pool.Header)
	if h == nil {
		return false
	}
	callID, from, to := inviteIDs(req)
	if err := pool.Verify(p.Config().Secret, h.Value(), callID, from, to, time.Now()); err != nil {
		s.log.Warn("pool: INVITE from a member's address refused", "source", src.String(), "err", err)
		return false
	}
	return true
}

// poolDecision routes a member's call: to the extension in its
// Request-URI, from this box's own bindings only.
func poolDecision(req *sip.Request) dialplan.Decision {
	ext := req.Recipient.User
	return dialplan.Decision{Number: ext, Target: ext, Route: dialplan.RouteLocal,
		Rule: b2bua.RuleFromPool, Explain: "call from a pool member to extension " + ext}
}

// PoolStatus is the pool as this member sees it.
type PoolStatus struct {
	Self    string              `json:"self"`
	Members []pool.MemberStatus `json:"members"`
	// HomedHere counts the registered users whose primary is this box;
	// ServedAsBackup those registered here whose primary is another member
	// (down, or back but within its hold).
	HomedHere      int `json:"homed_here"`
	ServedAsBackup int `json:"served_as_backup"`
}

// Pool is the registrar pool's status; nil when the box is not in a pool.
func (s *Server) Pool() *PoolStatus {
	p := s.now.Load().pool
	if p == nil {
		return nil
	}
	st := &PoolStatus{Self: p.Config().Self, Members: p.Members()}
	for _, aor := range s.reg.Present() {
		if order := p.Order(aor); len(order) > 0 && order[0].Name == st.Self {
			st.HomedHere++
		} else {
			st.ServedAsBackup++
		}
	}
	return st
}
