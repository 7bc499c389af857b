package upstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/siptarget"
)

// errNoTargets: the Trunk offered no target at all.
var errNoTargets = errors.New("no HQ targets")

// Redirects (RFC 3261 §8.1.3.4, §21.3): a REGISTER answered 301 or 302
// is sent again to the Contact of the answer, at most maxRedirects times
// in a row and never to a target this job already tried.
const maxRedirects = 5

var (
	errRedirectLoop     = errors.New("redirect loop")
	errTooManyRedirects = fmt.Errorf("more than %d redirects", maxRedirects)
	errNoRedirectTarget = errors.New("no usable Contact in the redirect")
)

// job is what one worker does for one user, snapshotted under the lock.
type job struct {
	set  *settings
	op   op
	user string
	// domain is the AOR's host; contact is the binding to withdraw
	// (opUnregister only: a register builds its contact per target).
	domain  string
	contact string
	// oldDomain and oldContact are the binding HQ still holds from
	// before (at prefer); if a register succeeds with another one, or at
	// another registrar, the old one may be withdrawn.
	oldDomain, oldContact string
	expires               int  // requested seconds
	raised                bool // expires raised after a 423
	callID, fromTag       string
	cseq                  uint32 // last used; each request increments it
	auth                  *authCache
	prefer                string   // the target HQ holds the binding at
	redirect              string   // a register goes here first (a 3xx sent the user there)
	redirectAlts          []string // the same 3xx's other Contacts, tried next when redirect fails
	gen, cfgGen           uint64
}

// result is the outcome of one job.
type result struct {
	code       int   // final status, 0 = none
	err        error // no final response (transport, timeout), or why not sent
	target     string
	via        string        // the Trunk target (or sticky redirect) the attempt chain began at
	redirected bool          // target was reached by a redirect: the user stays there
	moved      []target      // a 301/302's Contacts, best first
	alts       []string      // redirected: the other Contacts of the 3xx that sent it to target
	contact    string        // the binding registered (2xx to a register)
	granted    time.Duration // its lifetime
	retryAfter time.Duration
}

func (r result) ok() bool { return r.code >= 200 && r.code < 300 }

// exec runs job j. A register that a 3xx sent to another registrar
// starts there; if that registrar fails (by the retry rule, or an error)
// the user is back to the normal order. The normal order is the user's
// own with a Pool (sticky, see stickyPlan), else the Trunk's; each
// target is tried in turn, moving to the next one only after 408, 503,
// 504 or no response (docs/design.md §1, the same rule as for calls:
// health.Retryable). Each attempt's outcome at a Trunk target is
// reported to the Trunk unless ctx ended (Pause or stop), which says
// nothing about the target; redirect targets are not the Trunk's and are
// not reported.
func (a *Agent) exec(ctx context.Context, j *job) result {
	p, err := planFor(ctx, j.set, aorOf(j.user, j.domain))
	if err != nil {
		return result{err: err}
	}
	names := p.attempts
	if j.op == opUnregister && j.prefer != "" {
		// A withdrawal goes where the binding is.
		names = append([]string{j.prefer}, slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == j.prefer })...)
	}
	tried := map[string]bool{}  // canonical targets sent to in this job
	failed := map[string]bool{} // target names that failed in this job
	r := result{err: errNoTargets}
	if j.op == opRegister && j.redirect != "" {
		// Where a 3xx sent the user, then the other Contacts of that 3xx
		// (a backup registrar), before HQ's own targets again.
		for _, name := range append([]string{j.redirect}, j.redirectAlts...) {
			if g, err := siptarget.Parse(name, j.set.transport); err == nil && tried[g.String()] {
				continue
			}
			r = a.chain(ctx, j, name, true, tried)
			if ctx.Err() != nil {
				return r
			}
			if r.ok() {
				if name != j.redirect {
					r.alts = slices.DeleteFunc(slices.Clone(j.redirectAlts), func(n string) bool { return n == name })
				}
				a.afterRegister(ctx, j, p, r, failed)
				return r
			}
			if !health.Retryable(r.code, r.err) {
				return r
			}
			failed[name], failed[r.target] = true, true
			a.log.Info("upstream: redirected registrar failed", "user", j.user, "target", r.target, "code", r.code, "err", r.err)
		}
	}
	for _, name := range names {
		if g, err := siptarget.Parse(name, j.set.transport); err == nil && tried[g.String()] {
			continue // a redirect of this job went there already
		}
		// A withdrawal at a registrar a redirect sent the user to is not
		// the Trunk's to hear about.
		r = a.chain(ctx, j, name, name == j.redirect, tried)
		if ctx.Err() != nil {
			return r
		}
		if r.ok() {
			if j.op == opRegister {
				a.afterRegister(ctx, j, p, r, failed)
			}
			return r
		}
		failed[name], failed[r.target] = true, true
		if !health.Retryable(r.code, r.err) {
			return r
		}
	}
	return r
}

