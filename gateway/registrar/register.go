package registrar

import (
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/digest"
)

// HandleRegister processes one REGISTER (RFC 3261 §10.3) that arrived on
// the listener named local ("udp:127.0.0.1:5060") and returns the response
// to send. It never panics on malformed input; it answers 400 instead.
func (r *Registrar) HandleRegister(req *sip.Request, local string) *sip.Response {
	st := r.st.Load()
	to := req.To()
	if to == nil || req.CallID() == nil || req.CSeq() == nil {
		return reply(req, sip.StatusBadRequest, "Missing To, Call-ID or CSeq")
	}
	// §10.3 step 3: the AOR is the To URI; the box is the authority for
	// whatever host the phone put there, so only the user part matters.
	aor := to.Address.User
	if aor == "" {
		return reply(req, sip.StatusBadRequest, "To has no user part")
	}

	h := scanHeaders(req)
	if h.bad != "" {
		return reply(req, sip.StatusBadRequest, h.bad)
	}

	// §10.3 step 2: authenticate. A request without credentials is a new
	// registration attempt: it passes the storm guard, then gets challenged.
	if h.authz == "" && st.storm != nil && !st.storm.allow() {
		r.stats.stormRefused.Add(1)
		return r.tooBusy(req, st)
	}
	if msr := msrHeaders(req, st.cfg.MSR); msr != nil {
		return r.handleMSR(req, st, &h, msr)
	}
	// A registrar pool's member that is not the user's home redirects
	// it there (redirect.go).
	home := r.redirectFor(aor)
	if len(home) > 0 && h.authz == "" && len(r.tbl.lookup(aor, r.now())) == 0 {
		return r.moved(req, home)
	}
	if h.authz == "" {
		return r.challenge(req, st, false, false)
	}
	if res := r.verify(req, st, h.authz, aor, false); res != nil {
		return res
	}
	if len(home) > 0 {
		return r.handOver(req, aor, home)
	}
	return r.update(req, st, &h, aor, local)
}

// registerHeaders are the headers the registrar reads, gathered in one pass
// (sipgo's GetHeader lowercases every header name on every call, which
// showed up as the registrar's largest cost under load).
type registerHeaders struct {
	authz     string
	expires   int // -1 = no Expires header
	userAgent string
	contacts  []*sip.ContactHeader
	bad       string // why the request is malformed, "" when it is not
}

func scanHeaders(req *sip.Request) registerHeaders {
	h := registerHeaders{expires: -1}
	for _, hdr := range req.Headers() {
		if c, ok := hdr.(*sip.ContactHeader); ok {
			h.contacts = append(h.contacts, c)
			continue
		}
		name := hdr.Name()
		switch name { // what the registrar does not read, as typed headers and phones name it
		case "Via", "From", "To", "Call-ID", "CSeq", "Max-Forwards", "Content-Length", "Allow", "Supported":
			continue
		}
		switch {
		case strings.EqualFold(name, "Authorization"):
			h.authz = hdr.Value()
		case strings.EqualFold(name, "Expires"):
			v, err := strconv.ParseUint(strings.TrimSpace(hdr.Value()), 10, 32)
			if err != nil {
				h.bad = "Bad Expires"
			}
			h.expires = int(min(v, 1<<31-1))
		case strings.EqualFold(name, "User-Agent"):
			h.userAgent = hdr.Value()
		case strings.EqualFold(name, "Contact"), strings.EqualFold(name, "m"):
			h.bad = "Bad Contact" // a Contact sipgo could not parse
		}
	}
	return h
}

// verify checks the credentials authz of a request for user aor; nil means
// authenticated, otherwise the answer to send (a fresh or stale challenge,
// 403, or 400). proxy selects 407/Proxy-Authenticate for calls.
func (r *Registrar) verify(req *sip.Request, st *state, authz, aor string, proxy bool) *sip.Response {
	return r.verifyAs(req, st, authz, aor, st.users, proxy)
}

