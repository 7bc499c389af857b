package config

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/outpost/outpost/siptarget"
)

var (
	numberRe    = regexp.MustCompile(`^\+?[0-9]{1,15}$`)   // DID, voicemail pilot
	dialledRe   = regexp.MustCompile(`^\+?[0-9*#]{1,32}$`) // a number as a phone dials it (forwards)
	prefixRe    = regexp.MustCompile(`^\+?[0-9]{0,15}$`)   // pstn_prefix
	emergencyRe = regexp.MustCompile(`^[0-9]{1,15}$`)      // emergency numbers
	prependRe   = regexp.MustCompile(`^\+?[0-9*#]{0,32}$`) // dial plan prepend
	nameRe      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	// RFC 3261 §25.1 token characters, for header names.
	tokenRe = regexp.MustCompile("^[A-Za-z0-9.!%*_+`'~-]+$")
)

var (
	routes     = []string{"local", "hq", "pstn"}
	transports = []string{"udp", "tcp", "tls"}
	digestAlgs = []string{"MD5", "SHA-256"}
	codecs     = []string{"PCMU", "PCMA", "G722", "telephone-event"}
)

// Validate checks the whole document and returns every problem found, each
// with its path, in document order (cross-section port clashes last); nil
// when the document is valid. Validate does not modify d.
//
// Secrets that are Redacted are accepted as placeholders: Seal resolves them
// against the running document. A user without a password is valid when it
// carries HA1 values for every digest algorithm in use (a sealed document).
func (d *Document) Validate() Errors {
	v := &validator{d: d}
	v.schema()
	v.site()
	v.sip()
	v.users()
	v.forwardLoops()
	v.delegates()
	v.pickupGroups()
	v.park()
	v.voicemail()
	v.groups()
	v.hq()
	v.pstn()
	v.dialplan()
	v.inbound()
	v.wan()
	v.media()
	v.msr()
	v.mediaResources()
	v.management()
	v.status()
	v.capture()
	v.pool()
	v.ports()
	if len(v.errs) == 0 {
		return nil
	}
	return v.errs
}

type validator struct {
	d    *Document
	errs Errors

	listens []boundListen // the parseable sip.listen entries
	exts    map[string]int
}

type boundListen struct {
	Listen
	i int
}

func (v *validator) add(path, format string, args ...any) { v.errs.add(path, format, args...) }

func (v *validator) schema() {
	if v.d.Schema != 1 {
		v.add("schema", "unsupported schema %d (want 1)", v.d.Schema)
	}
}

func (v *validator) site() {
	s := v.d.Site
	switch {
	case strings.TrimSpace(s.Name) == "":
		v.add("site.name", "required")
	default:
		v.text("site.name", s.Name, 128)
	}
	if s.Domain != "" && !validHost(s.Domain) {
		v.add("site.domain", "bad domain name %q", s.Domain)
	}
	v.text("site.zone", s.Zone, 64)
	v.text("site.site", s.Site, 64)
}

