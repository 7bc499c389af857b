package upstream

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/digest"
	"github.com/outpost/outpost/gateway/siptest"
)

// Test identities.
const (
	hqRealm   = "hq.test"
	trunkUser = "branch7"
	trunkPass = "s3cret"
	domain    = "branch7.example"
)

// rec is one REGISTER as the HQ stand-in saw it, and what it answered.
type rec struct {
	At      time.Time
	HQ      string // the stand-in's name
	User    string // To user
	Domain  string // To host
	CallID  string
	CSeq    uint32
	Expires int
	Contact string
	Authz   string // Authorization username, "" = none
	NC      string
	Code    int
	Source  string // where it came from ("ip:port"), loopback only
}

// hq is an HQ registrar stand-in: it challenges with 401 and checks the
// answer with gateway/digest (nonce count replay protection included),
// and records every REGISTER. Its behaviour knobs are set before use or
// under mu.
type hq struct {
	name string
	auth *digest.Authenticator

	mu         sync.Mutex
	recs       []rec
	status     int    // answer every request with this (e.g. 503); 0 = behave
	retryAfter int    // Retry-After on a forced status
	silent     bool   // never answer (the fake network only)
	minExpires int    // 423 below this
	redirect   string // answer 302 with these Contacts, comma-separated (a Director sending users to their pool)
	ch         chan rec
}

func newHQ(t *testing.T, name string, ttl time.Duration) *hq {
	t.Helper()
	a, err := digest.New(digest.Config{Realm: hqRealm, NonceTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return &hq{name: name, auth: a, ch: make(chan rec, 4096)}
}

func (h *hq) set(f func(h *hq)) { h.mu.Lock(); f(h); h.mu.Unlock() }

// records returns a copy of what h saw.
func (h *hq) records() []rec {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]rec(nil), h.recs...)
}

func lookup(user string, alg digest.Algorithm) (string, bool) {
	if user != trunkUser {
		return "", false
	}
	return digest.HA1(alg, trunkUser, hqRealm, trunkPass), true
}

// handle answers one REGISTER.
func (h *hq) handle(req *sip.Request) *sip.Response {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := rec{At: time.Now(), HQ: h.name, Source: req.Source()}
	if to := req.To(); to != nil {
		r.User, r.Domain = to.Address.User, to.Address.Host
	}
	if c := req.CallID(); c != nil {
		r.CallID = c.Value()
	}
	if c := req.CSeq(); c != nil {
		r.CSeq = c.SeqNo
	}
	if e := req.GetHeader("Expires"); e != nil {
		r.Expires, _ = strconv.Atoi(e.Value())
	}
	if c := req.Contact(); c != nil {
		r.Contact = c.Address.String()
	}
	res := h.answer(req, &r)
	r.Code = res.StatusCode
	h.recs = append(h.recs, r)
	select {
	case h.ch <- r:
	default:
	}
	return res
}

func (h *hq) answer(req *sip.Request, r *rec) *sip.Response {
	if h.redirect != "" {
		res := sip.NewResponseFromRequest(req, 302, "Moved Temporarily", nil)
		for _, c := range strings.Split(h.redirect, ",") {
			res.AppendHeader(sip.NewHeader("Contact", strings.TrimSpace(c)))
		}
		return res
	}
	if h.status != 0 {
		res := sip.NewResponseFromRequest(req, h.status, "Forced", nil)
		if h.retryAfter > 0 {
			res.AppendHeader(sip.NewHeader("Retry-After", strconv.Itoa(h.retryAfter)))
		}
		return res
	}
	challenge := func(stale bool) *sip.Response {
		res := sip.NewResponseFromRequest(req, 401, "Unauthorized", nil)
		for _, c := range h.auth.Challenges(stale) {
			res.AppendHeader(sip.NewHeader("WWW-Authenticate", c))
		}
		return res
	}
	az := req.GetHeader("Authorization")
	if az == nil {
		return challenge(false)
	}
	creds, err := digest.ParseCredentials(az.Value())
	if err != nil {
		return sip.NewResponseFromRequest(req, 400, "Bad Authorization", nil)
	}
	r.Authz, r.NC = creds.Username, creds.NC
	switch res := h.auth.Verify("REGISTER", &creds, lookup); res {
	case digest.OK:
	case digest.Stale:
		return challenge(true)
	default:
		return challenge(false)
	}
	if h.minExpires > 0 && r.Expires > 0 && r.Expires < h.minExpires {
		res := sip.NewResponseFromRequest(req, 423, "Interval Too Brief", nil)
		res.AppendHeader(sip.NewHeader("Min-Expires", strconv.Itoa(h.minExpires)))
		return res
	}
	res := sip.NewResponseFromRequest(req, 200, "OK", nil)
	if c := req.Contact(); c != nil && r.Expires > 0 {
		res.AppendHeader(sip.NewHeader("Contact", fmt.Sprintf("<%s>;expires=%d", c.Address.String(), r.Expires)))
	}
	return res
}