// verifyAs is verify against the given accounts (the users, or the MSR
// account). The order of the checks is the security rule of the package
// doc: nothing anyone can send without the password is charged to a real
// user's budget, and credentials that verify are accepted whatever any
// budget says.
func (r *Registrar) verifyAs(req *sip.Request, st *state, authz, aor string, users map[string]User, proxy bool) *sip.Response {
	creds, err := digest.ParseCredentials(authz)
	if err != nil {
		return reply(req, sip.StatusBadRequest, "Malformed Authorization")
	}
	srcIP := sourceIP(req)
	// §10.3 step 4: the authenticated user must be allowed to change this
	// AOR (or, for a call, be the caller it claims); on the box each user
	// owns exactly its own extension. A name that is no user, or not this
	// AOR's, guesses at nobody's password: it spends the source's budget
	// for strangers, never a user's.
	if _, known := users[creds.Username]; !known || creds.Username != aor {
		why := "unknown user"
		if known {
			why = "username does not match AOR"
		}
		return r.authFailed(req, r.strangers, srcIP, srcIP, aor, why, func() *sip.Response {
			return reply(req, sip.StatusForbidden, "Forbidden")
		})
	}
	// RFC 7616 §3.4.6 (RFC 2617 §3.2.2.5): the digest-uri must designate
	// the Request-URI's resource, else credentials computed for one
	// request (a call to 1002) would authorize another (a call to a
	// premium number). A mismatch is a broken or altered request, not a
	// password guess: 400, as the RFCs suggest, and no budget spent.
	if !sameResource(creds.URI, &req.Recipient) {
		return reply(req, sip.StatusBadRequest, "Authorization uri Does Not Match Request-URI")
	}
	key := srcIP + "|" + creds.Username
	if creds.QOP == "" && !st.cfg.AllowNoQop {
		// RFC 2069 style (no cnonce, no nonce count: replayable while the
		// nonce lives) is refused unless allowed: a failed authentication,
		// re-challenged (the challenge offers qop="auth"). Over a nonce the
		// box never issued it is not even that (see below).
		if !st.auth.Issued(&creds) {
			return r.challenge(req, st, true, proxy)
		}
		return r.authFailed(req, r.fails, key, srcIP, aor, "no qop (RFC 2069 response refused)", func() *sip.Response {
			return r.challenge(req, st, false, proxy)
		})
	}
	lookup := func(user string, alg digest.Algorithm) (string, bool) {
		u, ok := users[user]
		if !ok {
			return "", false
		}
		if alg == digest.SHA256 {
			return u.HA1SHA256, u.HA1SHA256 != ""
		}
		return u.HA1MD5, u.HA1MD5 != ""
	}
	switch res := st.auth.Verify(string(req.Method), &creds, lookup); res {
	case digest.OK:
	case digest.Stale:
		return r.challenge(req, st, true, proxy)
	case digest.Replay, digest.WrongRealm, digest.UnsupportedAlgorithm:
		// Not a guess at the password: ask again with a fresh nonce.
		return r.challenge(req, st, false, proxy)
	case digest.Malformed:
		return reply(req, sip.StatusBadRequest, "Malformed Authorization")
	default: // BadResponse, UnknownUser (no HA1 for the algorithm)
		if res == digest.BadResponse && !st.auth.Issued(&creds) {
			// A nonce the box never issued: anyone can make one up, so it
			// is no guess at the user's password and is not charged to
			// it. Answered as a correct response over such a nonce is
			// (Verify's Stale: a nonce from before a restart): a fresh
			// challenge with stale=true (RFC 7616 §3.3, "the nonce is
			// invalid"). Both answers being the same, a made-up nonce
			// tells a guesser nothing about the password.
			r.log.Debug("authentication over a nonce this box never issued", "source", srcIP, "aor", aor)
			return r.challenge(req, st, true, proxy)
		}
		return r.authFailed(req, r.fails, key, srcIP, aor, res.String(), func() *sip.Response {
			return reply(req, sip.StatusForbidden, "Forbidden")
		})
	}
	return nil
}

// sameResource reports whether the digest-uri designates the Request-URI's
// resource on this box: a SIP or SIPS URI of the same scheme, and, when the
// digest-uri has a user part, the same user. The user (extension, dialled
// number) is what tells one request's resource from another's here: the box
// answers for whatever host a phone puts in its URIs (see HandleRegister),
// and clients differ in the host part they sign (phones copy the
// Request-URI; SIPp signs "sip:BOX-IP:PORT" without a user, for every
// request). So host, port and parameters are not compared, and a
// digest-uri without a user is taken to name the box. What this refuses is
// the substitution that matters: credentials computed for
// "INVITE sip:1002@box" presented with "INVITE sip:900…@box".
func sameResource(digestURI string, ruri *sip.Uri) bool {
	var u sip.Uri
	if err := sip.ParseUri(digestURI, &u); err != nil || u.Wildcard {
		return false
	}
	if u.Scheme != "sip" && u.Scheme != "sips" {
		return false
	}
	return strings.EqualFold(u.Scheme, ruri.Scheme) && (u.User == "" || u.User == ruri.User)
}