func (v *validator) sip() {
	s := v.d.SIP
	if len(s.Listen) == 0 {
		v.add("sip.listen", "at least one listen spec required")
	}
	v.certPair("sip.tls", s.TLS.CertPEM, s.TLS.KeyPEM)
	for i, spec := range s.Listen {
		p := index("sip.listen", i)
		l, err := ParseListen(spec)
		if err != nil {
			v.add(p, "%s", err.Error())
			continue
		}
		clash := false
		for _, o := range v.listens {
			switch {
			case l.Port == 0 || o.Port == 0:
			case l.Interface != "" || o.Interface != "":
				if protoOf(l.Transport) != protoOf(o.Transport) || l.Port != o.Port || !ifaceOverlap(l, o.Listen) {
					continue
				}
				v.add(p, "%q conflicts with %q (sip.listen[%d]): both may bind the same %s port %d",
					spec, s.Listen[o.i], o.i, strings.ToUpper(protoOf(l.Transport)), l.Port)
			case l.Transport == o.Transport && l.addr() == o.addr() && l.Port == o.Port:
				v.add(p, "duplicate listen spec %q (also sip.listen[%d])", spec, o.i)
			case protoOf(l.Transport) == protoOf(o.Transport) && l.Port == o.Port && overlaps(l.addr(), o.addr()):
				v.add(p, "%q conflicts with %q (sip.listen[%d]): both bind %s port %d",
					spec, s.Listen[o.i], o.i, strings.ToUpper(protoOf(l.Transport)), l.Port)
			default:
				continue
			}
			clash = true
			break
		}
		if !clash {
			v.listens = append(v.listens, boundListen{l, i})
		}
	}

	realm := s.EffectiveRealm(v.d.Site)
	switch {
	case realm == "":
		v.add("sip.realm", "required (sip.realm or site.domain)")
	case strings.ContainsAny(realm, `"\`) || hasControl(realm):
		rp := "sip.realm"
		if s.Realm == "" {
			rp = "site.domain"
		}
		v.add(rp, `realm %q must not contain '"', '\' or control characters`, realm)
	case len(realm) > 128:
		v.add("sip.realm", "realm longer than 128 bytes")
	}

	minOK, maxOK := true, true
	if s.MinExpiresS < 0 {
		v.add("sip.min_expires", "must be at least 1 (seconds)")
		minOK = false
	}
	if s.MaxExpiresS < 0 {
		v.add("sip.max_expires", "must be at least 1 (seconds)")
		maxOK = false
	}
	if minOK && maxOK && s.MaxExpires() < s.MinExpires() {
		if s.MaxExpiresS != 0 {
			v.add("sip.max_expires", "must be at least min_expires (%d)", s.MinExpires())
		} else {
			v.add("sip.min_expires", "must not exceed max_expires (default %d)", s.MaxExpires())
		}
	}

	if s.DrainS < 0 || s.DrainS > 3600 {
		v.add("sip.drain_s", "must be between 0 and 3600 seconds (0 = default %d)", DefaultDrainS)
	}
	switch w := s.SurvivableWarning; {
	case len(w) > 200:
		v.add("sip.survivable_warning", "longer than 200 bytes")
	case !utf8.ValidString(w) || strings.ContainsFunc(w, unicode.IsControl):
		v.add("sip.survivable_warning", "must be UTF-8 text without control characters")
	}

	for i, alg := range s.Digest {
		p := index("sip.digest", i)
		switch j := slices.Index(s.Digest, alg); {
		case !slices.Contains(digestAlgs, alg):
			v.add(p, "unknown digest algorithm %q (want MD5 or SHA-256)", alg)
		case j < i:
			v.add(p, "duplicate algorithm %q (also sip.digest[%d])", alg, j)
		}
	}

	r := s.Registrar
	if r.AuthFailLimit < 0 {
		v.add("sip.registrar.auth_fail_limit", "must not be negative (0 = default %d)", DefaultAuthFailLimit)
	}
	if r.ChallengeRate < -1 {
		v.add("sip.registrar.challenge_rate", "must be -1 (no limit), 0 (default %d) or positive", DefaultChallengeRate)
	}
	if r.StormRate < -1 {
		v.add("sip.registrar.storm_rate", "must be -1 (no limit), 0 (default %d) or positive", DefaultStormRate)
	}
	if r.RetryAfterS < 0 || r.RetryAfterS > 3600 {
		v.add("sip.registrar.retry_after_s", "must be between 0 (default %d) and 3600", DefaultRetryAfterS)
	}
	if r.PersistIntervalMS < 0 || r.PersistIntervalMS > 60000 {
		v.add("sip.registrar.persist_interval_ms", "must be between 0 (default %d) and 60000", DefaultPersistIntervalMS)
	}
}

func (v *validator) users() {
	v.exts = make(map[string]int)
	dids := make(map[string]int)
	algs := v.d.SIP.DigestAlgorithms()
	for i, u := range v.d.Users {
		p := index("users", i)
		switch j, dup := v.exts[u.Extension]; {
		case u.Extension == "":
			v.add(field(p, "extension"), "required")
		case !isExtension(u.Extension):
			v.add(field(p, "extension"), "bad extension %q: want 1 to 32 of 0-9 A-Z a-z _ . + -", u.Extension)
		case dup:
			v.add(field(p, "extension"), "duplicate extension %s (also users[%d])", u.Extension, j)
		default:
			v.exts[u.Extension] = i
			if j := slices.Index(v.d.PSTN.Emergency, u.Extension); j >= 0 {
				v.add(field(p, "extension"), "extension %s is an emergency number (pstn.emergency[%d])", u.Extension, j)
			}
		}
		v.text(field(p, "name"), u.Name, 128)
		v.mediaPlace(p, u.MediaZone, u.MediaSite)

		sealed := u.Password == "" && (u.HA1MD5 != "" || u.HA1SHA256 != "")
		switch {
		case u.Password == "" && !sealed:
			v.add(field(p, "password"), "password required")
		case u.Password == Redacted || sealed:
		case u.Password == u.Extension:
			v.add(field(p, "password"), "password must not equal the extension")
		case len(u.Password) > 256:
			v.add(field(p, "password"), "password longer than 256 bytes")
		}
		// A sealed user needs an HA1 for every algorithm challenged.
		for _, h := range []struct {
			name, alg, value string
			digits           int
		}{
			{"ha1_md5", "MD5", u.HA1MD5, 32},
			{"ha1_sha256", "SHA-256", u.HA1SHA256, 64},
		} {
			switch {
			case h.value != "" && !isLowerHex(h.value, h.digits):
				v.add(field(p, h.name), "want %d lowercase hex digits", h.digits)
			case h.value == "" && sealed && slices.Contains(algs, h.alg):
				v.add(field(p, h.name), "required for digest algorithm %s when no password is given", h.alg)
			}
		}

		v.forward(p, u)
		if u.DID != "" {
			switch j, dup := dids[u.DID]; {
			case !numberRe.MatchString(u.DID):
				v.add(field(p, "did"), "bad DID %q: want + and up to 15 digits (E.164)", u.DID)
			case dup:
				v.add(field(p, "did"), "duplicate DID %s (also users[%d])", u.DID, j)
			default:
				dids[u.DID] = i
			}
		}
	}
}

// forward checks a user's forwards: numbers a phone could dial, none to
// the user itself.
func (v *validator) forward(p string, u User) {
	f := u.Forward
	if f == nil {
		return
	}
	p = field(p, "forward")
	for _, n := range []struct{ name, number string }{{"always", f.Always}, {"busy", f.Busy}, {"no_answer", f.NoAnswer}} {
		switch {
		case n.number == "":
		case !dialledRe.MatchString(n.number):
			v.add(field(p, n.name), "bad number %q: want digits, * and #, at most 32, with an optional leading +", n.number)
		case n.number == u.Extension:
			v.add(field(p, n.name), "forwards the user to itself")
		}
	}
	if f.NoAnswerS != 0 && (f.NoAnswerS < 5 || f.NoAnswerS > 300) {
		v.add(field(p, "no_answer_s"), "want 5 to 300 seconds (0 = the voicemail ring time)")
	}
}

// groups checks the hunt groups: their extensions apart from the users',
// members that are users, and overflows that do not loop.
func (v *validator) groups() {
	seen := map[string]int{}
	for i, g := range v.d.Groups {
		p := index("groups", i)
		switch j, dup := seen[g.Extension]; {
		case g.Extension == "":
			v.add(field(p, "extension"), "required")
		case !isExtension(g.Extension):
			v.add(field(p, "extension"), "bad extension %q: want 1 to 32 of 0-9 A-Z a-z _ . + -", g.Extension)
		case dup:
			v.add(field(p, "extension"), "duplicate group extension %s (also groups[%d])", g.Extension, j)
		default:
			seen[g.Extension] = i
			if u, ok := v.exts[g.Extension]; ok {
				v.add(field(p, "extension"), "extension %s is users[%d]'s", g.Extension, u)
			}
			if j := slices.Index(v.d.PSTN.Emergency, g.Extension); j >= 0 {
				v.add(field(p, "extension"), "extension %s is an emergency number (pstn.emergency[%d])", g.Extension, j)
			}
		}
		v.text(field(p, "name"), g.Name, 128)
		if why := v.notLocal(g.Extension); why != "" && g.Extension != "" {
			v.add(field(p, "extension"), "%s: calls cannot reach the group", why)
		}
		if len(g.Members) == 0 {
			v.add(field(p, "members"), "required: at least one user")
		}
		v.userList(field(p, "members"), g.Members, "")
		switch g.Strategy {
		case "", "simultaneous", "sequential", "round_robin", "longest_idle":
		default:
			v.add(field(p, "strategy"), "unknown strategy %q: want simultaneous, sequential, round_robin or longest_idle", g.Strategy)
		}
		if g.RingS != 0 && (g.RingS < 5 || g.RingS > 300) {
			v.add(field(p, "ring_s"), "want 5 to 300 seconds (0 = 15)")
		}
		if g.TotalS != 0 && (g.TotalS < 5 || g.TotalS > 3600) {
			v.add(field(p, "total_s"), "want 5 to 3600 seconds (0 = the members' ring times)")
		}
		if g.QueueS != 0 && (g.QueueS < 10 || g.QueueS > 3600) {
			v.add(field(p, "queue_s"), "want 10 to 3600 seconds (0 = no queue)")
		}
		switch {
		case g.Overflow == "":
		case g.Overflow == "voicemail":
			if v.d.HQ.VoicemailPilot == "" {
				v.add(field(p, "overflow"), "voicemail needs hq.voicemail_pilot")
			}
		case !dialledRe.MatchString(g.Overflow):
			v.add(field(p, "overflow"), "bad number %q: want \"voicemail\", or digits, * and #, at most 32, with an optional leading +", g.Overflow)
		case g.Overflow == g.Extension:
			v.add(field(p, "overflow"), "overflows the group to itself")
		}
	}
	// Overflows from group to group must end somewhere.
	next := func(ext string) (string, bool) {
		n := v.d.Groups[seen[ext]].Overflow
		_, ok := seen[n]
		return n, ok
	}
	for i, g := range v.d.Groups {
		if j, ok := seen[g.Extension]; !ok || j != i || g.Overflow == g.Extension {
			continue // reported above
		}
		if path := loopFrom(g.Extension, next, len(v.d.Groups)); path != nil {
			v.add(field(index("groups", i), "overflow"), "overflow loop: %s", strings.Join(path, " -> "))
		}
	}
}

// voicemail checks the users' voicemail kinds and the box's limits.
func (v *validator) voicemail() {
	for i, u := range v.d.Users {
		switch u.Voicemail {
		case "", VoicemailNone, VoicemailLocal, VoicemailFallback:
		case VoicemailHQ:
			if v.d.HQ.VoicemailPilot == "" {
				v.add(field(index("users", i), "voicemail"), "hq needs hq.voicemail_pilot")
			}
		default:
			v.add(field(index("users", i), "voicemail"), "bad kind %q: want none, hq, local or fallback", u.Voicemail)
		}
	}
	vm := v.d.Voicemail
	for _, f := range []struct {
		name     string
		val      int
		min, max int
		zeroOK   bool
	}{
		{"max_message_s", vm.MaxMessageS, 10, 3600, true},
		{"silence_s", vm.SilenceS, -1, 120, true},
		{"no_media_s", vm.NoMediaS, 2, 120, true},
		{"mailbox_messages", vm.MailboxMessages, 1, 10000, true},
		{"total_mb", vm.TotalMB, 1, 65536, true},
	} {
		if (f.val != 0 || !f.zeroOK) && (f.val < f.min || f.val > f.max) {
			v.add("voicemail."+f.name, "want %d to %d (0 = the default)", f.min, f.max)
		}
	}
}

// park checks the orbit range, that no orbit is a user's, a group's or
// an emergency number, and the overflow.
func (v *validator) park() {
	p := v.d.Park
	if p == nil {
		return
	}
	for _, f := range []struct{ name, val string }{{"first", p.First}, {"last", p.Last}} {
		if !allDigits(f.val) {
			v.add("park."+f.name, "bad orbit %q: want 1 to 8 digits", f.val)
		}
	}
	orbits := p.Orbits()
	switch {
	case !allDigits(p.First) || !allDigits(p.Last):
	case len(p.First) != len(p.Last):
		v.add("park.last", "want as many digits as park.first (%s)", p.First)
	case orbits == nil:
		v.add("park.last", "want park.first to park.first + %d", maxOrbits-1)
	}
	groups := map[string]int{}
	for i, g := range v.d.Groups {
		groups[g.Extension] = i
	}
	for _, o := range orbits {
		if u, ok := v.exts[o]; ok {
			v.add("park", "orbit %s is users[%d]'s extension", o, u)
		}
		if g, ok := groups[o]; ok {
			v.add("park", "orbit %s is groups[%d]'s extension", o, g)
		}
		if j := slices.Index(v.d.PSTN.Emergency, o); j >= 0 {
			v.add("park", "orbit %s is an emergency number (pstn.emergency[%d])", o, j)
		}
	}
	if p.TimeoutS != 0 && (p.TimeoutS < 10 || p.TimeoutS > 3600) {
		v.add("park.timeout_s", "want 10 to 3600 seconds (0 = 60)")
	}
	switch {
	case p.Overflow == "":
	case !dialledRe.MatchString(p.Overflow):
		v.add("park.overflow", "bad number %q: want digits, * and #, at most 32, with an optional leading +", p.Overflow)
	case slices.Contains(orbits, p.Overflow):
		v.add("park.overflow", "overflows to an orbit")
	}
}

// pickupGroups checks that pickup groups are of users, each once.
func (v *validator) pickupGroups() {
	for i, g := range v.d.PickupGroups {
		p := index("pickup_groups", i)
		v.text(field(p, "name"), g.Name, 64)
		if len(g.Members) < 2 {
			v.add(field(p, "members"), "want at least two users")
		}
		v.userList(field(p, "members"), g.Members, "")
	}
}

// userList checks a list of users' extensions at p: each a user, once,
// and not self (the user the list belongs to; "" = none).
func (v *validator) userList(p string, list []string, self string) {
	seen := map[string]int{}
	for k, m := range list {
		mp := index(p, k)
		_, local := v.exts[m]
		j, dup := seen[m]
		switch {
		case m == self:
			v.add(mp, "%s is the user itself", m)
		case !local:
			v.add(mp, "%q is not a user's extension", m)
		case dup:
			v.add(mp, "user %s is already %s[%d]", m, p[strings.LastIndexByte(p, '.')+1:], j)
		}
		seen[m] = k
	}
}

// notLocal says why the dial plan does not route a call to ext to the
// local extension ext in normal mode ("" = it does).
func (v *validator) notLocal(ext string) string {
	for i, r := range v.d.Dialplan {
		re, err := regexp.Compile(r.Match)
		if err != nil || !re.MatchString(ext) {
			continue
		}
		if r.Route != "local" || r.Strip != 0 || r.Prepend != "" {
			return fmt.Sprintf("dialplan[%d] routes %s to %s, not to the local extension", i, ext, r.Route)
		}
		return ""
	}
	return "no dial-plan rule matches " + ext
}

// delegates checks the bosses' delegates: other users, each once.
func (v *validator) delegates() {
	for i, u := range v.d.Users {
		dl := u.Delegates
		if dl == nil {
			continue
		}
		p := field(index("users", i), "delegates")
		if len(dl.Users) == 0 {
			v.add(field(p, "users"), "required: at least one user")
		}
		v.userList(field(p, "users"), dl.Users, u.Extension)
		if dl.AfterS < 0 || dl.AfterS > 120 {
			v.add(field(p, "after_s"), "want 0 to 120 seconds")
		}
		switch dl.Identity {
		case "", "from", "pai":
		default:
			v.add(field(p, "identity"), "unknown identity %q: want from or pai", dl.Identity)
		}
	}
}

// forwardLoops refuses forward.always chains between users that come back
// to where they started: such a call could only end in 482.
func (v *validator) forwardLoops() {
	always := map[string]string{}
	for _, u := range v.d.Users {
		if u.Forward != nil && u.Forward.Always != "" {
			always[u.Extension] = u.Forward.Always
		}
	}
	next := func(ext string) (string, bool) {
		n, ok := always[ext]
		_, local := v.exts[n]
		return n, ok && local
	}
	for i, u := range v.d.Users {
		if always[u.Extension] == u.Extension {
			continue // forward reported it
		}
		if path := loopFrom(u.Extension, next, len(v.d.Users)); path != nil {
			v.add(field(index("users", i), "forward.always"), "forwarding loop: %s", strings.Join(path, " -> "))
		}
	}
}

// loopFrom follows next from start and returns the path when it comes
// back to start within limit steps; nil when it ends, or loops without
// passing start (that loop is reported from its own members).
func loopFrom(start string, next func(string) (string, bool), limit int) []string {
	path := []string{start}
	for cur := start; len(path) <= limit; {
		n, ok := next(cur)
		if !ok {
			return nil
		}
		path = append(path, n)
		if n == start {
			return path
		}
		cur = n
	}
	return nil
}

func (v *validator) hq() {
	h := v.d.HQ
	v.failover("hq.failover", h.Failover)
	if h.Domain != "" && !validHost(h.Domain) {
		v.add("hq.domain", "bad domain name %q", h.Domain)
	}
	v.targetList("hq.targets", "target", h.Targets, transportOr(h.Transport))
	v.transport("hq.transport", h.Transport)
	v.mediaPlace("hq", h.MediaZone, h.MediaSite)
	v.srvService("hq.srv_service", h.SRVService)
	if h.CAPEM != "" {
		if msg := certsProblem(h.CAPEM); msg != "" {
			v.add("hq.ca_pem", "%s", msg)
		}
	}
	v.certPairAt("hq.client_cert_pem", "hq.client_key_pem", h.ClientCertPEM, h.ClientKeyPEM)
	v.addrList("hq.dns_servers", "DNS server", h.DNSServers, true)
	if h.OptionsIntervalMS != 0 && (h.OptionsIntervalMS < 100 || h.OptionsIntervalMS > 600000) {
		v.add("hq.options_interval_ms", "must be between 100 and 600000 (0 = default %d)", DefaultOptionsIntervalMS)
	}
	if h.DownAfter < 0 {
		v.add("hq.down_after", "must be at least 1 (0 = default %d)", DefaultDownAfter)
	}
	if h.UpAfter < 0 {
		v.add("hq.up_after", "must be at least 1 (0 = default %d)", DefaultUpAfter)
	}
	if h.HoldS < 0 {
		v.add("hq.hold_s", "must not be negative")
	}
	if h.SRVService != "" && h.Domain == "" {
		v.add("hq.srv_service", "requires hq.domain")
	}
	if h.RegisterUpstream && v.d.Standalone() {
		v.add("hq.register_upstream", "requires hq.domain or hq.targets")
	}
	if h.AuthPassword != "" && h.AuthUsername == "" {
		v.add("hq.auth_username", "required when hq.auth_password is set")
	}
	v.text("hq.auth_username", h.AuthUsername, 128)
	if h.VoicemailPilot != "" && !numberRe.MatchString(h.VoicemailPilot) {
		v.add("hq.voicemail_pilot", "bad number %q: want + and up to 15 digits", h.VoicemailPilot)
	}
	if !prefixRe.MatchString(h.PSTNPrefix) {
		v.add("hq.pstn_prefix", "bad prefix %q: want + and up to 15 digits", h.PSTNPrefix)
	}
	if b := h.Backup; b != nil && b.Failover != nil {
		v.failover("hq.backup.failover", *b.Failover)
	}
	if b := h.Backup; b != nil {
		switch {
		case v.d.Standalone():
			v.add("hq.backup", "requires hq.domain or hq.targets (a backup of nothing)")
		case b.Domain == "" && len(b.Targets) == 0:
			v.add("hq.backup", "needs a domain or targets")
		}
		if b.Domain != "" && !validHost(b.Domain) {
			v.add("hq.backup.domain", "bad domain name %q", b.Domain)
		}
		v.targetList("hq.backup.targets", "target", b.Targets, transportOr(b.Transport))
		v.transport("hq.backup.transport", b.Transport)
		v.srvService("hq.backup.srv_service", b.SRVService)
		if b.SRVService != "" && b.Domain == "" {
			v.add("hq.backup.srv_service", "requires hq.backup.domain")
		}
	}
	if len(h.TrustedNetworks) > 0 && v.d.Standalone() {
		v.add("hq.trusted_networks", "requires hq.domain or hq.targets")
	}
	for i, n := range h.TrustedNetworks {
		if j := slices.Index(h.TrustedNetworks, n); n != "" && j < i {
			v.add(index("hq.trusted_networks", i), "duplicate network %q (also hq.trusted_networks[%d])", n, j)
		} else if msg := networkProblem(n); msg != "" {
			v.add(index("hq.trusted_networks", i), "%s", msg)
		}
	}
}

// networkProblem checks a trusted network: a CIDR in canonical form (no
// host bits: "198.18.9.1/24" is more likely a typo for a host than a
// network), not the whole address space, not IPv4-mapped (sources are
// compared unmapped, so such a network would never match).
func networkProblem(s string) string {
	if s == "" {
		return "empty network"
	}
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return fmt.Sprintf("not a CIDR: %q (want address/bits, e.g. 198.18.8.0/24)", s)
	case p.Addr().Is4In6():
		return fmt.Sprintf("%q is IPv4-mapped: write the IPv4 network (%s)", s, netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0)).Masked())
	case p.Bits() == 0:
		return fmt.Sprintf("%q would trust every address", s)
	case p.Masked() != p:
		return fmt.Sprintf("%q has host bits set (want %s)", s, p.Masked())
	}
	return ""
}