// chain sends j to name and follows 301/302 redirects of a register
// from there. Only the first attempt is reported to the Trunk, and only
// when name is the Trunk's (not sticky).
func (a *Agent) chain(ctx context.Context, j *job, name string, sticky bool, tried map[string]bool) result {
	t, err := parseTarget(name, j.set.transport)
	if err != nil {
		return result{err: err, target: name, via: name}
	}
	redirected := sticky
	var alts []target // the last 3xx's Contacts not tried yet
	for hops := 0; ; hops++ {
		tried[t.key] = true
		r := a.attempt(ctx, j, t, j.op)
		r.via, r.redirected = name, redirected
		if ctx.Err() != nil {
			return r
		}
		if hops == 0 && !sticky {
			j.set.trunk.Report(name, r.code, r.err)
		}
		if hops > 0 && !r.ok() && health.Retryable(r.code, r.err) {
			// The registrar a 3xx named failed: its next Contact (the
			// backup) at once.
			if i := slices.IndexFunc(alts, func(m target) bool { return !tried[m.key] }); i >= 0 {
				a.log.Debug("upstream: redirect target failed, trying the next Contact", "user", j.user, "from", t.name, "to", alts[i].name)
				t, alts = alts[i], alts[i+1:]
				continue
			}
		}
		if r.ok() {
			for _, m := range alts {
				if !tried[m.key] {
					r.alts = append(r.alts, m.name)
				}
			}
		}
		if j.op != opRegister || (r.code != sip.StatusMovedPermanently && r.code != sip.StatusMovedTemporarily) {
			return r
		}
		fail := func(err error) result {
			return result{err: fmt.Errorf("%d from %s: %w", r.code, t.name, err), target: t.name, via: name, redirected: redirected}
		}
		if hops == maxRedirects {
			return fail(errTooManyRedirects)
		}
		if len(r.moved) == 0 {
			return fail(errNoRedirectTarget)
		}
		next := -1
		for i, m := range r.moved {
			if !tried[m.key] {
				next = i
				break
			}
		}
		if next < 0 {
			return fail(fmt.Errorf("%w: %s was tried already", errRedirectLoop, r.moved[0].name))
		}
		a.log.Debug("upstream: redirected", "user", j.user, "from", t.name, "to", r.moved[next].name, "code", r.code)
		t, alts, redirected = r.moved[next], r.moved[next+1:], true
	}
}

// parseTarget reads a Trunk target or a stored redirect target.
func parseTarget(name string, def siptarget.Transport) (target, error) {
	g, err := siptarget.Parse(name, def)
	if err != nil {
		return target{}, err
	}
	return target{name: name, key: g.String(), transport: g.Transport.SIPName(), dest: g.HostPort()}, nil
}

// afterRegister withdraws what HQ still holds from before a register
// that succeeded (best effort: if it fails, the old binding expires by
// itself):
//   - at the same registrar, a binding with another contact or domain
//     (a new WAN address, a new site domain);
//   - at another registrar, the binding left on a backup when the user
//     came back to a registrar it prefers (its recovered primary). Not
//     at a registrar that failed in this job, is unhealthy, or ranks
//     before the new one (the user left it because it failed): the
//     binding there expires, or is refreshed when the user returns.
func (a *Agent) afterRegister(ctx context.Context, j *job, p plan, r result, failed map[string]bool) {
	if j.oldContact == "" {
		return
	}
	prev := j.prefer
	if prev == "" || prev == r.target {
		if j.oldContact != r.contact || j.oldDomain != j.domain {
			if t, err := parseTarget(r.target, j.set.transport); err == nil {
				a.withdrawOld(ctx, j, t)
			}
		}
		return
	}
	if failed[prev] || !p.eligible[prev] || r.redirected || !p.before(r.via, prev) {
		return
	}
	t, err := parseTarget(prev, j.set.transport)
	if err != nil {
		return
	}
	a.log.Info("upstream: back at the preferred registrar, withdrawing the binding left on a backup",
		"user", j.user, "registrar", r.target, "backup", prev)
	a.withdrawOld(ctx, j, t)
}

