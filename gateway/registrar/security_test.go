package registrar

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"

	icdigest "github.com/icholy/digest"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/siptest"
)

// forgedAuthz is an Authorization whose response is made up: what anyone
// can send without knowing a password.
func forgedAuthz(user, nonce string, i int) string {
	return fmt.Sprintf(`Digest username=%q, realm=%q, nonce=%q, uri="sip:%s", response="%032x", algorithm=MD5, qop=auth, nc=00000001, cnonce="c%d"`,
		user, realm, nonce, realm, i*7919+1, i)
}

// madeUpNonce is nonce-shaped (43 base64url characters) but never issued:
// its MAC does not verify.
func madeUpNonce(i int) string {
	s := strings.Repeat("A", 40) + fmt.Sprintf("%03d", i%1000)
	return s[:42] + "A"
}

// challengeNonce fetches a genuine nonce with a request without
// credentials.
func challengeNonce(t *testing.T, r *Registrar, src string) *sip.Response {
	t.Helper()
	res := r.HandleRegister(msg{aor: "1001", callID: "nonce-" + src, contacts: []string{"<sip:1001@198.18.0.99>"}, src: src}.request(t), "")
	if res.StatusCode != 401 {
		t.Fatalf("request without credentials: %d, want 401", res.StatusCode)
	}
	return res
}

// Item 2: forged failures from the phone's own address (any port, made-up
// users and nonces, and wrong passwords for the phone's user) must not make
// the box refuse the phone's right credentials.
func TestForgedFailuresDoNotLockOutPhone(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{}, nil) // default budget: 10 a minute
	const phoneIP = "198.18.0.10"
	for i := range 50 {
		src := phoneIP + ":" + strconv.Itoa(40000+i)
		var m msg
		switch i % 4 {
		case 0: // an unknown user with a made-up nonce
			u := "u" + strconv.Itoa(i)
			m = msg{aor: u, authz: forgedAuthz(u, madeUpNonce(i), i)}
		case 1: // the phone's user with a made-up nonce
			m = msg{aor: "1001", authz: forgedAuthz("1001", madeUpNonce(i), i)}
		case 2: // the phone's AOR, someone else's (made-up) user name
			m = msg{aor: "1001", authz: forgedAuthz("x"+strconv.Itoa(i), "bogus-"+strconv.Itoa(i), i)}
		case 3: // the phone's user, a genuine nonce, a wrong password
			ch := challengeNonce(t, r, src)
			m = msg{aor: "1001", authz: answer(t, ch, "MD5", "1001", "guess"+strconv.Itoa(i), 1)}
		}
		m.callID, m.cseq, m.src = "forged-"+strconv.Itoa(i), 2, src
		m.contacts = []string{"<sip:1001@198.18.0.66>"}
		if res := r.HandleRegister(m.request(t), ""); res.StatusCode == 200 {
			t.Fatalf("forged request %d accepted", i)
		}
	}
	res := register(t, r, msg{aor: "1001", callID: "phone", contacts: []string{"<sip:1001@198.18.0.10>"}, src: phoneIP + ":5060"}, "pw1001")
	if res.StatusCode != 200 {
		t.Fatalf("the phone's right credentials after 50 forged failures: %d %s, want 200", res.StatusCode, res.Reason)
	}
	if bs := r.Lookup("1001"); len(bs) != 1 || !strings.Contains(bs[0].Contact, "198.18.0.10") {
		t.Fatalf("bindings %+v", bs)
	}
	if st := r.Stats(); st.AuthFailures == 0 || st.AuthBlocked == 0 {
		t.Errorf("the forgeries left no trace in the stats: %+v", st)
	}
}