// uniqueName checks the name of element i of the list at JSON path list
// (p is the element's path): present, well-formed, and not a repeat of an
// earlier one (seen maps names to their index).
func (v *validator) uniqueName(p, list, what, name string, i int, seen map[string]int) {
	switch j, dup := seen[name]; {
	case name == "":
		v.add(field(p, "name"), "required")
	case !nameRe.MatchString(name):
		v.add(field(p, "name"), "bad name %q: want letters, digits, '_', '.', '-'", name)
	case dup:
		v.add(field(p, "name"), "duplicate %s %q (also %s[%d])", what, name, list, j)
	default:
		seen[name] = i
	}
}

// failover checks a route's failover limits.
func (v *validator) failover(p string, f Failover) {
	if t := f.AttemptTimeoutMS; t != 0 && (t < 100 || t > 60000) {
		v.add(field(p, "attempt_timeout_ms"), "must be between 100 and 60000 (0 = default %d)", ms(Failover{}.EffectiveAttemptTimeout()))
	}
	if f.MaxTargets < 0 {
		v.add(field(p, "max_targets"), "must not be negative (0 = every target)")
	}
	seen := map[int]int{}
	for i, s := range f.Retry5xx {
		q := index(field(p, "retry_5xx"), i)
		switch j, dup := seen[s]; {
		case s < 500 || s > 599:
			v.add(q, "%d is not a 5xx status", s)
		case s == 503 || s == 504:
			v.add(q, "%d always moves on to the next target: leave it out", s)
		case dup:
			v.add(q, "duplicate status %d (also %s[%d])", s, field(p, "retry_5xx"), j)
		}
		seen[s] = i
	}
}