// withdrawOld removes the binding HQ holds from before (oldContact,
// oldDomain) at t.
func (a *Agent) withdrawOld(ctx context.Context, j *job, t target) {
	old := *j
	old.domain, old.contact = j.oldDomain, j.oldContact
	r := a.attempt(ctx, &old, t, opUnregister)
	j.cseq = old.cseq
	a.log.Debug("upstream: old binding withdrawn", "user", j.user, "target", t.name, "contact", j.oldContact, "code", r.code, "err", r.err)
}

// attempt sends one REGISTER (op) to one target within the attempt
// timeout, answering up to two digest challenges (the second only when
// HQ says the nonce was stale) and one 423 Interval Too Brief.
func (a *Agent) attempt(ctx context.Context, j *job, t target, o op) result {
	s := j.set
	var contact sip.Uri
	expires := 0
	if o == opRegister {
		contact = contactURI(s, j.user, t.transport)
		expires = j.expires
	} else if err := sip.ParseUri(j.contact, &contact); err != nil {
		return result{err: fmt.Errorf("stored contact %q: %w", j.contact, err)}
	}
	actx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	if c, ok := s.trunk.(TLSRedirector); ok && t.transport == "TLS" && !isIPTarget(t.name) {
		dest, err := c.ConnectRedirect(actx, t.dest)
		if err != nil {
			return result{err: err, target: t.name}
		}
		t.dest = dest
	} else if c, ok := s.trunk.(Connector); ok {
		if err := c.Connect(actx, t.name); err != nil {
			return result{err: err, target: t.name}
		}
	}
	req := a.request(j, t, &contact, expires)
	if err := j.auth.authorize(req, t.name, s.username, s.password); err != nil {
		return result{err: err, target: t.name}
	}
	answered, raised := 0, false
	for {
		res, err := a.do.Do(actx, req)
		if err != nil {
			return result{err: err, target: t.name}
		}
		code := res.StatusCode
		switch {
		case code == sip.StatusUnauthorized || code == sip.StatusProxyAuthRequired:
			answered++
			req = a.request(j, t, &contact, expires)
			stale, err := j.auth.challenge(req, res, t.name, s.username, s.password)
			if err != nil || answered > 2 || (answered == 2 && !stale) {
				// Wrong credentials, or a challenge we cannot answer:
				// a final answer, not a reason to try another target.
				j.auth.forget()
				if err == nil {
					err = fmt.Errorf("%d: credentials refused", code)
				}
				return result{code: code, err: err, target: t.name}
			}
		case code == 423 && !raised && o == opRegister: // RFC 3261 §10.2.8
			m := headerSeconds(res, "Min-Expires")
			if m <= expires {
				return result{code: code, target: t.name}
			}
			expires, j.expires, j.raised, raised = m, m, true, true
			req = a.request(j, t, &contact, expires)
			if err := j.auth.authorize(req, t.name, s.username, s.password); err != nil {
				return result{err: err, target: t.name}
			}
		case code >= 200 && code < 300:
			return result{code: code, target: t.name, contact: contact.String(), granted: granted(res, &contact, expires)}
		default:
			r := result{code: code, target: t.name, retryAfter: time.Duration(headerSeconds(res, "Retry-After")) * time.Second}
			if code == sip.StatusMovedPermanently || code == sip.StatusMovedTemporarily {
				r.moved = movedTo(res, s.transport)
			}
			return r
		}
	}
}

// contactURI is the box's contact for user: sip:USER@ContactHost, with
// the transport named unless it is UDP (RFC 3261 §19.1.1).
func contactURI(s *settings, user, transport string) sip.Uri {
	u := sip.Uri{Scheme: "sip", User: user, Host: s.contactHost, Port: s.contactPort}
	if transport != "UDP" {
		u.UriParams.Add("transport", strings.ToLower(transport))
	}
	return u
}

