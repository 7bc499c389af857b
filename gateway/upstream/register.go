package upstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/siptarget"
)

// errNoTargets: the Trunk offered no target at all.
var errNoTargets = errors.New("no HQ targets")

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
	// before; if a register succeeds with another one, the old one is
	// withdrawn.
	oldDomain, oldContact string
	expires               int  // requested seconds
	raised                bool // expires raised after a 423
	callID, fromTag       string
	cseq                  uint32 // last used; each request increments it
	auth                  *authCache
	prefer                string // the target HQ holds the binding at
	gen, cfgGen           uint64
}

// result is the outcome of one job.
type result struct {
	code       int   // final status, 0 = none
	err        error // no final response (transport, timeout), or why not sent
	target     string
	contact    string        // the binding registered (2xx to a register)
	granted    time.Duration // its lifetime
	retryAfter time.Duration
}

func (r result) ok() bool { return r.code >= 200 && r.code < 300 }

// exec runs job j: the targets in the Trunk's order, moving to the next
// one only after 408, 503, 504 or no response (DESIGN §1, the same rule
// as for calls: health.Retryable). Each attempt's outcome is reported to
// the Trunk unless ctx ended (Pause or stop), which says nothing about
// the target.
func (a *Agent) exec(ctx context.Context, j *job) result {
	names, err := a.targets(ctx, j)
	if err != nil {
		return result{err: err}
	}
	r := result{err: errNoTargets}
	for _, name := range names {
		g, err := siptarget.Parse(name, j.set.transport)
		if err != nil {
			r = result{err: err}
			continue
		}
		t := target{name: name, transport: g.Transport.SIPName(), dest: g.HostPort()}
		r = a.attempt(ctx, j, t, j.op)
		if ctx.Err() != nil {
			return r
		}
		j.set.trunk.Report(name, r.code, r.err)
		if r.ok() {
			if j.op == opRegister && j.oldContact != "" && (j.oldContact != r.contact || j.oldDomain != j.domain) {
				a.withdrawOld(ctx, j, t)
			}
			return r
		}
		if !health.Retryable(r.code, r.err) {
			return r
		}
	}
	return r
}

// targets asks the Trunk (bounded by the attempt timeout: it may resolve
// DNS) and puts the target that holds the binding first for a withdrawal.
func (a *Agent) targets(ctx context.Context, j *job) ([]string, error) {
	tctx, cancel := context.WithTimeout(ctx, j.set.timeout)
	defer cancel()
	names, err := j.set.trunk.Targets(tctx)
	if err != nil {
		return nil, fmt.Errorf("HQ targets: %w", err)
	}
	if j.op == opUnregister && j.prefer != "" {
		out := []string{j.prefer}
		for _, n := range names {
			if n != j.prefer {
				out = append(out, n)
			}
		}
		names = out
	}
	return names, nil
}

// withdrawOld removes the binding HQ holds from before a contact or
// domain change, at the target that just took the new one. Best effort:
// if it fails the old binding expires by itself.
func (a *Agent) withdrawOld(ctx context.Context, j *job, t target) {
	old := *j
	old.domain, old.contact = j.oldDomain, j.oldContact
	r := a.attempt(ctx, &old, t, opUnregister)
	j.cseq = old.cseq
	a.log.Debug("upstream: old binding withdrawn", "user", j.user, "contact", j.oldContact, "code", r.code, "err", r.err)
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
			return result{code: code, target: t.name, retryAfter: time.Duration(headerSeconds(res, "Retry-After")) * time.Second}
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
	req := sip.NewRequest(sip.REGISTER, sip.Uri{Scheme: "sip", Host: j.domain})
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