func (v *validator) pstn() {
	v.failover("pstn.failover", v.d.PSTN.Failover)
	names := make(map[string]int)
	for i, g := range v.d.PSTN.Gateways {
		p := index("pstn.gateways", i)
		v.uniqueName(p, "pstn.gateways", "gateway name", g.Name, i, names)
		if g.Target == "" {
			v.add(field(p, "target"), "required")
		} else if _, err := siptarget.Parse(g.Target, transportOr(g.Transport)); err != nil {
			v.add(field(p, "target"), "%v", err)
		}
		v.transport(field(p, "transport"), g.Transport)
		v.mediaPlace(p, g.MediaZone, g.MediaSite)
	}
	if ms := v.d.PSTN.OptionsIntervalMS; ms != 0 && (ms < 100 || ms > 600000) {
		v.add("pstn.options_interval_ms", "must be between 100 and 600000 (0 = no probes)")
	}
	for i, n := range v.d.PSTN.Emergency {
		p := index("pstn.emergency", i)
		switch j := slices.Index(v.d.PSTN.Emergency, n); {
		case !emergencyRe.MatchString(n):
			v.add(p, "bad emergency number %q: want 1 to 15 digits", n)
		case j < i:
			v.add(p, "duplicate emergency number %s (also pstn.emergency[%d])", n, j)
		}
	}
}

func (v *validator) dialplan() {
	names := make(map[string]int)
	for i, r := range v.d.Dialplan {
		p := index("dialplan", i)
		if r.Name != "" {
			if j, dup := names[r.Name]; dup {
				v.add(field(p, "name"), "duplicate rule name %q (also dialplan[%d])", r.Name, j)
			} else {
				names[r.Name] = i
				v.text(field(p, "name"), r.Name, 64)
			}
		}
		v.regexp(field(p, "match"), r.Match)
		v.route(field(p, "route"), r.Route)
		v.strip(field(p, "strip"), r.Strip)
		v.prepend(field(p, "prepend"), r.Prepend)
		if s := r.Survivable; s != nil {
			sp := field(p, "survivable")
			v.route(field(sp, "route"), s.Route)
			v.strip(field(sp, "strip"), s.Strip)
			v.prepend(field(sp, "prepend"), s.Prepend)
		}
	}
}

func (v *validator) route(p, route string) {
	switch {
	case route == "":
		v.add(p, "required (local, hq or pstn)")
	case !slices.Contains(routes, route):
		v.add(p, "unknown route %q (want local, hq or pstn)", route)
	case route == "pstn" && len(v.d.PSTN.Gateways) == 0:
		v.add(p, "route pstn needs at least one pstn gateway (pstn.gateways is empty)")
	}
}

func (v *validator) strip(p string, n int) {
	if n < 0 {
		v.add(p, "must not be negative")
	}
}

func (v *validator) prepend(p, s string) {
	if !prependRe.MatchString(s) {
		v.add(p, "bad prepend %q: want digits, '*' or '#', optionally after a leading '+'", s)
	}
}