// AuthorizeCall authenticates a call from a local user (RFC 3261 §22.3:
// 407 with Proxy-Authenticate, answered with Proxy-Authorization). It
// returns the caller's extension, or the response to send instead. The
// caller must authenticate as the user in its From header, so a phone
// cannot call as someone else; failures count against the same budgets as
// failed registrations (source and user; source for unknown names).
func (r *Registrar) AuthorizeCall(req *sip.Request) (string, *sip.Response) {
	st := r.st.Load()
	from := req.From()
	if from == nil || from.Address.User == "" {
		return "", reply(req, sip.StatusBadRequest, "From has no user part")
	}
	var authz string
	for _, h := range req.Headers() {
		if strings.EqualFold(h.Name(), "Proxy-Authorization") {
			authz = h.Value()
			break
		}
	}
	if authz == "" {
		return "", r.challenge(req, st, false, true)
	}
	if res := r.verify(req, st, authz, from.Address.User, true); res != nil {
		return "", res
	}
	return from.Address.User, nil
}

// authFailed counts a failed authentication against key in lim (a source
// and user in r.fails, a source in r.strangers) and returns the answer:
// answer() while the key has budget left, 503 with Retry-After once it is
// spent. Only failures reach here, so the throttle never refuses
// credentials that verify; it tells a client that keeps failing to slow
// down. The step into the blocked state is logged once per episode.
func (r *Registrar) authFailed(req *sip.Request, lim *failLimiter, key, srcIP, aor, why string, answer func() *sip.Response) *sip.Response {
	r.stats.authFailures.Add(1)
	if lim.blocked(key) {
		r.stats.authBlocked.Add(1)
		res := reply(req, sip.StatusServiceUnavailable, "Too Many Failed Attempts")
		res.AppendHeader(sip.NewHeader("Retry-After", strconv.Itoa(lim.retryAfter())))
		return res
	}
	if lim.fail(key) {
		scope := "this user from this source"
		if lim == r.strangers {
			scope = "unknown user names from this source"
		}
		r.log.Warn("authentication failures over limit: failed attempts of "+scope+" are answered 503 until the budget refills (credentials that verify are still accepted)",
			"source", srcIP, "aor", aor, "reason", why, "limit_per_min", r.st.Load().cfg.authFailLimit())
	} else {
		r.log.Info("authentication failed", "source", srcIP, "aor", aor, "reason", why)
	}
	return answer()
}

// challenge answers 401 with WWW-Authenticate, or for a call (proxy) 407
// with Proxy-Authenticate.
func (r *Registrar) challenge(req *sip.Request, st *state, stale, proxy bool) *sip.Response {
	r.stats.challenges.Add(1)
	code, reason, hdr := sip.StatusUnauthorized, "Unauthorized", "WWW-Authenticate"
	if proxy {
		code, reason, hdr = sip.StatusProxyAuthRequired, "Proxy Authentication Required", "Proxy-Authenticate"
	}
	res := reply(req, code, reason)
	for _, c := range st.auth.Challenges(stale) {
		res.AppendHeader(sip.NewHeader(hdr, c))
	}
	return res
}

// tooBusy answers the storm guard's 503. The jitter spreads the retries of
// phones that all rebooted together over the base interval again.
func (r *Registrar) tooBusy(req *sip.Request, st *state) *sip.Response {
	base := int(st.cfg.retryAfter() / time.Second)
	if base < 1 {
		base = 1
	}
	res := reply(req, sip.StatusServiceUnavailable, "Registration Storm, Retry Later")
	res.AppendHeader(sip.NewHeader("Retry-After", strconv.Itoa(base+rand.IntN(base+1))))
	return res
}

// contactUpdate is one Contact of the request, resolved against the table.
type contactUpdate struct {
	b       Binding
	expires int
}