// Item 2: the budget still works: a user's own wrong passwords from one
// source throttle that user at that source (503 + Retry-After instead of
// 403), and only that pair; right credentials still register.
func TestOwnWrongPasswordsThrottleUserAndSource(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{AuthFailLimit: 3}, nil)
	const src = "198.18.0.66:5060"
	wrong := func(aor, id string) *sip.Response {
		return register(t, r, msg{aor: aor, callID: id, contacts: []string{"<sip:" + aor + "@198.18.0.66>"}, src: src}, "guess")
	}
	for i := range 3 {
		if res := wrong("1001", fmt.Sprint("g", i)); res.StatusCode != 403 {
			t.Fatalf("guess %d: %d %s, want 403", i, res.StatusCode, res.Reason)
		}
	}
	res := wrong("1001", "g3")
	if res.StatusCode != 503 {
		t.Fatalf("guess over the budget: %d %s, want 503", res.StatusCode, res.Reason)
	}
	if ra, err := strconv.Atoi(res.GetHeader("Retry-After").Value()); err != nil || ra < 1 || ra > 60 {
		t.Fatalf("Retry-After %v", res.GetHeader("Retry-After"))
	}
	// Another user at the same source has its own budget.
	if res := wrong("1002", "other-user"); res.StatusCode != 403 {
		t.Fatalf("other user, same source: %d %s, want 403", res.StatusCode, res.Reason)
	}
	// The same user from another source too.
	if res := register(t, r, msg{aor: "1001", callID: "other-src", contacts: []string{"<sip:1001@198.18.0.67>"}, src: "198.18.0.67:5060"}, "guess"); res.StatusCode != 403 {
		t.Fatalf("same user, other source: %d %s, want 403", res.StatusCode, res.Reason)
	}
	// Credentials that verify are never refused, even while throttled.
	if res := register(t, r, msg{aor: "1001", callID: "right", contacts: []string{"<sip:1001@198.18.0.66>"}, src: src}, "pw1001"); res.StatusCode != 200 {
		t.Fatalf("right password while throttled: %d %s, want 200", res.StatusCode, res.Reason)
	}
	if st := r.Stats(); st.AuthFailures != 6 || st.AuthBlocked != 1 {
		t.Errorf("stats %+v, want 6 failures, 1 blocked", st)
	}
}

// Item 2: unknown users spend a per-source budget of their own, which only
// slows down requests naming unknown users.
func TestUnknownUsersHaveTheirOwnBudget(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{AuthFailLimit: 3}, nil)
	const src = "198.18.0.70:5060"
	for i := range 3 {
		u := fmt.Sprint("99", i)
		if res := register(t, r, msg{aor: u, callID: u, contacts: []string{"<sip:x@198.18.0.70>"}, src: src}, "x"); res.StatusCode != 403 {
			t.Fatalf("unknown user %d: %d, want 403", i, res.StatusCode)
		}
	}
	if res := register(t, r, msg{aor: "9999", callID: "more", contacts: []string{"<sip:x@198.18.0.70>"}, src: src}, "x"); res.StatusCode != 503 {
		t.Fatalf("unknown user over the budget: %d, want 503", res.StatusCode)
	}
	// A real user's wrong password from the same source is not throttled.
	if res := register(t, r, msg{aor: "1001", callID: "real", contacts: []string{"<sip:1001@198.18.0.70>"}, src: src}, "guess"); res.StatusCode != 403 {
		t.Fatalf("real user after unknown users: %d, want 403", res.StatusCode)
	}
}

// Item 2: a nonce the box never issued is answered with a fresh challenge
// (stale=true) without checking the response, so it is neither an oracle
// for password guesses nor a failure against the user's budget.
func TestMadeUpNonceIsNotAFailure(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{AuthFailLimit: 1}, nil)
	for i := range 5 {
		m := msg{aor: "1001", callID: fmt.Sprint("n", i), cseq: 2, contacts: []string{"<sip:1001@198.18.0.10>"}, authz: forgedAuthz("1001", madeUpNonce(i), i)}
		res := r.HandleRegister(m.request(t), "")
		if res.StatusCode != 401 || !strings.Contains(res.GetHeader("WWW-Authenticate").Value(), "stale=true") {
			t.Fatalf("made-up nonce %d: %d %v, want 401 stale=true", i, res.StatusCode, res.GetHeader("WWW-Authenticate"))
		}
	}
	if st := r.Stats(); st.AuthFailures != 0 || st.AuthBlocked != 0 {
		t.Fatalf("made-up nonces counted: %+v", st)
	}
	// The user's budget is untouched: a wrong password is a plain 403.
	if res := register(t, r, msg{aor: "1001", callID: "w", contacts: []string{"<sip:1001@198.18.0.10>"}}, "guess"); res.StatusCode != 403 {
		t.Fatalf("first wrong password: %d, want 403", res.StatusCode)
	}
}