// inbound checks the DID rules, then runs every user's DID through them the
// way the gateway does: in order, the first rule that matches and yields a
// known extension wins; a rule yielding an unknown one falls through.
func (v *validator) inbound() {
	type compiled struct {
		re *regexp.Regexp
		to string
		i  int
	}
	var rules []compiled
	for i, r := range v.d.Inbound {
		p := index("inbound", i)
		re := v.regexp(field(p, "match"), r.Match)
		tp := field(p, "to")
		switch {
		case r.To == "":
			v.add(tp, "required")
		case !strings.Contains(r.To, "$"):
			if _, ok := v.exts[r.To]; !ok {
				v.add(tp, "unknown extension %q", r.To)
				continue // reported once here, not per DID
			}
		case re != nil:
			if msg := templateProblem(r.To, re); msg != "" {
				v.add(tp, "%s", msg)
				continue
			}
		}
		if re != nil && r.To != "" {
			rules = append(rules, compiled{re, r.To, i})
		}
	}
	for ui, u := range v.d.Users {
		if u.DID == "" || !numberRe.MatchString(u.DID) {
			continue
		}
		unknown := -1
		var unknownExt string
		for _, r := range rules {
			if !r.re.MatchString(u.DID) {
				continue
			}
			ext := r.re.ReplaceAllString(u.DID, r.to)
			_, known := v.exts[ext]
			if !known {
				if unknown < 0 {
					unknown, unknownExt = r.i, ext
				}
				continue
			}
			if ext != u.Extension {
				v.add(field(index("inbound", r.i), "to"), "DID rule routes %s (the DID of users[%d], %s) to extension %s",
					u.DID, ui, u.Extension, ext)
			}
			unknown = -1
			break
		}
		if unknown >= 0 {
			v.add(field(index("inbound", unknown), "to"), "DID rule produces unknown extension %q for %s", unknownExt, u.DID)
		}
	}
}

func (v *validator) wan() {
	if w := v.d.WAN.Interface; w != "" {
		if msg := ifnameProblem(w); msg != "" {
			v.add("wan.interface", "%s", msg)
		}
	}
}

// maxMusicOnHold bounds media.music_on_hold: 60 s of 16-bit PCM in base64
// and a WAV header.
const maxMusicOnHold = (60*8000*2+4096)*4/3 + 4

func (v *validator) media() {
	if len(v.d.Media.MusicOnHold) > maxMusicOnHold {
		v.add("media.music_on_hold", "%d bytes: at most %d (60 s of 16-bit PCM in base64)", len(v.d.Media.MusicOnHold), maxMusicOnHold)
	} else if _, err := v.d.Media.MusicOnHoldWAV(); err != nil {
		v.add("media.music_on_hold", "not base64 (want a WAV file in base64, \"off\" or empty): %v", err)
	}
	m := v.d.Media
	ok := true
	for _, f := range []struct {
		path string
		port int
	}{{"media.port_min", m.PortMin}, {"media.port_max", m.PortMax}} {
		if f.port != 0 && (f.port < 1024 || f.port > 65535) {
			v.add(f.path, "must be between 1024 and 65535")
			ok = false
		}
	}
	if ok {
		lo, hi := m.EffectivePortMin(), m.EffectivePortMax()
		if lo%2 != 0 {
			v.add("media.port_min", "must be even (RTP on even ports, RTCP on the odd port above)")
		}
		if lo >= hi {
			if m.PortMax != 0 {
				v.add("media.port_max", "must be greater than port_min (%d)", lo)
			} else {
				v.add("media.port_min", "must be less than port_max (default %d)", hi)
			}
		}
	}
	if m.InactivityS != 0 && (m.InactivityS < 2 || m.InactivityS > 3600) {
		v.add("media.inactivity_s", "must be between 2 and 3600 (0 = default %d)", DefaultMediaInactivityS)
	}
	v.ifnames("media.interfaces", m.Interfaces)
	audio, bad := false, false
	for i, c := range m.Codecs {
		p := index("media.codecs", i)
		switch j := slices.Index(m.Codecs, c); {
		case !slices.Contains(codecs, c):
			v.add(p, "unknown codec %q (want PCMU, PCMA, G722 or telephone-event)", c)
			bad = true
		case j < i:
			v.add(p, "duplicate codec %q (also media.codecs[%d])", c, j)
		case c != "telephone-event":
			audio = true
		}
	}
	if len(m.Codecs) > 0 && !audio && !bad {
		v.add("media.codecs", "at least one audio codec required (PCMU, PCMA or G722)")
	}
	srtpPolicy := func(p, val string) {
		switch val {
		case SRTPOff, SRTPOffer, SRTPRequire:
		default:
			v.add(p, "unknown SRTP policy %q (want off, offer or require)", val)
		}
	}
	if m.SRTP != "" {
		srtpPolicy("media.srtp", m.SRTP)
	}
	for _, route := range slices.Sorted(maps.Keys(m.SRTPRoutes)) {
		p := key("media.srtp_routes", route)
		switch route {
		case "local", "hq", "pstn":
			srtpPolicy(p, m.SRTPRoutes[route])
		default:
			v.add(p, "unknown route %q (want local, hq or pstn)", route)
		}
	}
	for _, ifname := range slices.Sorted(maps.Keys(m.SRTPInterfaces)) {
		p := key("media.srtp_interfaces", ifname)
		if msg := ifnameProblem(ifname); msg != "" {
			v.add(p, "%s", msg)
			continue
		}
		srtpPolicy(p, m.SRTPInterfaces[ifname])
	}
}

func (v *validator) msr() {
	m := v.d.MSR
	if m.Enabled {
		// msr.name may be empty: the box's host name is used.
		if len(m.Servers) == 0 {
			v.add("msr.servers", "at least one server required when msr is enabled")
		}
		if m.EffectiveServiceInterface(v.d.WAN) == "" {
			v.add("msr.service_interface", "required when msr is enabled and wan.interface is empty")
		}
	}
	if m.Name != "" && !nameRe.MatchString(m.Name) {
		v.add("msr.name", "bad name %q: want letters, digits, '_', '.', '-'", m.Name)
	}
	if m.ContactID != "" && !nameRe.MatchString(m.ContactID) {
		v.add("msr.contact_id", "bad contact id %q: want letters, digits, '_', '.', '-'", m.ContactID)
	}
	if m.CapacityPPS < 0 {
		v.add("msr.capacity_pps", "must be at least 1 (0 = default %d)", DefaultMSRCapacityPPS)
	}
	v.targetList("msr.servers", "server", m.Servers, siptarget.UDP)
	if m.ServiceInterface != "" {
		if msg := ifnameProblem(m.ServiceInterface); msg != "" {
			v.add("msr.service_interface", "%s", msg)
		}
	}
	for i, pat := range m.Interfaces {
		p := index("msr.interfaces", i)
		_, err := path.Match(pat, "")
		switch j := slices.Index(m.Interfaces, pat); {
		case pat == "":
			v.add(p, "empty interface pattern")
		case err != nil || strings.ContainsAny(pat, "/ \t") || hasControl(pat):
			v.add(p, "bad interface pattern %q", pat)
		case j < i:
			v.add(p, "duplicate interface pattern %q (also msr.interfaces[%d])", pat, j)
		}
	}
	if strings.ContainsAny(m.Username, ":") || hasControl(m.Username) {
		v.add("msr.username", "must not contain ':' or control characters")
	}
	if m.RegisterIntervalS < 0 {
		v.add("msr.register_interval_s", "must be at least 1 (0 = default %d)", DefaultMSRRegisterS)
	}
	if m.RetryIntervalS < 0 {
		v.add("msr.retry_interval_s", "must be at least 1 (0 = default %d)", DefaultMSRRetryS)
	}
	if m.ControlPort < 0 || m.ControlPort > 65535 {
		v.add("msr.control_port", "must be between 1 and 65535 (0 = default %d)", DefaultMSRControlPort)
	}
	if hp := m.HeaderPrefix; hp != "" {
		switch {
		case !tokenRe.MatchString(hp):
			v.add("msr.header_prefix", "header prefix %q has characters not allowed in a SIP header name", hp)
		case !strings.HasSuffix(hp, "-"):
			v.add("msr.header_prefix", "header prefix %q must end with '-'", hp)
		}
	}
	for i, c := range m.ControlAllow {
		switch p, err := netip.ParsePrefix(c); {
		case err != nil:
			v.add(index("msr.control_allow", i), "not a CIDR: %q", c)
		case p != p.Masked():
			v.add(index("msr.control_allow", i), "%q has host bits set (the range is %v)", c, p.Masked())
		}
	}
}