// fakeNet delivers requests to in-memory HQs by destination, through a
// wire round trip so that what the Agent builds must be valid SIP.
type fakeNet map[string]*hq

func (n fakeNet) Do(ctx context.Context, req *sip.Request) (*sip.Response, error) {
	h := n[req.Destination()]
	if h == nil {
		return nil, fmt.Errorf("no route to %s", req.Destination())
	}
	h.mu.Lock()
	silent := h.silent
	h.mu.Unlock()
	if silent {
		h.handleSilent(req)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	wire := req.Clone()
	via := &sip.ViaHeader{ProtocolName: "SIP", ProtocolVersion: "2.0", Transport: req.Transport(), Host: "198.18.0.2", Port: 5060}
	via.Params.Add("branch", sip.GenerateBranch())
	wire.PrependHeader(via)
	parsed, err := siptest.RoundTrip(wire)
	if err != nil {
		return nil, err
	}
	return siptest.RoundTrip(h.handle(parsed))
}

// handleSilent records a request that is never answered.
func (h *hq) handleSilent(req *sip.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := rec{At: time.Now(), HQ: h.name, User: req.To().Address.User}
	h.recs = append(h.recs, r)
}

// trunk is a static Trunk that records reports.
type trunk struct {
	targets []string
	mu      sync.Mutex
	reports []string // "target status"
}

func (t *trunk) Targets(context.Context) ([]string, error) { return t.targets, nil }
func (t *trunk) Report(target string, status int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := fmt.Sprintf("%s %d", target, status)
	if err != nil && status == 0 {
		s += " err"
	}
	t.reports = append(t.reports, s)
}
func (t *trunk) got() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.reports, "; ")
}

// pool is a Pool of test registrars: their priority and health are set
// by the test, and a failure reported by the Agent (5xx or no answer)
// makes a target ineligible, as health.Tracker blocks it.
type pool struct {
	mu      sync.Mutex
	cands   []Candidate
	reports []string
}

func newPool(targets ...string) *pool {
	p := &pool{}
	for _, t := range targets {
		p.cands = append(p.cands, Candidate{Target: t, Eligible: true})
	}
	return p
}

func (p *pool) Candidates(context.Context) ([]Candidate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Candidate(nil), p.cands...), nil
}

func (p *pool) Targets(context.Context) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, c := range p.cands {
		if c.Eligible {
			out = append(out, c.Target)
		}
	}
	return out, nil
}

func (p *pool) Report(target string, status int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reports = append(p.reports, fmt.Sprintf("%s %d", target, status))
	if status >= 500 || (status == 0 && err != nil) {
		p.setLocked(target, false)
	}
}

// set makes target healthy or not (its probes' verdict).
func (p *pool) set(target string, eligible bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLocked(target, eligible)
}

func (p *pool) setLocked(target string, eligible bool) {
	for i := range p.cands {
		if p.cands[i].Target == target {
			p.cands[i].Eligible = eligible
		}
	}
}