// Item 2 for calls: AuthorizeCall follows the same rule.
func TestForgedCallFailuresDoNotLockOutCaller(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{AuthFailLimit: 3}, nil)
	for i := range 20 {
		var authz string
		switch i % 3 {
		case 0:
			authz = strings.Replace(forgedAuthz("1001", madeUpNonce(i), i), "sip:"+realm, "sip:1002@"+realm, 1)
		case 1:
			authz = strings.Replace(forgedAuthz("u"+strconv.Itoa(i), madeUpNonce(i), i), "sip:"+realm, "sip:1002@"+realm, 1)
		case 2:
			_, ch := r.AuthorizeCall(inviteFrom(t, "1001", ""))
			authz = answerProxy(t, ch, "1001", "guess")
		}
		if _, res := r.AuthorizeCall(inviteFrom(t, "1001", authz)); res == nil {
			t.Fatalf("forged INVITE %d authorized", i)
		}
	}
	_, ch := r.AuthorizeCall(inviteFrom(t, "1001", ""))
	user, res := r.AuthorizeCall(inviteFrom(t, "1001", answerProxy(t, ch, "1001", "pw1001")))
	if res != nil || user != "1001" {
		t.Fatalf("right credentials after forged failures: %q %v", user, res)
	}
}

// rfc2069 computes a response without qop: H(HA1:nonce:H(method:uri)).
func rfc2069(t *testing.T, ch *sip.Response, user, password, uri string) string {
	t.Helper()
	c, err := icdigest.ParseChallenge(ch.GetHeaders("WWW-Authenticate")[0].Value())
	if err != nil || c.Algorithm != "MD5" {
		t.Fatalf("challenge %v: %v", ch.GetHeaders("WWW-Authenticate"), err)
	}
	h := func(s string) string { s16 := md5.Sum([]byte(s)); return hex.EncodeToString(s16[:]) }
	resp := h(h(user+":"+realm+":"+password) + ":" + c.Nonce + ":" + h("REGISTER:"+uri))
	return fmt.Sprintf(`Digest username=%q, realm=%q, nonce=%q, uri=%q, response=%q, algorithm=MD5, opaque=%q`,
		user, realm, c.Nonce, uri, resp, c.Opaque)
}