func (v *validator) mediaResources() {
	mr := v.d.MediaResources
	const mp = "media_resources.matrix"
	for _, from := range sortedKeys(mr.Matrix) {
		p := key(mp, from)
		if from == "" {
			v.add(p, "empty site name")
		}
		row := mr.Matrix[from]
		for _, to := range sortedKeys(row) {
			q := key(p, to)
			if to == "" {
				v.add(q, "empty site name")
			}
			if row[to] < 0 {
				v.add(q, "distance must not be negative")
			}
		}
	}
	if len(mr.Matrix) > 0 {
		self := v.d.Site.Site
		// The box's own distance needs no cell (Distance: 0 by default).
		switch _, ok := mr.Matrix[self]; {
		case self == "":
			v.add("site.site", "required when media_resources.matrix is set")
		case !ok:
			v.add(mp, "no row for this site %q (site.site): every other site's media resource would be forbidden", self)
		}
	}
	const pp = "media_resources.performance"
	for _, name := range sortedKeys(mr.Performance) {
		p := key(pp, name)
		if name == "" {
			v.add(p, "empty MSR name")
		}
		if c := mr.Performance[name]; !(c > 0) || math.IsInf(c, 0) {
			v.add(p, "coefficient must be greater than 0")
		}
	}
	seen := map[string]int{}
	for i, name := range mr.Inactive {
		if name == "" {
			v.add(index("media_resources.inactive", i), "empty MSR name")
		}
		if j, dup := seen[name]; dup {
			v.add(index("media_resources.inactive", i), "duplicate MSR %q (also media_resources.inactive[%d])", name, j)
		}
		seen[name] = i
	}
	placed := map[string]int{}
	for i, p := range mr.Placement {
		at := index("media_resources.placement", i)
		if p.MSR == "" {
			v.add(field(at, "msr"), "required: the MSR's name")
		}
		if j, dup := placed[p.MSR]; dup && p.MSR != "" {
			v.add(field(at, "msr"), "duplicate MSR %q (also media_resources.placement[%d])", p.MSR, j)
		}
		placed[p.MSR] = i
		if p.Zone == "" && p.Site == "" {
			v.add(at, "sets neither zone nor site")
		}
		if _, ok := mr.Matrix[p.Site]; p.Site != "" && len(mr.Matrix) > 0 && !ok {
			v.add(field(at, "site"), "site %q has no row in media_resources.matrix: the MSR would be forbidden everywhere", p.Site)
		}
	}
}

// mediaPlace checks the media_zone and media_site of a user or trunk at
// p: a site must have a row in the matrix (when there is one), else every
// media resource would be forbidden for its leg.
func (v *validator) mediaPlace(p, zone, site string) {
	v.text(field(p, "media_zone"), zone, 64)
	v.text(field(p, "media_site"), site, 64)
	if _, ok := v.d.MediaResources.Matrix[site]; site != "" && len(v.d.MediaResources.Matrix) > 0 && !ok {
		v.add(field(p, "media_site"), "site %q has no row in media_resources.matrix: every media resource would be forbidden for this leg", site)
	}
}

func (v *validator) management() {
	m := v.d.Management
	if m.Listen != "" {
		// Port 0 binds any free port (reported by status), as sip.listen allows.
		if msg := addrProblem(m.Listen, true, true, 0); msg != "" {
			v.add("management.listen", "bad listen address %q: %s", m.Listen, msg)
		}
	}
	v.certPair("management", m.CertPEM, m.KeyPEM)
	if m.ClientCAPEM != "" {
		if msg := certsProblem(m.ClientCAPEM); msg != "" {
			v.add("management.client_ca_pem", "%s", msg)
		}
		if m.CertPEM == "" {
			v.add("management.client_ca_pem", "requires cert_pem and key_pem (mutual TLS)")
		}
	}
	v.clientList("management.allowed_clients", m.AllowedClients, func(s string) string {
		if s == "" {
			return "empty client name"
		}
		return ""
	}, strings.Clone)
	v.clientList("management.revoked_serials", m.RevokedSerials, func(s string) string {
		if n := len(strings.ReplaceAll(s, ":", "")); n > 2*maxSerialBytes {
			return fmt.Sprintf("not a hex serial: longer than %d bytes", maxSerialBytes)
		}
		if _, ok := NormalizeSerial(s); !ok {
			return fmt.Sprintf("not a hex serial: %q (want hex digits, optionally bytes separated by colons)", s)
		}
		return ""
	}, func(s string) string { n, _ := NormalizeSerial(s); return n })
	if (len(m.AllowedClients) > 0 || len(m.RevokedSerials) > 0) && m.ClientCAPEM == "" {
		p := "management.allowed_clients"
		if len(m.AllowedClients) == 0 {
			p = "management.revoked_serials"
		}
		v.add(p, "requires client_ca_pem (only clients the CA signed are checked)")
	}
}

// maxClientEntry bounds one allowed_clients or revoked_serials entry.
const maxClientEntry = 256

// clientList checks a management access list: each entry must be text
// that problem accepts, and no two entries may be the same once keyed
// (revoked serials compare normalised).
// certPair checks a section's cert_pem and key_pem: both or neither, each
// well-formed, the key the certificate's (a Redacted key, kept from the
// stored document by Seal, is not checked here).
func (v *validator) certPair(section, certPEM, keyPEM string) {
	v.certPairAt(section+".cert_pem", section+".key_pem", certPEM, keyPEM)
}

// certPairAt is certPair with the two fields' paths given.
func (v *validator) certPairAt(certPath, keyPath, certPEM, keyPEM string) {
	certOK, keyOK := false, false
	if certPEM != "" {
		if msg := certsProblem(certPEM); msg != "" {
			v.add(certPath, "%s", msg)
		} else {
			certOK = true
		}
	}
	switch {
	case keyPEM == Redacted:
	case keyPEM != "":
		if msg := keyProblem(keyPEM); msg != "" {
			v.add(keyPath, "%s", msg)
		} else {
			keyOK = true
		}
	}
	switch {
	case certPEM != "" && keyPEM == "":
		v.add(keyPath, "required when %s is set", last(certPath))
	case certPEM == "" && keyPEM != "":
		v.add(certPath, "required when %s is set", last(keyPath))
	case certOK && keyOK:
		if msg := pairProblem(certPEM, keyPEM); msg != "" {
			v.add(keyPath, "%s", msg)
		}
	}
}

