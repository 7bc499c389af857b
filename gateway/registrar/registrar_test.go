package registrar

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/digest"
	"github.com/outpost/outpost/gateway/siptest"
)

const realm = "test.local"

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func user(ext, pw string) User {
	return User{Extension: ext, HA1MD5: digest.HA1(digest.MD5, ext, realm, pw), HA1SHA256: digest.HA1(digest.SHA256, ext, realm, pw)}
}

func newTestRegistrar(t *testing.T, cfg Config, p Persister) (*Registrar, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	if cfg.Realm == "" {
		cfg.Realm = realm
	}
	if cfg.Users == nil {
		cfg.Users = []User{user("1001", "pw1001"), user("1002", "pw1002")}
	}
	r, err := New(cfg, p, nil, WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

// msg is a REGISTER written as wire text.
type msg struct {
	aor, callID string
	cseq        int
	contacts    []string
	expires     string // Expires header, "" = none
	authz       string
	src         string
	extra       []string // more header lines
}

func (m msg) request(t *testing.T) *sip.Request {
	t.Helper()
	if m.callID == "" {
		m.callID = "call-1"
	}
	if m.cseq == 0 {
		m.cseq = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, "REGISTER sip:%s SIP/2.0\r\n", realm)
	b.WriteString("Via: SIP/2.0/UDP 198.18.0.10:5060;branch=z9hG4bK" + strconv.Itoa(m.cseq) + m.callID + "\r\n")
	b.WriteString("Max-Forwards: 70\r\n")
	fmt.Fprintf(&b, "From: <sip:%s@%s>;tag=abc\r\nTo: <sip:%s@%s>\r\n", m.aor, realm, m.aor, realm)
	fmt.Fprintf(&b, "Call-ID: %s\r\nCSeq: %d REGISTER\r\n", m.callID, m.cseq)
	for _, c := range m.contacts {
		b.WriteString("Contact: " + c + "\r\n")
	}
	if m.expires != "" {
		b.WriteString("Expires: " + m.expires + "\r\n")
	}
	if m.authz != "" {
		b.WriteString("Authorization: " + m.authz + "\r\n")
	}
	for _, h := range m.extra {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("User-Agent: test-phone\r\nContent-Length: 0\r\n\r\n")
	req := siptest.Parse[*sip.Request](t, b.String())
	src := m.src
	if src == "" {
		src = "198.18.0.10:5060"
	}
	req.SetSource(src)
	req.SetTransport("UDP")
	return req
}

// register performs the challenge round trip and returns the final answer.
func register(t *testing.T, r *Registrar, m msg, password string) *sip.Response {
	t.Helper()
	res := r.HandleRegister(m.request(t), "udp:127.0.0.1:5060")
	if res.StatusCode != 401 {
		return res
	}
	m.authz = answer(t, res, "MD5", m.aor, password, 1)
	m.cseq = max(m.cseq, 1) + 1
	return r.HandleRegister(m.request(t), "udp:127.0.0.1:5060")
}

// answer computes credentials for a REGISTER's challenge of algorithm
// alg with the product's digest client (independent of gateway/digest).
func answer(t *testing.T, res *sip.Response, alg, user, password string, nc int) string {
	t.Helper()
	return siptest.Answer(t, res, siptest.Creds{User: user, Password: password, Method: "REGISTER", URI: "sip:" + realm, Algorithm: alg, NC: nc})
}

func contactsOf(res *sip.Response) []string {
	var out []string
	for _, h := range res.GetHeaders("Contact") {
		out = append(out, h.Value())
	}
	return out
}

func TestChallengeOrderAndBothAlgorithms(t *testing.T) {
	for _, order := range [][]digest.Algorithm{{digest.MD5, digest.SHA256}, {digest.SHA256, digest.MD5}} {
		r, _ := newTestRegistrar(t, Config{Algorithms: order}, nil)
		res := r.HandleRegister(msg{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10>"}}.request(t), "")
		if res.StatusCode != 401 {
			t.Fatalf("status %d, want 401", res.StatusCode)
		}
		hs := res.GetHeaders("WWW-Authenticate")
		if len(hs) != 2 || !strings.Contains(hs[0].Value(), "algorithm="+string(order[0])) {
			t.Fatalf("challenges %v, want %v first", hs, order[0])
		}
		for _, alg := range order {
			m := msg{aor: "1001", cseq: 2, callID: "c-" + string(alg), contacts: []string{"<sip:1001@198.18.0.10>"}}
			m.authz = answer(t, res, string(alg), "1001", "pw1001", 1)
			if got := r.HandleRegister(m.request(t), ""); got.StatusCode != 200 {
				t.Errorf("%s: status %d %s", alg, got.StatusCode, got.Reason)
			}
			res = r.HandleRegister(msg{aor: "1001", callID: "again", contacts: []string{"<sip:1001@198.18.0.10>"}}.request(t), "")
		}
	}
}

func TestRegisterContactsAndExpires(t *testing.T) {
	r, clk := newTestRegistrar(t, Config{MinExpires: 60, MaxExpires: 3600}, nil)
	res := register(t, r, msg{aor: "1001", expires: "600", contacts: []string{
		"<sip:1001@198.18.0.10:5060>;expires=120",   // parameter wins over header
		"<sip:1001@198.18.0.11:5060>",               // header applies
		"<sip:1001@198.18.0.12:5060>;expires=99999", // clamped to max
	}}, "pw1001")
	if res.StatusCode != 200 {
		t.Fatalf("status %d %s", res.StatusCode, res.Reason)
	}
	got := strings.Join(contactsOf(res), " | ")
	for _, want := range []string{"198.18.0.10:5060>;expires=120", "198.18.0.11:5060>;expires=600", "198.18.0.12:5060>;expires=3600"} {
		if !strings.Contains(got, want) {
			t.Errorf("200 contacts %q lack %q", got, want)
		}
	}
	if res.GetHeader("Date") == nil {
		t.Error("200 without Date")
	}
	if n := len(r.Lookup("1001")); n != 3 {
		t.Fatalf("%d bindings, want 3", n)
	}
	// A second REGISTER (new Call-ID) adds a fourth; the 200 lists all four.
	res = register(t, r, msg{aor: "1001", callID: "other", contacts: []string{"<sip:1001@198.18.0.13>"}}, "pw1001")
	if n := len(contactsOf(res)); n != 4 {
		t.Fatalf("200 lists %d contacts, want 4: %v", n, contactsOf(res))
	}
	// Bindings expire on time, each by its own expires.
	clk.add(121 * time.Second)
	if n, _ := r.tbl.expire(clk.now()); n != 1 {
		t.Fatalf("expired %d, want 1", n)
	}
	clk.add(600 * time.Second)
	r.expire()
	if bs := r.Lookup("1001"); len(bs) != 2 || strings.Contains(bs[0].Contact+bs[1].Contact, "198.18.0.11") {
		t.Fatalf("after 721 s, want only the two 3600 s bindings: %+v", bs)
	}
}

func TestQueryWithoutContact(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{}, nil)
	register(t, r, msg{aor: "1002", contacts: []string{"<sip:1002@198.18.0.20>"}}, "pw1002")
	res := register(t, r, msg{aor: "1002", callID: "q"}, "pw1002")
	if res.StatusCode != 200 || len(contactsOf(res)) != 1 {
		t.Fatalf("query: %d %v", res.StatusCode, contactsOf(res))
	}
}

func TestIntervalTooBrief(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{MinExpires: 60}, nil)
	res := register(t, r, msg{aor: "1001", expires: "30", contacts: []string{"<sip:1001@198.18.0.10>"}}, "pw1001")
	if res.StatusCode != 423 {
		t.Fatalf("status %d, want 423", res.StatusCode)
	}
	if h := res.GetHeader("Min-Expires"); h == nil || h.Value() != "60" {
		t.Fatalf("Min-Expires %v, want 60", h)
	}
	if len(r.Lookup("1001")) != 0 {
		t.Fatal("binding created despite 423")
	}
}

func TestUnregister(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{}, nil)
	register(t, r, msg{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10>", "<sip:1001@198.18.0.11>"}}, "pw1001")
	res := register(t, r, msg{aor: "1001", callID: "x", contacts: []string{"<sip:1001@198.18.0.10>;expires=0"}}, "pw1001")
	if res.StatusCode != 200 || len(contactsOf(res)) != 1 || len(r.Lookup("1001")) != 1 {
		t.Fatalf("single unregister: %d %v", res.StatusCode, contactsOf(res))
	}
	// "*" needs Expires: 0 and no other contact.
	res = register(t, r, msg{aor: "1001", callID: "y", contacts: []string{"*"}, expires: "60"}, "pw1001")
	if res.StatusCode != 400 {
		t.Fatalf("wildcard with Expires 60: %d, want 400", res.StatusCode)
	}
	res = register(t, r, msg{aor: "1001", callID: "y", contacts: []string{"*"}, expires: "0"}, "pw1001")
	if res.StatusCode != 200 || len(r.Lookup("1001")) != 0 || len(contactsOf(res)) != 0 {
		t.Fatalf("wildcard unregister: %d, %d left", res.StatusCode, len(r.Lookup("1001")))
	}
	if st := r.Stats(); st.Unregistered != 2 {
		t.Errorf("unregistered counter %d, want 2", st.Unregistered)
	}
}

func TestCSeqOrdering(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{}, nil)
	m := msg{aor: "1001", callID: "same", cseq: 10, contacts: []string{"<sip:1001@198.18.0.10>"}}
	if res := register(t, r, m, "pw1001"); res.StatusCode != 200 {
		t.Fatal(res.StatusCode)
	} // stored CSeq is now 11
	m.cseq = 5 // older request of the same Call-ID: refused, binding unchanged
	if res := register(t, r, m, "pw1001"); res.StatusCode != 500 {
		t.Fatalf("out of order: %d, want 500", res.StatusCode)
	}
	m.cseq = 20
	if res := register(t, r, m, "pw1001"); res.StatusCode != 200 {
		t.Fatalf("in order: %d", res.StatusCode)
	}
	if bs := r.Lookup("1001"); len(bs) != 1 || bs[0].CSeq != 21 {
		t.Fatalf("bindings %+v", bs)
	}
}

func TestWrongPasswordAndGuessLimit(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{AuthFailLimit: 3}, nil)
	for i := range 3 {
		res := register(t, r, msg{aor: "1001", callID: fmt.Sprint("g", i), contacts: []string{"<sip:1001@198.18.0.66>"}, src: "198.18.0.66:5060"}, "guess")
		if res.StatusCode != 403 || res.Reason != "Forbidden" {
			t.Fatalf("guess %d: %d %s", i, res.StatusCode, res.Reason)
		}
	}
	// The budget is spent: further failures are told to wait...
	res := register(t, r, msg{aor: "1001", callID: "more", contacts: []string{"<sip:1001@198.18.0.66>"}, src: "198.18.0.66:5061"}, "guess")
	if res.StatusCode != 503 || !strings.Contains(res.Reason, "Too Many") || res.GetHeader("Retry-After") == nil {
		t.Fatalf("blocked source and user: %d %s", res.StatusCode, res.Reason)
	}
	// ...but the right password is still checked and accepted.
	res = register(t, r, msg{aor: "1001", callID: "right", contacts: []string{"<sip:1001@198.18.0.66>"}, src: "198.18.0.66:5060"}, "pw1001")
	if res.StatusCode != 200 {
		t.Fatalf("right password while blocked: %d %s", res.StatusCode, res.Reason)
	}
	st := r.Stats()
	if st.AuthFailures != 4 || st.AuthBlocked != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestBlockedSourceRecovers(t *testing.T) {
	r, clk := newTestRegistrar(t, Config{AuthFailLimit: 2}, nil)
	for i := range 3 {
		register(t, r, msg{aor: "1001", callID: fmt.Sprint("g", i), contacts: []string{"<sip:1001@198.18.0.66>"}}, "guess")
	}
	if r.Stats().AuthBlocked != 1 {
		t.Fatalf("not blocked: %+v", r.Stats())
	}
	clk.add(time.Minute) // the whole budget refills within the window
	if res := register(t, r, msg{aor: "1001", callID: "again", contacts: []string{"<sip:1001@198.18.0.66>"}}, "guess"); res.StatusCode != 403 {
		t.Fatalf("after refill: %d %s, want a plain 403", res.StatusCode, res.Reason)
	}
}

func TestUnknownUserAndForeignAOR(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{}, nil)
	if res := register(t, r, msg{aor: "9999", contacts: []string{"<sip:9999@198.18.0.10>"}}, "x"); res.StatusCode != 403 {
		t.Fatalf("unknown user: %d", res.StatusCode)
	}
	// 1002's credentials cannot register 1001.
	m := msg{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10>"}}
	ch := r.HandleRegister(m.request(t), "")
	m.authz = answer(t, ch, "MD5", "1002", "pw1002", 1)
	m.cseq = 2
	if res := r.HandleRegister(m.request(t), ""); res.StatusCode != 403 {
		t.Fatalf("foreign AOR: %d", res.StatusCode)
	}
}

func TestStaleNonceAndReplay(t *testing.T) {
	r, clk := newTestRegistrar(t, Config{}, nil)
	m := msg{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10>"}}
	ch := r.HandleRegister(m.request(t), "")
	m.authz = answer(t, ch, "MD5", "1001", "pw1001", 1)
	m.cseq = 2
	if res := r.HandleRegister(m.request(t), ""); res.StatusCode != 200 {
		t.Fatal(res.StatusCode)
	}
	m.cseq = 3 // same nonce and nc again: a replay is challenged afresh
	if res := r.HandleRegister(m.request(t), ""); res.StatusCode != 401 || strings.Contains(res.GetHeader("WWW-Authenticate").Value(), "stale=true") {
		t.Fatalf("replay: %d %v", res.StatusCode, res.GetHeader("WWW-Authenticate"))
	}
	clk.add(time.Hour) // the nonce is now old: the right answer is told stale=true
	m.authz = answer(t, ch, "MD5", "1001", "pw1001", 2)
	m.cseq = 4
	res := r.HandleRegister(m.request(t), "")
	if res.StatusCode != 401 || !strings.Contains(res.GetHeader("WWW-Authenticate").Value(), "stale=true") {
		t.Fatalf("stale: %d %v", res.StatusCode, res.GetHeader("WWW-Authenticate"))
	}
}

func TestStormGuard(t *testing.T) {
	r, clk := newTestRegistrar(t, Config{StormRate: 2, RetryAfter: 4 * time.Second}, nil)
	codes := []int{}
	for i := range 4 {
		res := r.HandleRegister(msg{aor: "1001", callID: fmt.Sprint("s", i), contacts: []string{"<sip:1001@198.18.0.10>"}}.request(t), "")
		codes = append(codes, res.StatusCode)
		if res.StatusCode == 503 {
			ra, err := strconv.Atoi(res.GetHeader("Retry-After").Value())
			if err != nil || ra < 4 || ra > 8 {
				t.Fatalf("Retry-After %v, want 4..8", res.GetHeader("Retry-After"))
			}
		}
	}
	if fmt.Sprint(codes) != "[401 401 503 503]" {
		t.Fatalf("codes %v", codes)
	}
	clk.add(time.Second) // the bucket refills at the configured rate
	if res := r.HandleRegister(msg{aor: "1001", callID: "later", contacts: []string{"<sip:1001@198.18.0.10>"}}.request(t), ""); res.StatusCode != 401 {
		t.Fatalf("after refill: %d", res.StatusCode)
	}
	if r.Stats().StormRefused != 2 {
		t.Fatalf("storm counter %d", r.Stats().StormRefused)
	}
}

func TestSameInstanceReplacesContact(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{}, nil)
	inst := `;+sip.instance="<urn:uuid:00000000-0000-1000-8000-000A95A0E128>";reg-id=1`
	register(t, r, msg{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10>" + inst}}, "pw1001")
	register(t, r, msg{aor: "1001", callID: "new-ip", contacts: []string{"<sip:1001@198.18.0.99>" + inst}}, "pw1001")
	if bs := r.Lookup("1001"); len(bs) != 1 || !strings.Contains(bs[0].Contact, "198.18.0.99") {
		t.Fatalf("bindings %+v", bs)
	}
}

func TestMaxContactsEvictsOldest(t *testing.T) {
	r, clk := newTestRegistrar(t, Config{MaxContacts: 2}, nil)
	for i := range 3 {
		register(t, r, msg{aor: "1001", callID: fmt.Sprint("m", i), contacts: []string{fmt.Sprintf("<sip:1001@198.18.0.%d>", 10+i)}}, "pw1001")
		clk.add(time.Second)
	}
	bs := r.Lookup("1001")
	if len(bs) != 2 || strings.Contains(bs[0].Contact+bs[1].Contact, "198.18.0.10>") {
		t.Fatalf("bindings %+v", bs)
	}
}

func TestMalformedRegister(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{}, nil)
	cases := []msg{
		{aor: "", contacts: []string{"<sip:x@198.18.0.10>"}},
		{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10>"}, authz: "Digest garbage"},
		{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10>"}, authz: "Basic Zm9vOmJhcg=="},
	}
	for i, m := range cases {
		if res := r.HandleRegister(m.request(t), ""); res.StatusCode != 400 {
			t.Errorf("case %d: %d %s, want 400", i, res.StatusCode, res.Reason)
		}
	}
	if res := register(t, r, msg{aor: "1001", expires: "soon", contacts: []string{"<sip:1001@198.18.0.10>"}}, "pw1001"); res.StatusCode != 400 {
		t.Errorf("bad Expires: %d", res.StatusCode)
	}
}

// memPersister is an in-memory Persister.
type memPersister struct {
	mu   sync.Mutex
	rows map[BindingKey]Binding
}

func (m *memPersister) LoadBindings(_ context.Context, now time.Time) ([]Binding, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Binding
	for _, b := range m.rows {
		if b.Expires.After(now) {
			out = append(out, b)
		}
	}
	return out, nil
}

func (m *memPersister) SaveBindings(_ context.Context, ups []Binding, dels []BindingKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range ups {
		m.rows[b.key()] = b
	}
	for _, k := range dels {
		delete(m.rows, k)
	}
	return nil
}

func TestPersistAndRestore(t *testing.T) {
	p := &memPersister{rows: map[BindingKey]Binding{}}
	r, _ := newTestRegistrar(t, Config{}, p)
	register(t, r, msg{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10>"}}, "pw1001")
	register(t, r, msg{aor: "1002", contacts: []string{"<sip:1002@198.18.0.20>"}}, "pw1002")
	register(t, r, msg{aor: "1002", callID: "gone", contacts: []string{"<sip:1002@198.18.0.21>"}}, "pw1002")
	register(t, r, msg{aor: "1002", callID: "gone", cseq: 5, contacts: []string{"<sip:1002@198.18.0.21>;expires=0"}}, "pw1002")
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(p.rows) != 2 {
		t.Fatalf("persisted %d rows, want 2: %v", len(p.rows), p.rows)
	}
	// A new registrar (a restarted daemon) serves the same bindings.
	r2, _ := newTestRegistrar(t, Config{}, p)
	if err := r2.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(r2.Lookup("1001")) != 1 || len(r2.Lookup("1002")) != 1 {
		t.Fatalf("restored %v", r2.Bindings())
	}
}

func TestReconfigureDropsRemovedUsers(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{}, nil)
	register(t, r, msg{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10>"}}, "pw1001")
	register(t, r, msg{aor: "1002", contacts: []string{"<sip:1002@198.18.0.20>"}}, "pw1002")
	if err := r.Reconfigure(t.Context(), Config{Realm: realm, Users: []User{user("1001", "pw1001")}}); err != nil {
		t.Fatal(err)
	}
	if len(r.Lookup("1001")) != 1 || len(r.Lookup("1002")) != 0 {
		t.Fatalf("after removing 1002: %v", r.Bindings())
	}
	if res := register(t, r, msg{aor: "1002", callID: "again", contacts: []string{"<sip:1002@198.18.0.20>"}}, "pw1002"); res.StatusCode != 403 {
		t.Fatalf("removed user registers: %d", res.StatusCode)
	}
}

// A phone that reuses a nonce from before a restart (another key) must be
// asked to retry (stale), not refused as a password guesser.
func TestNonceFromBeforeRestartIsStale(t *testing.T) {
	before, _ := newTestRegistrar(t, Config{}, nil)
	after, _ := newTestRegistrar(t, Config{}, nil)
	m := msg{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10>"}}
	m.authz = answer(t, before.HandleRegister(m.request(t), ""), "MD5", "1001", "pw1001", 1)
	m.cseq = 2
	res := after.HandleRegister(m.request(t), "")
	if res.StatusCode != 401 || !strings.Contains(res.GetHeader("WWW-Authenticate").Value(), "stale=true") {
		t.Fatalf("old nonce after restart: %d %v", res.StatusCode, res.GetHeader("WWW-Authenticate"))
	}
	if after.Stats().AuthFailures != 0 {
		t.Fatal("a stale nonce counted as a failed authentication")
	}
}

func inviteFrom(t *testing.T, from, proxyAuthz string) *sip.Request {
	t.Helper()
	m := "INVITE sip:1002@" + realm + " SIP/2.0\r\nVia: SIP/2.0/UDP 198.18.0.10:5060;branch=z9hG4bKinv\r\nMax-Forwards: 70\r\n" +
		"From: <sip:" + from + "@" + realm + ">;tag=f\r\nTo: <sip:1002@" + realm + ">\r\nCall-ID: inv-1\r\nCSeq: 1 INVITE\r\n"
	if proxyAuthz != "" {
		m += "Proxy-Authorization: " + proxyAuthz + "\r\n"
	}
	req := siptest.Parse[*sip.Request](t, m+"Content-Length: 0\r\n\r\n")
	req.SetSource("198.18.0.10:5060")
	return req
}

// answerProxy computes Proxy-Authorization for an INVITE's 407.
func answerProxy(t *testing.T, res *sip.Response, user, password string) string {
	t.Helper()
	return siptest.Answer(t, res, siptest.Creds{User: user, Password: password, Method: "INVITE", URI: "sip:1002@" + realm})
}

func TestAuthorizeCall(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{}, nil)
	_, res := r.AuthorizeCall(inviteFrom(t, "1001", ""))
	if res == nil || res.StatusCode != 407 || res.GetHeader("Proxy-Authenticate") == nil {
		t.Fatalf("no credentials: %v", res)
	}
	user, ok := r.AuthorizeCall(inviteFrom(t, "1001", answerProxy(t, res, "1001", "pw1001")))
	if ok != nil || user != "1001" {
		t.Fatalf("right credentials: %q %v", user, ok)
	}
	// 1002's credentials cannot place a call as 1001.
	_, res2 := r.AuthorizeCall(inviteFrom(t, "1001", ""))
	if _, bad := r.AuthorizeCall(inviteFrom(t, "1001", answerProxy(t, res2, "1002", "pw1002"))); bad == nil || bad.StatusCode != 403 {
		t.Fatalf("spoofed From: %v", bad)
	}
	_, res3 := r.AuthorizeCall(inviteFrom(t, "1001", ""))
	if _, bad := r.AuthorizeCall(inviteFrom(t, "1001", answerProxy(t, res3, "1001", "guess"))); bad == nil || bad.StatusCode != 403 {
		t.Fatalf("wrong password: %v", bad)
	}
	if st := r.Stats(); st.AuthFailures != 2 {
		t.Fatalf("auth failures %d, want 2", st.AuthFailures)
	}
}

// TestPresence: the hook hears an AOR's first binding, its last going (by
// un-registration, expiry and the user's removal), and nothing for AORs
// that did not change.
func TestPresence(t *testing.T) {
	r, clk := newTestRegistrar(t, Config{Users: []User{user("1001", "pw1001"), user("1002", "pw1002"), user("1003", "pw1003")}}, nil)
	var got []string
	r.OnPresence(func(aor string, present bool) { got = append(got, fmt.Sprintf("%s=%v", aor, present)) })
	take := func() []string {
		r.notifyPresence()
		out := got
		got = nil
		return out
	}
	register(t, r, msg{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10>"}, expires: "60"}, "pw1001")
	register(t, r, msg{aor: "1002", contacts: []string{"<sip:1002@198.18.0.20>"}, expires: "3600"}, "pw1002")
	register(t, r, msg{aor: "1003", contacts: []string{"<sip:1003@198.18.0.30>"}, expires: "3600"}, "pw1003")
	if g := take(); !slices.Equal(g, []string{"1001=true", "1002=true", "1003=true"}) {
		t.Fatalf("after three registrations: %v", g)
	}
	if g := take(); len(g) != 0 {
		t.Fatalf("nothing changed, yet: %v", g)
	}
	register(t, r, msg{aor: "1002", callID: "x", contacts: []string{"*"}, expires: "0"}, "pw1002")
	clk.add(2 * time.Minute)
	var unbound []string
	r.SetOnUnbound(func(aor string) { unbound = append(unbound, aor) })
	r.expire()
	if !slices.Equal(unbound, []string{"1001"}) {
		t.Fatalf("told of %v on expiry, want 1001's lapsed binding", unbound)
	}
	if g := take(); !slices.Equal(g, []string{"1001=false", "1002=false"}) {
		t.Fatalf("after un-registration and expiry: %v", g)
	}
	if err := r.Reconfigure(t.Context(), Config{Realm: realm, Users: []User{user("1001", "pw1001")}}); err != nil {
		t.Fatal(err)
	}
	if g := take(); !slices.Equal(g, []string{"1003=false"}) {
		t.Fatalf("after removing user 1003: %v", g)
	}
	if p := r.Present(); len(p) != 0 {
		t.Fatalf("Present() = %v, want none", p)
	}
}

// TestMSRRegister: a REGISTER with MSR headers is authenticated against the
// MSR account (not a user), feeds the hook instead of the bindings, and is
// refused with the wrong password or a phone's credentials.
func TestMSRRegister(t *testing.T) {
	msrUser := user("msr", "mediaserver")
	r, _ := newTestRegistrar(t, Config{MSR: &MSRAccount{User: msrUser, HeaderPrefix: "P-Eltex-MSR-"}}, nil)
	var got []MSRRegistration
	r.OnMSR(func(m MSRRegistration) { got = append(got, m) })
	m := msg{aor: "eth1;1", contacts: []string{"<sip:eth1;1@198.18.5.2:5060>"}, expires: "300", extra: []string{
		"P-Eltex-MSR-Name: msr-b", "P-Eltex-MSR-Iface-Name: eth1(198.18.5.2)", "P-Eltex-MSR-Iface-Addr: 198.18.5.2",
		"P-Eltex-MSR-Acc-Id: 1", "P-Eltex-MSR-Load: 40"}}
	roundTrip := func(m msg, username, password string) *sip.Response {
		res := r.HandleRegister(m.request(t), "udp:127.0.0.1:5060")
		if res.StatusCode != 401 {
			t.Fatalf("first MSR REGISTER: %d, want a 401 challenge", res.StatusCode)
		}
		m.authz = answer(t, res, "MD5", username, password, 1)
		m.cseq = 2
		return r.HandleRegister(m.request(t), "udp:127.0.0.1:5060")
	}
	if res := roundTrip(m, "msr", "wrong"); res.StatusCode != 403 || len(got) != 0 {
		t.Fatalf("wrong MSR password: %d, hook called %d times", res.StatusCode, len(got))
	}
	m.callID = "phone-creds"
	if res := roundTrip(m, "1001", "pw1001"); res.StatusCode != 403 || len(got) != 0 {
		t.Fatalf("a phone's credentials on an MSR REGISTER: %d, hook called %d times", res.StatusCode, len(got))
	}
	m.callID = "good"
	res := roundTrip(m, "msr", "mediaserver")
	if res.StatusCode != 200 || len(got) != 1 {
		t.Fatalf("MSR REGISTER: %d, hook called %d times", res.StatusCode, len(got))
	}
	if g := got[0]; g.Expires != 300 || g.Headers["P-Eltex-MSR-Name"] != "msr-b" || g.Headers["P-Eltex-MSR-Load"] != "40" ||
		!strings.Contains(g.Contact, "198.18.5.2") {
		t.Fatalf("hook got %+v", g)
	}
	if cs := contactsOf(res); len(cs) != 1 || !strings.Contains(cs[0], "expires=300") {
		t.Fatalf("200 contacts %v", cs)
	}
	if len(r.Bindings()) != 0 {
		t.Fatalf("an MSR REGISTER created phone bindings: %v", r.Bindings())
	}
	// A phone's REGISTER is unaffected by the MSR account.
	if res := register(t, r, msg{aor: "1001", callID: "phone", contacts: []string{"<sip:1001@198.18.0.10>"}}, "pw1001"); res.StatusCode != 200 {
		t.Fatalf("phone REGISTER: %d", res.StatusCode)
	}
}

func TestBindingTargets(t *testing.T) {
	r, _ := newTestRegistrar(t, Config{}, nil)
	if res := register(t, r, msg{aor: "1001", contacts: []string{"<sip:1001@198.18.0.10:5060>"}, src: "198.18.0.99:40000"}, "pw1001"); res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	bs := r.Lookup("1001")
	if len(bs) != 1 {
		t.Fatalf("%d bindings", len(bs))
	}
	src, ok1 := bs[0].SourceTarget()
	local, ok2 := bs[0].LocalTarget()
	if !ok1 || !ok2 || src.String() != "udp:198.18.0.99:40000" || local.String() != "udp:127.0.0.1:5060" {
		t.Errorf("SourceTarget %v %v, LocalTarget %v %v", src, ok1, local, ok2)
	}
	if _, ok := (Binding{Source: "udp:pbx.example:5060"}).SourceTarget(); ok {
		t.Error("a source naming a host parsed as an address")
	}
}

// A spent budget stays spent until one failure has refilled
// (window/limit, what Retry-After says), not merely until the clock moves.
func TestBlockedUntilAFailureRefills(t *testing.T) {
	r, clk := newTestRegistrar(t, Config{AuthFailLimit: 2}, nil)
	guess := func(id string) int {
		return register(t, r, msg{aor: "1001", callID: id, contacts: []string{"<sip:1001@198.18.0.66>"}}, "guess").StatusCode
	}
	if a, b := guess("g1"), guess("g2"); a != 403 || b != 403 {
		t.Fatalf("within the budget: %d %d", a, b)
	}
	clk.add(time.Second)
	if c := guess("g3"); c != 503 {
		t.Fatalf("1 s after the budget was spent: %d, want 503", c)
	}
	clk.add(30 * time.Second) // 60 s / 2: one failure refilled
	if c := guess("g4"); c != 403 {
		t.Fatalf("after one refill step: %d, want 403", c)
	}
	if c := guess("g5"); c != 503 {
		t.Fatalf("the refilled failure spent again: %d, want 503", c)
	}
}