// Item 3: a response without qop (RFC 2069) is refused by default: a fresh
// challenge (which offers qop="auth"), counted as a failed authentication.
// AllowNoQop accepts it.
func TestNoQopRefusedUnlessAllowed(t *testing.T) {
	for _, allow := range []bool{false, true} {
		r, _ := newTestRegistrar(t, Config{AllowNoQop: allow}, nil)
		m := msg{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10>"}}
		ch := r.HandleRegister(m.request(t), "")
		m.authz, m.cseq = rfc2069(t, ch, "1001", "pw1001", "sip:"+realm), 2
		res := r.HandleRegister(m.request(t), "")
		switch {
		case allow && res.StatusCode != 200:
			t.Fatalf("AllowNoQop: %d %s, want 200", res.StatusCode, res.Reason)
		case !allow && (res.StatusCode != 401 || !strings.Contains(res.GetHeader("WWW-Authenticate").Value(), `qop="auth"`)):
			t.Fatalf("no qop by default: %d %s, want a 401 challenge", res.StatusCode, res.Reason)
		case !allow && (r.Stats().AuthFailures != 1 || len(r.Lookup("1001")) != 0):
			t.Fatalf("no qop by default: stats %+v, bindings %v", r.Stats(), r.Lookup("1001"))
		}
	}
}

// answerURI computes qop=auth credentials for a REGISTER's challenge with
// the given digest-uri.
func answerURI(t *testing.T, ch *sip.Response, user, password, uri string) string {
	t.Helper()
	return siptest.Answer(t, ch, siptest.Creds{User: user, Password: password, Method: "REGISTER", URI: uri})
}

// Item 3: the digest-uri must designate the Request-URI's resource (RFC
// 7616 §3.4.6): same scheme and, when the digest-uri has one, the same user;
// the host and port are the box's whatever they say (SIPp signs
// "sip:BOX-IP:PORT"). A mismatch is answered 400 and spends no budget.
func TestDigestURIMustMatchRequestURI(t *testing.T) {
	cases := []struct {
		uri  string
		want int
	}{
		{"sip:" + realm, 200},
		{"sip:TEST.Local", 200},
		{"sip:" + realm + ":5060", 200},
		{"sip:" + realm + ";transport=udp", 200},
		{"sip:198.18.0.1:5070", 200}, // the box by address, as SIPp signs
		{"sips:" + realm, 400},
		{"sip:1001@" + realm, 400}, // a user the Request-URI does not name
		{"tel:1001", 400},
		{"*", 400},
		{"garbage", 400},
	}
	for i, c := range cases {
		r, _ := newTestRegistrar(t, Config{}, nil)
		m := msg{aor: "1001", callID: fmt.Sprint("u", i), contacts: []string{"<sip:1001@198.18.0.10>"}}
		ch := r.HandleRegister(m.request(t), "")
		m.authz, m.cseq = answerURI(t, ch, "1001", "pw1001", c.uri), 2
		if res := r.HandleRegister(m.request(t), ""); res.StatusCode != c.want {
			t.Errorf("uri %q: %d %s, want %d", c.uri, res.StatusCode, res.Reason, c.want)
		}
		if c.want == 400 && r.Stats().AuthFailures != 0 {
			t.Errorf("uri %q: counted as a failed authentication", c.uri)
		}
	}
	// Calls too: credentials for another Request-URI do not authorize.
	r, _ := newTestRegistrar(t, Config{}, nil)
	_, ch := r.AuthorizeCall(inviteFrom(t, "1001", ""))
	other := siptest.Answer(t, ch, siptest.Creds{User: "1001", Password: "pw1001", Method: "INVITE", URI: "sip:1003@" + realm})
	if _, res := r.AuthorizeCall(inviteFrom(t, "1001", other)); res == nil || res.StatusCode != 400 {
		t.Fatalf("INVITE with another digest-uri: %v, want 400", res)
	}
	// A digest-uri naming only the box (SIPp's) is accepted.
	_, ch = r.AuthorizeCall(inviteFrom(t, "1001", ""))
	box := siptest.Answer(t, ch, siptest.Creds{User: "1001", Password: "pw1001", Method: "INVITE", URI: "sip:198.18.0.1:5060"})
	if user, res := r.AuthorizeCall(inviteFrom(t, "1001", box)); res != nil || user != "1001" {
		t.Fatalf("INVITE with a digest-uri naming the box: %q %v", user, res)
	}
}

// Item 3: an exact replay of an accepted REGISTER's Authorization (same
// nonce, same nc) is refused with a fresh challenge and changes nothing,
// whatever the replayer puts around it. (This held before the security
// changes too: the digest package's nonce-count window refuses it.)
func TestReplayedAuthorizationRefused(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{}, nil)
	m := msg{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10>"}}
	ch := r.HandleRegister(m.request(t), "")
	m.authz, m.cseq = answer(t, ch, "MD5", "1001", "pw1001", 1), 2
	if res := r.HandleRegister(m.request(t), ""); res.StatusCode != 200 {
		t.Fatalf("first use: %d", res.StatusCode)
	}
	// The same request again, as captured (another transaction), then an
	// attacker's un-registration and new contact carrying the same header.
	for i, rep := range []msg{
		{aor: "1001", cseq: 3, contacts: []string{"<sip:1001@198.18.0.10>"}},
		{aor: "1001", callID: "evil", cseq: 9, contacts: []string{"*"}, expires: "0"},
		{aor: "1001", callID: "evil2", cseq: 9, contacts: []string{"<sip:1001@198.18.0.66>"}, src: "198.18.0.66:5060"},
	} {
		rep.authz = m.authz
		res := r.HandleRegister(rep.request(t), "")
		if res.StatusCode != 401 {
			t.Fatalf("replay %d: %d %s, want 401", i, res.StatusCode, res.Reason)
		}
	}
	if bs := r.Lookup("1001"); len(bs) != 1 || !strings.Contains(bs[0].Contact, "198.18.0.10") {
		t.Fatalf("bindings after replays: %+v", bs)
	}
}