// update applies the Contacts of an authenticated REGISTER: §10.3 steps 6–8.
func (r *Registrar) update(req *sip.Request, st *state, h *registerHeaders, aor, local string) *sip.Response {
	now := r.now()
	callID := req.CallID().Value()
	cseq := req.CSeq().SeqNo
	hdrExpires, contacts := h.expires, h.contacts

	// Step 6: "Contact: *" removes every binding, only with Expires: 0 and alone.
	for _, c := range contacts {
		if c.Address.Wildcard {
			if len(contacts) != 1 || hdrExpires != 0 {
				return reply(req, sip.StatusBadRequest, "Wildcard Contact needs Expires: 0 and no other Contact")
			}
			return r.removeAll(req, aor, callID, cseq)
		}
	}

	outbound, bad := outboundRequest(req, contacts)
	if bad != "" {
		return reply(req, sip.StatusBadRequest, bad)
	}
	minExp, maxExp := st.cfg.minExpires(), st.cfg.maxExpires()
	aor = strings.Clone(aor) // also the table's key
	callIDCopy, userAgent := strings.Clone(callID), strings.Clone(h.userAgent)
	var upsBuf [2]contactUpdate // one Contact is the usual case: no allocation
	ups := upsBuf[:0]
	for _, c := range contacts {
		exp := hdrExpires
		if v, ok := c.Params.Get("expires"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil {
				return reply(req, sip.StatusBadRequest, "Bad Contact expires")
			}
			exp = int(min(n, 1<<31-1))
		}
		if exp < 0 {
			exp = min(defaultExpires, maxExp)
		}
		// Step 7: too brief is refused (423) unless it is a removal.
		if exp > 0 && exp < minExp {
			res := reply(req, 423, "Interval Too Brief")
			res.AppendHeader(sip.NewHeader("Min-Expires", strconv.Itoa(minExp)))
			return res
		}
		exp = min(exp, maxExp)
		q := -1.0
		if v, ok := c.Params.Get("q"); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f > 1 {
				return reply(req, sip.StatusBadRequest, "Bad Contact q")
			}
			q = f
		}
		regID, _ := strconv.Atoi(c.Params.GetOr("reg-id", "0"))
		// Strings a binding keeps are copied: what the request holds
		// may be pieces of the whole datagram (gateway/fastpath parses
		// into one string), which a binding living an hour must not pin.
		ups = append(ups, contactUpdate{expires: exp, b: Binding{
			AOR:        aor,
			ContactURI: contactKey(&c.Address),
			Contact:    contactValue(c),
			Source:     transportPrefix(req.Transport()) + req.Source(),
			Local:      local,
			CallID:     callIDCopy,
			CSeq:       cseq,
			Q:          q,
			Expires:    now.Add(time.Duration(exp) * time.Second),
			Registered: now,
			UserAgent:  userAgent,
			Instance:   strings.Clone(strings.Trim(c.Params.GetOr("+sip.instance", ""), `"`)),
			RegID:      regID,
			Outbound:   outbound && regID > 0,
		}})
	}

	t := r.tbl
	t.mu.Lock()
	cur := t.aors[aor]
	next := make([]*Binding, 0, len(cur)+len(ups))
	for _, b := range cur {
		if b.Expires.After(now) {
			next = append(next, b)
		}
	}
	// Step 7: all updates are checked before any is made visible.
	type change struct {
		idx int // index in next, -1 = new
		u   *contactUpdate
	}
	var changesBuf [2]change
	changes := changesBuf[:0]
	for i := range ups {
		u := &ups[i]
		idx := -1
		for j, b := range next {
			if sameBinding(b, &u.b) {
				idx = j
				break
			}
		}
		if idx >= 0 && next[idx].CallID == callID && cseq <= next[idx].CSeq {
			t.mu.Unlock()
			return reply(req, sip.StatusInternalServerError, "Out Of Order CSeq")
		}
		changes = append(changes, change{idx, u})
	}
	removed, added := 0, 0
	for _, c := range changes {
		switch {
		case c.u.expires == 0 && c.idx >= 0:
			t.markLocked(next[c.idx].key(), nil)
			next[c.idx] = nil
			removed++
		case c.u.expires == 0: // removing what is not there: nothing to do
		case c.idx >= 0:
			old := next[c.idx]
			if old.ContactURI != c.u.b.ContactURI { // same instance, new address
				t.markLocked(old.key(), nil)
			}
			nb := c.u.b
			next[c.idx] = &nb
			if quietRefresh(old, &nb, now) {
				nb.saved = old.saved
			} else {
				nb.saved = nb.Expires
				t.markLocked(nb.key(), &nb)
			}
			added++
		default:
			nb := c.u.b
			nb.saved = nb.Expires
			next = append(next, &nb)
			t.markLocked(nb.key(), &nb)
			added++
		}
	}
	next = compact(next)
	// A phone that keeps changing address must not lock itself out: beyond
	// the limit the binding closest to expiry makes room.
	for len(next) > st.cfg.maxContacts() {
		oldest := 0
		for j, b := range next {
			if b.Expires.Before(next[oldest].Expires) {
				oldest = j
			}
		}
		t.markLocked(next[oldest].key(), nil)
		next = append(next[:oldest], next[oldest+1:]...)
	}
	if len(next) == 0 {
		delete(t.aors, aor)
	} else {
		t.aors[aor] = next
	}
	res := r.okLocked(req, next, now)
	t.mu.Unlock()
	if outbound {
		// RFC 5626 §6: the registrar supports outbound for this flow, and
		// how often the phone should keep it alive.
		res.AppendHeader(sip.NewHeader("Require", "outbound"))
		res.AppendHeader(sip.NewHeader("Flow-Timer", strconv.Itoa(st.cfg.flowTimer())))
	}

	if added > 0 {
		r.stats.registered.Add(1)
		if f := r.onBound.Load(); f != nil {
			(*f)(aor)
		}
	}
	if removed > 0 {
		r.stats.unregistered.Add(uint64(removed))
		if f := r.onUnbound.Load(); f != nil {
			(*f)(aor)
		}
	}
	return res
}