func (v *validator) clientList(p string, list []string, problem func(string) string, keyOf func(string) string) {
	seen := map[string]int{}
	for i, s := range list {
		ip := index(p, i)
		if hasControl(s) || len(s) > maxClientEntry {
			v.text(ip, s, maxClientEntry)
			continue
		}
		if msg := problem(s); msg != "" {
			v.add(ip, "%s", msg)
			continue
		}
		k := keyOf(s)
		if j, dup := seen[k]; dup {
			v.add(ip, "duplicate %q (also %s[%d])", s, p, j)
			continue
		}
		seen[k] = i
	}
}

// ports reports sockets of different sections that would bind the same port:
// SIP UDP listeners inside the media range, the management API or the MSR
// control channel on a SIP TCP/TLS port.
func (v *validator) ports() {
	m := v.d.Media
	lo, hi := m.EffectivePortMin(), m.EffectivePortMax()
	if lo >= 1024 && hi <= 65535 && lo < hi {
		for _, l := range v.listens {
			if protoOf(l.Transport) == "udp" && l.Port >= lo && l.Port <= hi {
				v.add(index("sip.listen", l.i), "UDP port %d is inside the media port range %d-%d", l.Port, lo, hi)
			}
		}
	}
	tcpClash := func(p string, a netip.Addr, port int) bool {
		for _, l := range v.listens {
			if protoOf(l.Transport) == "tcp" && l.Port == port && overlaps(a, l.addr()) {
				v.add(p, "TCP port %d is also used by %q (sip.listen[%d])", port, v.d.SIP.Listen[l.i], l.i)
				return true
			}
		}
		return false
	}
	mg := netip.AddrPort{}
	if l := v.d.Management.Listen; l != "" && hostPortProblem(l, true, true) == "" {
		host, port, _ := splitHostPort(l)
		var a netip.Addr // every address of both families
		if host != "" {
			a = netip.MustParseAddr(host).Unmap()
		}
		mg = netip.AddrPortFrom(a, uint16(port))
		if tcpClash("management.listen", a, port) {
			mg = netip.AddrPort{}
		}
	}
	// The status page's port may be 0 (any free port): nothing to clash with.
	if l := v.d.Status.Listen; l != "" && hostPortProblem(l, true, true) == "" {
		host, port, _ := splitHostPort(l)
		var a netip.Addr
		if host != "" {
			a = netip.MustParseAddr(host).Unmap()
		}
		if !tcpClash("status.listen", a, port) && mg.IsValid() && int(mg.Port()) == port && overlaps(a, mg.Addr()) {
			v.add("status.listen", "TCP port %d is also used by management.listen", port)
		}
	}
	if ms := v.d.MSR; ms.Enabled && ms.ControlPort >= 0 && ms.ControlPort <= 65535 {
		port := ms.EffectiveControlPort()
		// The control channel binds the service interface's address, unknown
		// here: any address may clash.
		switch {
		case tcpClash("msr.control_port", netip.Addr{}, port):
		case mg.IsValid() && int(mg.Port()) == port:
			v.add("msr.control_port", "TCP port %d is also used by management.listen", port)
		}
	}
}

// status checks the status page: a listen address (port 0 = any free
// port) that clashes with no other TCP listener, and someone who may open it.
func (v *validator) capture() {
	c := v.d.Capture
	if c.NodeID < 0 || c.NodeID > math.MaxUint32 {
		v.add("capture.node_id", "out of range 0..%d", uint32(math.MaxUint32))
	}
	if c.HEPServer == "" {
		if c.NodeID != 0 || c.Password != "" {
			v.add("capture.hep_server", "required when node_id or password is set")
		}
		return
	}
	network, addr, _ := strings.Cut(c.HEPServer, ":")
	if network != "udp" && network != "tcp" {
		v.add("capture.hep_server", "bad HEP server %q: want udp:HOST:PORT or tcp:HOST:PORT", c.HEPServer)
		return
	}
	if msg := hostPortProblem(addr, false, false); msg != "" {
		v.add("capture.hep_server", "bad HEP server %q: %s", c.HEPServer, msg)
	}
}

func (v *validator) status() {
	l := v.d.Status.Listen
	if l == "" {
		return
	}
	if msg := addrProblem(l, true, true, 0); msg != "" {
		v.add("status.listen", "bad listen address %q: %s", l, msg)
	}
	if !slices.ContainsFunc(v.d.Users, func(u User) bool { return u.Admin }) {
		v.add("status.listen", "no user has \"admin\": true: nobody could open the status page")
	}
}

// pool checks the registrar pool: this box among its members, no member
// named twice or at the same target, udp or tcp targets (members and
// phones are sent there in a 301 Contact), and a secret.
func (v *validator) pool() {
	p := v.d.Pool
	if p == nil {
		return
	}
	names := map[string]int{}
	targets := map[string]int{}
	for i, m := range p.Members {
		mp := index("pool.members", i)
		v.uniqueName(mp, "pool.members", "member", m.Name, i, names)
		if m.Target == "" {
			v.add(field(mp, "target"), "required")
			continue
		}
		t, err := siptarget.Parse(m.Target, siptarget.UDP)
		switch {
		case err != nil:
			v.add(field(mp, "target"), "%v", err)
		case t.Transport == siptarget.TLS:
			v.add(field(mp, "target"), "tls is not supported between pool members (want udp or tcp)")
		case !t.IsIP():
			v.add(field(mp, "target"), "want an IP address: members trust each other by address")
		default:
			if j, dup := targets[t.String()]; dup {
				v.add(field(mp, "target"), "duplicate target %q (also pool.members[%d])", m.Target, j)
			} else {
				targets[t.String()] = i
			}
		}
	}
	switch {
	case len(p.Members) < 2:
		v.add("pool.members", "a pool needs at least two members")
	case p.Self == "":
		v.add("pool.self", "required: the name of this box among pool.members")
	case !slices.ContainsFunc(p.Members, func(m PoolMember) bool { return m.Name == p.Self }):
		v.add("pool.self", "%q is not among pool.members", p.Self)
	}
	if ms := p.OptionsIntervalMS; ms != 0 && (ms < 100 || ms > 600000) {
		v.add("pool.options_interval_ms", "must be between 100 and 600000 (0 = default %d)", DefaultOptionsIntervalMS)
	}
	if p.DownAfter < 0 {
		v.add("pool.down_after", "must be at least 1 (0 = default %d)", DefaultDownAfter)
	}
	if p.UpAfter < 0 {
		v.add("pool.up_after", "must be at least 1 (0 = default %d)", DefaultUpAfter)
	}
	if p.HoldS < 0 {
		v.add("pool.hold_s", "must not be negative")
	}
	switch {
	case p.Secret == "":
		v.add("pool.secret", "required: members sign the calls they send each other with it")
	case p.Secret != Redacted && len(p.Secret) < 16:
		v.add("pool.secret", "shorter than 16 bytes")
	default:
		v.text("pool.secret", p.Secret, 256)
	}
}

// Helpers.

// text reports control characters or an over-long value.
func (v *validator) text(p, s string, max int) {
	switch {
	case hasControl(s):
		v.add(p, "must not contain control characters")
	case len(s) > max:
		v.add(p, "longer than %d bytes", max)
	}
}

func (v *validator) transport(p, t string) {
	if t != "" && !slices.Contains(transports, t) {
		v.add(p, "unknown transport %q (want udp, tcp or tls)", t)
	}
}

// regexp compiles a Go regexp, reporting problems at p; nil when bad.
func (v *validator) regexp(p, expr string) *regexp.Regexp {
	if expr == "" {
		v.add(p, "required")
		return nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		v.add(p, "bad regexp: %v", err)
		return nil
	}
	return re
}