// request builds a REGISTER of j's user to t (RFC 3261 §10.2): the
// Request-URI is the domain, To and From are the AOR, Call-ID stays and
// CSeq grows across requests. sipgo adds Via.
func (a *Agent) request(j *job, t target, contact *sip.Uri, expires int) *sip.Request {
	j.cseq++
	aor := sip.Uri{Scheme: "sip", User: j.user, Host: j.domain}
	req := sip.NewRequest(sip.REGISTER, sip.Uri{Scheme: "sip", Host: cmp.Or(j.set.registrar, j.domain)})
	req.SetTransport(t.transport)
	req.SetDestination(t.dest)
	if l := j.set.laddr; l != nil && t.transport == "UDP" {
		l.Copy(&req.Laddr) // leave from the box's listener, not an ephemeral socket
	}
	from := &sip.FromHeader{Address: aor}
	from.Params.Add("tag", j.fromTag)
	to := &sip.ToHeader{Address: aor}
	callID := sip.CallIDHeader(j.callID)
	cseq := &sip.CSeqHeader{SeqNo: j.cseq, MethodName: sip.REGISTER}
	maxFwd := sip.MaxForwardsHeader(70)
	exp := sip.ExpiresHeader(expires)
	req.AppendHeader(from)
	req.AppendHeader(to)
	req.AppendHeader(&callID)
	req.AppendHeader(cseq)
	req.AppendHeader(&maxFwd)
	req.AppendHeader(&sip.ContactHeader{Address: *contact.Clone()})
	req.AppendHeader(&exp)
	req.SetBody(nil)
	return req
}

// granted is the lifetime HQ gave our contact (RFC 3261 §10.2.4): its
// expires parameter in the 200, else the Expires header, else what we
// asked for.
func granted(res *sip.Response, contact *sip.Uri, requested int) time.Duration {
	for _, h := range res.GetHeaders("Contact") {
		var u sip.Uri
		var params sip.HeaderParams
		if c, ok := h.(*sip.ContactHeader); ok {
			u, params = c.Address, c.Params
		} else if _, err := sip.ParseAddressValue(h.Value(), &u, &params); err != nil {
			continue
		}
		if u.User != contact.User || !strings.EqualFold(u.Host, contact.Host) || u.Port != contact.Port {
			continue
		}
		if v, ok := params.Get("expires"); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return time.Duration(n) * time.Second
			}
		}
	}
	if n := headerSeconds(res, "Expires"); n > 0 {
		return time.Duration(n) * time.Second
	}
	return time.Duration(requested) * time.Second
}

// headerSeconds reads a delta-seconds header ("120", "120;duration=60",
// "120 (comment)"); 0 when absent or malformed.
func headerSeconds(res *sip.Response, name string) int {
	h := res.GetHeader(name)
	if h == nil {
		return 0
	}
	v := strings.TrimSpace(h.Value())
	if i := strings.IndexAny(v, " ;("); i >= 0 {
		v = v[:i]
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// movedTo reads the Contacts of a 301/302 as targets, highest q first
// (RFC 3261 §8.1.3.4; q defaults to 1, ties keep their order): a sips
// URI or transport=tls means TLS, transport=tcp TCP, else def (the
// transport of targets given without one); no port means the
// transport's default (5060, 5061 for TLS). A host name is sent to as
// is (sipgo looks up its A/AAAA records), except over TLS through a
// TLSRedirector. Contacts that are not SIP URIs are skipped.
func movedTo(res *sip.Response, def siptarget.Transport) []target {
	type moved struct {
		t target
		q float64
	}
	var ms []moved
	for _, h := range res.GetHeaders("Contact") {
		var u sip.Uri
		var params sip.HeaderParams
		if c, ok := h.(*sip.ContactHeader); ok {
			u, params = c.Address, c.Params
		} else if _, err := sip.ParseAddressValue(h.Value(), &u, &params); err != nil {
			continue
		}
		if u.Wildcard || u.Host == "" || (u.Scheme != "sip" && u.Scheme != "sips") {
			continue
		}
		tr := def
		if tp, ok := u.UriParams.Get("transport"); ok {
			p, err := siptarget.ParseTransport(strings.ToLower(tp))
			if err != nil {
				continue
			}
			tr = p
		}
		if u.Scheme == "sips" {
			tr = siptarget.TLS
		}
		port := u.Port
		if port == 0 {
			port = int(tr.DefaultPort())
		}
		host := u.Host
		if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
			host = "[" + host + "]"
		}
		g, err := siptarget.Parse(string(tr)+":"+host+":"+strconv.Itoa(port), tr)
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params.Get("q"); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		name := g.String()
		ms = append(ms, moved{target{name: name, key: name, transport: g.Transport.SIPName(), dest: g.HostPort()}, q})
	}
	slices.SortStableFunc(ms, func(x, y moved) int {
		switch {
		case x.q > y.q:
			return -1
		case x.q < y.q:
			return 1
		}
		return 0
	})
	out := make([]target, len(ms))
	for i, m := range ms {
		out[i] = m.t
	}
	return out
}

// isIPTarget reports whether a target ("tls:198.18.1.20:5061") names an
// IP literal.
func isIPTarget(name string) bool {
	g, err := siptarget.Parse(name, siptarget.UDP)
	return err == nil && g.IsIP()
}