// removeAll handles "Contact: *": each binding goes unless it belongs to
// the same Call-ID with a CSeq that is not lower (§10.3 step 6).
func (r *Registrar) removeAll(req *sip.Request, aor, callID string, cseq uint32) *sip.Response {
	now := r.now()
	t := r.tbl
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.aors[aor]
	for _, b := range cur {
		if b.CallID == callID && cseq <= b.CSeq {
			return reply(req, sip.StatusInternalServerError, "Out Of Order CSeq")
		}
	}
	for _, b := range cur {
		t.markLocked(b.key(), nil)
	}
	delete(t.aors, aor)
	r.stats.unregistered.Add(uint64(len(cur)))
	return r.okLocked(req, nil, now)
}

// okLocked builds the 200 listing every current binding with its remaining
// lifetime (§10.3 step 8).
func (r *Registrar) okLocked(req *sip.Request, bs []*Binding, now time.Time) *sip.Response {
	res := reply(req, sip.StatusOK, "OK")
	for _, b := range bs {
		left := int((b.Expires.Sub(now) + time.Second - 1) / time.Second)
		res.AppendHeader(sip.NewHeader("Contact", b.Contact+";expires="+strconv.Itoa(left)))
	}
	res.AppendHeader(r.date.header(now))
	return res
}

// dateHeader is the Date header of the second it was made: formatting it
// for every 200 cost more than the rest of the header lines.
type dateHeader struct {
	sec int64
	h   sip.Header
}

// dateCache hands out the Date header of the current second.
type dateCache struct{ cur atomic.Pointer[dateHeader] }

func (c *dateCache) header(now time.Time) sip.Header {
	sec := now.Unix()
	if d := c.cur.Load(); d != nil && d.sec == sec {
		return d.h
	}
	d := &dateHeader{sec: sec, h: sip.NewHeader("Date", now.UTC().Format(time.RFC1123))}
	c.cur.Store(d)
	return d.h
}

// transportPrefix is "udp:", "tcp:", … for a transport name, without
// allocating for the usual ones.
func transportPrefix(tr string) string {
	switch tr {
	case "UDP", "udp":
		return "udp:"
	case "TCP", "tcp":
		return "tcp:"
	case "TLS", "tls":
		return "tls:"
	}
	return strings.ToLower(tr) + ":"
}

// outboundRequest reports whether a REGISTER asks for RFC 5626 outbound:
// over TCP or TLS (the flow is the connection; UDP flows would need STUN
// keep-alives, not done), with Supported: outbound and a Contact with
// reg-id and +sip.instance. More than one Contact with reg-id is a 400
// (RFC 5626 §6), returned as bad.
func outboundRequest(req *sip.Request, contacts []*sip.ContactHeader) (ok bool, bad string) {
	n := 0
	instance := false
	for _, c := range contacts {
		if c.Params.Has("reg-id") {
			n++
			instance = c.Params.Has("+sip.instance")
		}
	}
	if n == 0 || !supportsOutbound(req) {
		return false, ""
	}
	if n > 1 {
		return false, "More Than One reg-id Contact"
	}
	tr := strings.ToLower(req.Transport())
	return instance && (tr == "tcp" || tr == "tls"), ""
}