// targetList checks a list of SIP targets with siptarget.Parse (def is
// the transport of a target without one), so the document accepts exactly
// what the parts parse, with the parser's message.
func (v *validator) targetList(p, what string, list []string, def siptarget.Transport) {
	for i, a := range list {
		switch j := slices.Index(list, a); {
		case a == "":
			v.add(index(p, i), "empty %s", what)
		case j < i:
			v.add(index(p, i), "duplicate %s %q (also %s[%d])", what, a, p, j)
		default:
			if _, err := siptarget.Parse(a, def); err != nil {
				v.add(index(p, i), "%v", err)
			}
		}
	}
}

// transportOr is a document transport as siptarget's default for targets
// without one: udp when empty or unknown (v.transport reports unknown ones).
func transportOr(t string) siptarget.Transport {
	if tr, err := siptarget.ParseTransport(t); err == nil && tr == siptarget.Transport(t) {
		return tr
	}
	return siptarget.UDP
}

// addrList checks a list of host:port addresses (IP hosts only when ipOnly).
func (v *validator) addrList(p, what string, list []string, ipOnly bool) {
	for i, a := range list {
		switch j := slices.Index(list, a); {
		case a == "":
			v.add(index(p, i), "empty %s", what)
		case j < i:
			v.add(index(p, i), "duplicate %s %q (also %s[%d])", what, a, p, j)
		default:
			if msg := hostPortProblem(a, ipOnly, false); msg != "" {
				v.add(index(p, i), "bad %s %q: %s", what, a, msg)
			}
		}
	}
}

func (v *validator) ifnames(p string, list []string) {
	for i, n := range list {
		if j := slices.Index(list, n); j < i {
			v.add(index(p, i), "duplicate interface %q (also %s[%d])", n, p, j)
		} else if msg := ifnameProblem(n); msg != "" {
			v.add(index(p, i), "%s", msg)
		}
	}
}

// ifnameProblem checks a Linux interface name (IFNAMSIZ 16 with the NUL).
func ifnameProblem(n string) string {
	switch {
	case n == "":
		return "empty interface name"
	case len(n) > 15:
		return fmt.Sprintf("interface name %q longer than 15 bytes", n)
	case n == "." || n == ".." || strings.ContainsAny(n, "/: \t") || hasControl(n):
		return fmt.Sprintf("bad interface name %q", n)
	}
	return ""
}

// hostPortProblem checks "host:port" (port 1..65535; host an IP literal,
// IPv6 in brackets, or a DNS name unless ipOnly; empty only if emptyOK).
func hostPortProblem(s string, ipOnly, emptyOK bool) string {
	return addrProblem(s, ipOnly, emptyOK, 1)
}

// addrProblem is hostPortProblem with the lowest acceptable port given: 0
// for a listen address, where it means any free port.
func addrProblem(s string, ipOnly, emptyOK bool, minPort int) string {
	host, port, err := splitHostPort(s)
	if err != "" {
		return err
	}
	if port < minPort || port > 65535 {
		return "port out of range"
	}
	if host == "" {
		if emptyOK {
			return ""
		}
		return "missing host"
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	switch {
	case strings.HasPrefix(s, "["):
		return "brackets are for IPv6 addresses only"
	case ipOnly:
		return fmt.Sprintf("host %q is not an IP address", host)
	case !validHost(host):
		return fmt.Sprintf("bad host name %q", host)
	}
	return ""
}

// splitHostPort splits "host:port" or "[v6]:port"; port -1 when out of int range.
func splitHostPort(s string) (host string, port int, problem string) {
	var p string
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 || !strings.HasPrefix(s[end+1:], ":") {
			return "", 0, "want host:port"
		}
		host, p = s[1:end], s[end+2:]
	} else {
		i := strings.LastIndexByte(s, ':')
		if i < 0 {
			return "", 0, "want host:port"
		}
		host, p = s[:i], s[i+1:]
		if strings.Contains(host, ":") {
			return "", 0, "IPv6 address must be in brackets"
		}
	}
	if !isDigits(p) {
		return "", 0, fmt.Sprintf("bad port %q", p)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		n = -1
	}
	return host, n, ""
}

// validHost accepts an IP literal or a DNS name: labels of letters, digits,
// '-' and '_', not starting or ending with '-', the last not all digits.
func validHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return !isDigits(labels[len(labels)-1])
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r >= 0x7f && r < 0xa0 {
			return true
		}
	}
	return false
}

func protoOf(transport string) string {
	if transport == "udp" {
		return "udp"
	}
	return "tcp" // tcp and tls share the TCP port space
}

// overlaps reports whether two bound addresses collide: equal, or one is the
// unspecified address of the same family. An invalid Addr stands for
// "some address, unknown" and overlaps everything.
func overlaps(a, b netip.Addr) bool {
	if !a.IsValid() || !b.IsValid() {
		return true
	}
	a, b = a.Unmap(), b.Unmap()
	return a == b || a.Is4() == b.Is4() && (a.IsUnspecified() || b.IsUnspecified())
}

// templateProblem checks a regexp.Expand template against re: every $n must
// name an existing group, every $name a named group. ("$1x" is the group
// named "1x" in Go: a classic mistake for "${1}x".)
func templateProblem(tmpl string, re *regexp.Regexp) string {
	for i := 0; i < len(tmpl); i++ {
		if tmpl[i] != '$' {
			continue
		}
		rest := tmpl[i+1:]
		var name, ref string
		braced := false
		switch {
		case strings.HasPrefix(rest, "$"):
			i++
			continue
		case strings.HasPrefix(rest, "{"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return "missing '}' after \"${\""
			}
			name, ref, braced = rest[1:end], "${"+rest[1:end]+"}", true
			i += end + 1
		default:
			j := 0
			for j < len(rest) && isWordByte(rest[j]) {
				j++
			}
			name, ref = rest[:j], "$"+rest[:j]
			i += j
		}
		if name == "" {
			return "lone '$' (write $$ for a literal $)"
		}
		if isDigits(name) && (name[0] != '0' || len(name) == 1) {
			if n, err := strconv.Atoi(name); err != nil || n > re.NumSubexp() {
				return fmt.Sprintf("%s refers to group %s, but the regexp has %d group(s)", ref, name, re.NumSubexp())
			}
			continue
		}
		if re.SubexpIndex(name) < 0 {
			msg := fmt.Sprintf("%s refers to the group named %q, which the regexp does not have", ref, name)
			if d := leadingDigits(name); !braced && d != "" {
				msg += fmt.Sprintf(" (write ${%s}%s)", d, name[len(d):])
			}
			return msg
		}
	}
	return ""
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// isExtension reports whether s is a valid extension: 1 to 32 of
// [0-9A-Za-z_.+-]. (Hand-written, as isLowerHex: these run for every user
// of every push, and the regexps were a fifth of a 1000-user push's CPU.)
func isExtension(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || c == '.' || c == '+' || c == '-') {
			return false
		}
	}
	return true
}

// isLowerHex reports whether s is exactly n lowercase hex digits.
func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// last is the last element of a field path ("hq.client_key_pem" →
// "client_key_pem").
func last(path string) string { return path[strings.LastIndexByte(path, '.')+1:] }

// srvService checks an SRV service label: "_service._proto" (RFC 2782),
// proto udp, tcp or tls; "" = the transport's default.
func (v *validator) srvService(p, s string) {
	if s == "" {
		return
	}
	if !srvServiceRe.MatchString(s) {
		v.add(p, "bad SRV service %q: want _service._proto, e.g. _sips._tcp or _sipinternaltls._tcp", s)
	}
}

var srvServiceRe = regexp.MustCompile(`^_[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\._(udp|tcp|tls|sctp)$`)