func supportsOutbound(req *sip.Request) bool {
	for _, name := range []string{"Supported", "k"} {
		for _, h := range req.GetHeaders(name) {
			for t := range strings.SplitSeq(h.Value(), ",") {
				if strings.EqualFold(strings.TrimSpace(t), "outbound") {
					return true
				}
			}
		}
	}
	return false
}

func sameBinding(a, b *Binding) bool {
	if a.Instance != "" && b.Instance != "" {
		return a.Instance == b.Instance && a.RegID == b.RegID
	}
	return a.ContactURI == b.ContactURI
}

func compact(bs []*Binding) []*Binding {
	out := bs[:0]
	for _, b := range bs {
		if b != nil {
			out = append(out, b)
		}
	}
	return out
}

// contactValue is the Contact as received minus its expires parameter,
// which the registrar rewrites in every 200.
func contactValue(c *sip.ContactHeader) string {
	if !c.Params.Has("expires") {
		return c.Value()
	}
	cc := c.Clone()
	cc.Params.Remove("expires")
	return cc.Value()
}

func sourceIP(req *sip.Request) string {
	host, _, err := net.SplitHostPort(req.Source())
	if err != nil {
		return req.Source()
	}
	return host
}

// reply builds the answer to req. For a REGISTER (every answer of the
// stateless fast path goes through here) it does what sipgo's
// NewResponseFromRequest does for one, in a few allocations instead of
// some twenty: the Via, From, Call-ID and CSeq headers are the request's
// own (nothing changes them after parsing: the response is written out
// and dropped, as is the request; gateway/fastpath then writes them as the
// lines they arrived as), To too when it has a tag, else a copy with a tag
// added (RFC 3261 §8.2.6.2; 64 random bits, §19.3 asks for 32), and a Via asking for
// rport (RFC 3581 §4) is copied with received and rport filled in.
// Other methods (the 407s of calls) go through sipgo.
func reply(req *sip.Request, code int, reason string) *sip.Response {
	if req.Method != sip.REGISTER {
		return sip.NewResponseFromRequest(req, code, reason, nil)
	}
	res := sip.NewResponse(code, reason)
	res.SipVersion = req.SipVersion
	first := true
	for _, h := range req.Headers() {
		if v, ok := h.(*sip.ViaHeader); ok {
			if first {
				h = viaWithRport(v, req.Source())
				first = false
			}
			res.AppendHeader(h)
		}
	}
	if h := req.From(); h != nil {
		res.AppendHeader(h)
	}
	if h := req.To(); h != nil && h.Params.Has("tag") {
		res.AppendHeader(h) // tagged already (the fast path tags it first)
	} else if h != nil {
		to := &sip.ToHeader{DisplayName: h.DisplayName, Address: h.Address}
		to.Params = make(sip.HeaderParams, 0, len(h.Params)+1)
		to.Params = append(to.Params, h.Params...)
		to.Params.Add("tag", strconv.FormatUint(rand.Uint64(), 36))
		res.AppendHeader(to)
	}
	if h := req.CallID(); h != nil {
		res.AppendHeader(h)
	}
	if h := req.CSeq(); h != nil {
		res.AppendHeader(h)
	}
	// RFC 3261 §20.14: required over TCP and TLS, where a client (libre)
	// that finds none drops the connection and never registers.
	res.SetBody(nil)
	return res
}

// viaWithRport is the top Via of a response: v itself, or, when v asks for
// rport (an rport parameter without a value), a copy carrying the source's
// port and address (RFC 3581 §4), as sipgo's NewResponseFromRequest does.
func viaWithRport(v *sip.ViaHeader, source string) *sip.ViaHeader {
	if val, ok := v.Params.Get("rport"); !ok || val != "" {
		return v
	}
	c := v.Clone()
	host, port, _ := net.SplitHostPort(source)
	c.Params.Add("rport", port)
	c.Params.Add("received", host)
	return c
}
