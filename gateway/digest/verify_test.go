package digest

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	icholy "github.com/icholy/digest"

	"github.com/outpost/outpost/gateway/siptest"
)

func newClock() *siptest.Clock { return siptest.NewClock(time.Unix(1_700_000_000, 0)) }

const testRealm = "bench.local"

var passwords = map[string]string{
	"user0001": "secret1",
	"alice":    "wonderland",
}

// lookupFor returns a Lookup over passwords for realm (HA1s computed once).
func lookupFor(realm string) Lookup {
	ha1 := map[Algorithm]map[string]string{MD5: {}, SHA256: {}}
	for u, p := range passwords {
		ha1[MD5][u] = HA1(MD5, u, realm, p)
		ha1[SHA256][u] = HA1(SHA256, u, realm, p)
	}
	return func(username string, alg Algorithm) (string, bool) {
		h, ok := ha1[alg][username]
		return h, ok
	}
}

func newAuth(t testing.TB, cfg Config) *Authenticator {
	t.Helper()
	if cfg.Realm == "" {
		cfg.Realm = testRealm
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

// challengeFor returns the parsed challenge for alg from a.Challenges.
func challengeFor(t testing.TB, a *Authenticator, alg Algorithm, stale bool) *icholy.Challenge {
	t.Helper()
	for _, s := range a.Challenges(stale) {
		chal, err := icholy.ParseChallenge(s)
		if err != nil {
			t.Fatalf("icholy.ParseChallenge(%q): %v", s, err)
		}
		if chal.Algorithm == string(alg) {
			return chal
		}
	}
	t.Fatalf("no %s challenge in %q", alg, a.Challenges(stale))
	return nil
}

// clientAuth computes an Authorization value with the independent client.
func clientAuth(t testing.TB, chal *icholy.Challenge, user, pass string, nc int) string {
	t.Helper()
	cred, err := icholy.Digest(chal, icholy.Options{
		Method:   "REGISTER",
		URI:      "sip:" + testRealm,
		Username: user,
		Password: pass,
		Count:    nc,
		Cnonce:   fmt.Sprintf("cn%06d", nc),
	})
	if err != nil {
		t.Fatalf("icholy.Digest: %v", err)
	}
	return cred.String()
}

// verify parses an Authorization value and verifies it for REGISTER.
func verify(t testing.TB, a *Authenticator, auth string, lookup Lookup) Result {
	t.Helper()
	c, err := ParseCredentials(auth)
	if err != nil {
		t.Fatalf("ParseCredentials(%q): %v", auth, err)
	}
	return a.Verify("REGISTER", &c, lookup)
}

func expect(t testing.TB, what string, got, want Result) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

var algs = []Algorithm{MD5, SHA256}

func TestVerifyEndToEnd(t *testing.T) {
	lookup := lookupFor(testRealm)
	for _, alg := range algs {
		t.Run(string(alg), func(t *testing.T) {
			a := newAuth(t, Config{})
			chal := challengeFor(t, a, alg, false)

			// Consecutive counts on one nonce.
			for nc := 1; nc <= 5; nc++ {
				expect(t, fmt.Sprintf("nc=%d", nc), verify(t, a, clientAuth(t, chal, "user0001", "secret1", nc), lookup), OK)
			}
			// Replays of each.
			for nc := 1; nc <= 5; nc++ {
				expect(t, fmt.Sprintf("replayed nc=%d", nc), verify(t, a, clientAuth(t, chal, "user0001", "secret1", nc), lookup), Replay)
			}
			// Out of order within the window: 70 first, then 10 and 69 are
			// within 64 of it and unseen; 6 is too old.
			expect(t, "nc=70", verify(t, a, clientAuth(t, chal, "user0001", "secret1", 70), lookup), OK)
			expect(t, "late nc=69", verify(t, a, clientAuth(t, chal, "user0001", "secret1", 69), lookup), OK)
			expect(t, "late nc=10", verify(t, a, clientAuth(t, chal, "user0001", "secret1", 10), lookup), OK)
			expect(t, "late nc=10 again", verify(t, a, clientAuth(t, chal, "user0001", "secret1", 10), lookup), Replay)
			expect(t, "late nc=69 again", verify(t, a, clientAuth(t, chal, "user0001", "secret1", 69), lookup), Replay)
			expect(t, "nc=6 below window", verify(t, a, clientAuth(t, chal, "user0001", "secret1", 6), lookup), Replay)
			expect(t, "nc=70 again", verify(t, a, clientAuth(t, chal, "user0001", "secret1", 70), lookup), Replay)

			// Wrong password; does not burn the count for the right one.
			expect(t, "wrong password", verify(t, a, clientAuth(t, chal, "user0001", "wrong", 71), lookup), BadResponse)
			expect(t, "right password after wrong", verify(t, a, clientAuth(t, chal, "user0001", "secret1", 71), lookup), OK)

			expect(t, "unknown user", verify(t, a, clientAuth(t, chal, "mallory", "x", 1), lookup), UnknownUser)

			// A second user on a fresh nonce.
			chal2 := challengeFor(t, a, alg, false)
			expect(t, "alice", verify(t, a, clientAuth(t, chal2, "alice", "wonderland", 1), lookup), OK)
			expect(t, "alice replay", verify(t, a, clientAuth(t, chal2, "alice", "wonderland", 1), lookup), Replay)
		})
	}
}

func TestVerifyStale(t *testing.T) {
	lookup := lookupFor(testRealm)
	for _, alg := range algs {
		t.Run(string(alg), func(t *testing.T) {
			clk := newClock()
			a := newAuth(t, Config{NonceTTL: time.Minute, Now: clk.Now})
			chal := challengeFor(t, a, alg, false)
			expect(t, "fresh", verify(t, a, clientAuth(t, chal, "user0001", "secret1", 1), lookup), OK)

			clk.Advance(time.Minute)
			expect(t, "at TTL", verify(t, a, clientAuth(t, chal, "user0001", "secret1", 2), lookup), OK)

			clk.Advance(time.Nanosecond)
			expect(t, "expired", verify(t, a, clientAuth(t, chal, "user0001", "secret1", 3), lookup), Stale)
			expect(t, "expired, wrong password", verify(t, a, clientAuth(t, chal, "user0001", "nope", 4), lookup), BadResponse)
			expect(t, "expired, unknown user", verify(t, a, clientAuth(t, chal, "nobody", "nope", 4), lookup), UnknownUser)

			// The client retries with the stale=true challenge.
			retry := challengeFor(t, a, alg, true)
			if !retry.Stale {
				t.Fatalf("stale challenge not marked stale")
			}
			expect(t, "after stale", verify(t, a, clientAuth(t, retry, "user0001", "secret1", 1), lookup), OK)

			// Wall clock stepped back by more than the TTL.
			clk.Advance(-3 * time.Minute)
			expect(t, "from the future", verify(t, a, clientAuth(t, retry, "user0001", "secret1", 2), lookup), Stale)
		})
	}
}

func TestVerifyForeignNonce(t *testing.T) {
	lookup := lookupFor(testRealm)
	key := []byte("0123456789abcdef0123456789abcdef")
	a := newAuth(t, Config{Key: key})
	other := newAuth(t, Config{Key: []byte("another key, 16+ bytes long")})
	random := newAuth(t, Config{})
	twin := newAuth(t, Config{Key: key})

	for _, alg := range algs {
		// A nonce from an Authenticator with another key (a previous run of
		// the daemon): the right password is told stale, a wrong one is not.
		for name, from := range map[string]*Authenticator{"other key": other, "random key": random} {
			chal := challengeFor(t, from, alg, false)
			expect(t, string(alg)+" "+name, verify(t, a, clientAuth(t, chal, "user0001", "secret1", 1), lookup), Stale)
			expect(t, string(alg)+" "+name+" wrong password", verify(t, a, clientAuth(t, chal, "user0001", "nope", 1), lookup), BadResponse)
		}
		// Same key: instances accept each other's nonces.
		chal := challengeFor(t, twin, alg, false)
		expect(t, string(alg)+" twin", verify(t, a, clientAuth(t, chal, "user0001", "secret1", 1), lookup), OK)
	}

	// Tampered nonces, each with a response correctly computed for them.
	chal := challengeFor(t, a, MD5, false)
	raw, err := base64.RawURLEncoding.DecodeString(chal.Nonce)
	if err != nil || len(raw) != 32 {
		t.Fatalf("nonce %q: %v (len %d)", chal.Nonce, err, len(raw))
	}
	tamper := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 1
		return base64.RawURLEncoding.EncodeToString(b)
	}
	forged := []string{
		tamper(0),                    // issue time
		tamper(7),                    // issue time, low byte: "make it younger"
		tamper(12),                   // random
		tamper(31),                   // tag
		chal.Nonce[:42] + "B",        // non-canonical trailing bits (same bytes!)
		chal.Nonce[:42],              // short
		chal.Nonce + "A",             // long
		strings.Repeat("A", 43),      // all zero
		strings.Repeat("!", 43),      // not base64url
		"84a4cc6f3082121f32b42a2187", // someone else's format
	}
	for _, n := range forged {
		c := *chal
		c.Nonce = n
		// Never accepted: the best a forger with the password gets is a fresh challenge.
		expect(t, "forged nonce "+n, verify(t, a, clientAuth(t, &c, "user0001", "secret1", 1), lookup), Stale)
		expect(t, "forged nonce, wrong password "+n, verify(t, a, clientAuth(t, &c, "user0001", "nope", 1), lookup), BadResponse)
		// Issued tells the two failures apart: this one is no guess at the
		// password a right answer could pass.
		if a.Issued(&Credentials{Nonce: n}) {
			t.Errorf("Issued(forged nonce %q) = true", n)
		}
	}
	if !a.Issued(&Credentials{Nonce: chal.Nonce}) || !a.Issued(&Credentials{Nonce: chal.Nonce, Opaque: chal.Opaque}) {
		t.Error("Issued(genuine nonce) = false")
	}
	if a.Issued(&Credentials{Nonce: chal.Nonce, Opaque: "bogus"}) || a.Issued(nil) {
		t.Error("Issued(genuine nonce, wrong opaque) or Issued(nil) = true")
	}
	if a.Issued(&Credentials{Nonce: challengeFor(t, newAuth(t, Config{}), MD5, false).Nonce}) {
		t.Error("Issued(another Authenticator's nonce) = true")
	}

	// Opaque must be echoed unchanged if sent; omitting it is tolerated.
	c := *chal
	c.Opaque = "bogus"
	expect(t, "wrong opaque", verify(t, a, clientAuth(t, &c, "user0001", "secret1", 1), lookup), Stale)
	expect(t, "wrong opaque, wrong password", verify(t, a, clientAuth(t, &c, "user0001", "nope", 1), lookup), BadResponse)
	c.Opaque = ""
	expect(t, "no opaque", verify(t, a, clientAuth(t, &c, "user0001", "secret1", 1), lookup), OK)
}

func TestVerifyWrongRealm(t *testing.T) {
	a := newAuth(t, Config{Realm: testRealm})
	b := newAuth(t, Config{Realm: "other.example"})
	chal := challengeFor(t, b, MD5, false)
	expect(t, "realm mismatch", verify(t, a, clientAuth(t, chal, "user0001", "secret1", 1), lookupFor("other.example")), WrongRealm)

	chal = challengeFor(t, a, MD5, false)
	chal.Realm = strings.ToUpper(testRealm)
	expect(t, "realm case", verify(t, a, clientAuth(t, chal, "user0001", "secret1", 1), lookupFor(chal.Realm)), WrongRealm)
}

func TestVerifyAlgorithmNotConfigured(t *testing.T) {
	lookup := lookupFor(testRealm)
	shaOnly := newAuth(t, Config{Algorithms: []Algorithm{SHA256}})
	md5Only := newAuth(t, Config{Algorithms: []Algorithm{MD5}})
	if got := len(shaOnly.Challenges(false)); got != 1 {
		t.Fatalf("SHA-256 only: %d challenges", got)
	}

	chal := challengeFor(t, shaOnly, SHA256, false)
	expect(t, "SHA-256 on SHA-256-only", verify(t, shaOnly, clientAuth(t, chal, "user0001", "secret1", 1), lookup), OK)
	chal.Algorithm = "MD5"
	expect(t, "MD5 on SHA-256-only", verify(t, shaOnly, clientAuth(t, chal, "user0001", "secret1", 2), lookup), UnsupportedAlgorithm)
	chal.Algorithm = ""
	expect(t, "implicit MD5 on SHA-256-only", verify(t, shaOnly, clientAuth(t, chal, "user0001", "secret1", 3), lookup), UnsupportedAlgorithm)

	chal = challengeFor(t, md5Only, MD5, false)
	chal.Algorithm = "SHA-256"
	expect(t, "SHA-256 on MD5-only", verify(t, md5Only, clientAuth(t, chal, "user0001", "secret1", 1), lookup), UnsupportedAlgorithm)
	chal.Algorithm = "SHA-512"
	expect(t, "SHA-512", verify(t, md5Only, clientAuth(t, chal, "user0001", "secret1", 1), lookup), UnsupportedAlgorithm)
	chal.Algorithm = ""
	expect(t, "implicit MD5 on MD5-only", verify(t, md5Only, clientAuth(t, chal, "user0001", "secret1", 1), lookup), OK)

	c, _ := ParseCredentials(clientAuth(t, challengeFor(t, md5Only, MD5, false), "user0001", "secret1", 1))
	c.Algorithm = "MD5-sess"
	expect(t, "MD5-sess", md5Only.Verify("REGISTER", &c, lookup), UnsupportedAlgorithm)
	c.Algorithm = "md5"
	expect(t, "lower-case md5", md5Only.Verify("REGISTER", &c, lookup), OK)
}

func TestVerifyMalformed(t *testing.T) {
	lookup := lookupFor(testRealm)
	a := newAuth(t, Config{})
	good, err := ParseCredentials(clientAuth(t, challengeFor(t, a, MD5, false), "user0001", "secret1", 1))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(*Credentials)
		want   Result
	}{
		{"no username", func(c *Credentials) { c.Username = "" }, Malformed},
		{"no realm", func(c *Credentials) { c.Realm = "" }, Malformed},
		{"no nonce", func(c *Credentials) { c.Nonce = "" }, Malformed},
		{"no uri", func(c *Credentials) { c.URI = "" }, Malformed},
		{"no response", func(c *Credentials) { c.Response = "" }, Malformed},
		{"qop auth without cnonce", func(c *Credentials) { c.Cnonce = "" }, Malformed},
		{"qop auth without nc", func(c *Credentials) { c.NC = "" }, Malformed},
		{"nc too short", func(c *Credentials) { c.NC = "0000001" }, Malformed},
		{"nc too long", func(c *Credentials) { c.NC = "000000001" }, Malformed},
		{"nc not hex", func(c *Credentials) { c.NC = "0000000g" }, Malformed},
		{"nc zero", func(c *Credentials) { c.NC = "00000000" }, Malformed},
		{"nc signed", func(c *Credentials) { c.NC = "+0000001" }, Malformed},
		{"qop auth-int", func(c *Credentials) { c.QOP = "auth-int" }, Malformed},
		{"qop list", func(c *Credentials) { c.QOP = "auth,auth-int" }, Malformed},
		{"nc without qop", func(c *Credentials) { c.QOP = "" }, Malformed},
		{"response too short", func(c *Credentials) { c.Response = c.Response[:30] }, Malformed},
		{"response SHA-256 length for MD5", func(c *Credentials) { c.Response += c.Response }, Malformed},
		{"response not hex", func(c *Credentials) { c.Response = "z" + c.Response[1:] }, Malformed},
		{"response upper-case hex", func(c *Credentials) { c.Response = strings.ToUpper(c.Response) }, OK},
		{"response flipped", func(c *Credentials) { c.Response = flipHex(c.Response) }, BadResponse},
		{"other uri", func(c *Credentials) { c.URI = "sip:evil.example" }, BadResponse},
		{"other cnonce", func(c *Credentials) { c.Cnonce += "x" }, BadResponse},
		{"other nc", func(c *Credentials) { c.NC = "00000002" }, BadResponse},
		{"other username", func(c *Credentials) { c.Username = "alice" }, BadResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A fresh Authenticator sharing the key would reject replays, so
			// use a fresh nonce each time.
			a := newAuth(t, Config{})
			c, _ := ParseCredentials(clientAuth(t, challengeFor(t, a, MD5, false), "user0001", "secret1", 1))
			_ = good
			tt.mutate(&c)
			expect(t, tt.name, a.Verify("REGISTER", &c, lookup), tt.want)
		})
	}
	expect(t, "nil credentials", a.Verify("REGISTER", nil, lookup), Malformed)
	expect(t, "nil lookup", a.Verify("REGISTER", &good, nil), UnknownUser)
	expect(t, "other method", a.Verify("INVITE", &good, lookup), BadResponse)
	expect(t, "good", a.Verify("REGISTER", &good, lookup), OK)
}

func flipHex(s string) string {
	b := []byte(s)
	if b[0] == '0' {
		b[0] = '1'
	} else {
		b[0] = '0'
	}
	return string(b)
}

// TestVerifyNoQOP covers RFC 2069 compatibility: response = H(HA1:nonce:HA2).
func TestVerifyNoQOP(t *testing.T) {
	lookup := lookupFor(testRealm)
	for _, alg := range algs {
		a := newAuth(t, Config{})
		chal := challengeFor(t, a, alg, false)
		chal.QOP = nil // the client ignores qop
		auth := clientAuth(t, chal, "user0001", "secret1", 0)
		if strings.Contains(auth, "nc=") || strings.Contains(auth, "qop=") {
			t.Fatalf("client sent qop without qop in challenge: %s", auth)
		}
		expect(t, string(alg)+" no qop", verify(t, a, auth, lookup), OK)
		// No nonce count, so no replay detection until the nonce expires.
		expect(t, string(alg)+" no qop again", verify(t, a, auth, lookup), OK)
		expect(t, string(alg)+" no qop, wrong password", verify(t, a, clientAuth(t, chal, "user0001", "x", 0), lookup), BadResponse)

		strict := newAuth(t, Config{RequireQOP: true})
		chal = challengeFor(t, strict, alg, false)
		chal.QOP = nil
		expect(t, string(alg)+" no qop, RequireQOP", verify(t, strict, clientAuth(t, chal, "user0001", "secret1", 0), lookup), Malformed)
	}
}

// TestResponseRFCVectors checks the digest computation against the examples
// of RFC 2617 §3.5 and RFC 7616 §3.9.1 (method GET).
func TestResponseRFCVectors(t *testing.T) {
	tests := []struct {
		name, auth, password string
	}{
		{
			"RFC 2617 §3.5",
			`Digest username="Mufasa", realm="testrealm@host.com", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", ` +
				`uri="/dir/index.html", qop=auth, nc=00000001, cnonce="0a4f113b", ` +
				`response="6629fae49393a05397450978507c4ef1", opaque="5ccc069c403ebaf9f0171e9517f40e41"`,
			"Circle Of Life",
		},
		{
			"RFC 7616 §3.9.1 MD5",
			`Digest username="Mufasa", realm="http-auth@example.org", uri="/dir/index.html", algorithm=MD5, ` +
				`nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", nc=00000001, ` +
				`cnonce="f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ", qop=auth, ` +
				`response="8ca523f5e9506fed4657c9700eebdbec", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"`,
			"Circle of Life",
		},
		{
			"RFC 7616 §3.9.1 SHA-256",
			`Digest username="Mufasa", realm="http-auth@example.org", uri="/dir/index.html", algorithm=SHA-256, ` +
				`nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", nc=00000001, ` +
				`cnonce="f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ", qop=auth, ` +
				`response="753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1", ` +
				`opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS"`,
			"Circle of Life",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseCredentials(tt.auth)
			if err != nil {
				t.Fatal(err)
			}
			alg, ok := ParseAlgorithm(c.Algorithm)
			if !ok {
				t.Fatalf("algorithm %q", c.Algorithm)
			}
			// Upper-case HA1 from the store must work too.
			for _, ha1 := range []string{HA1(alg, c.Username, c.Realm, tt.password), strings.ToUpper(HA1(alg, c.Username, c.Realm, tt.password))} {
				sum := response(alg, ha1, "GET", &c)
				if got := hex.EncodeToString(sum[:alg.size()]); got != c.Response {
					t.Errorf("response = %s, want %s", got, c.Response)
				}
			}
		})
	}
}

func TestHA1(t *testing.T) {
	tests := []struct {
		alg               Algorithm
		user, realm, pass string
		want              string
	}{
		{MD5, "Mufasa", "testrealm@host.com", "Circle Of Life", "939e7578ed9e3c518a452acee763bce9"},
		// echo -n 'Mufasa:http-auth@example.org:Circle of Life' | sha256sum
		{SHA256, "Mufasa", "http-auth@example.org", "Circle of Life", "7987c64c30e25f1b74be53f966b49b90f2808aa92faf9a00262392d7b4794232"},
		{"SHA-512", "u", "r", "p", ""},
	}
	for _, tt := range tests {
		if got := HA1(tt.alg, tt.user, tt.realm, tt.pass); got != tt.want {
			t.Errorf("HA1(%s, %q, %q, %q) = %q, want %q", tt.alg, tt.user, tt.realm, tt.pass, got, tt.want)
		}
	}
}

func TestParseAlgorithm(t *testing.T) {
	tests := []struct {
		in   string
		want Algorithm
		ok   bool
	}{
		{"", MD5, true}, {"MD5", MD5, true}, {"md5", MD5, true}, {"Md5", MD5, true},
		{"SHA-256", SHA256, true}, {"sha-256", SHA256, true},
		{"MD5-sess", "", false}, {"SHA-256-sess", "", false}, {"SHA-512-256", "", false},
		{"SHA256", "", false}, {" MD5", "", false}, {"MD5 ", "", false},
	}
	for _, tt := range tests {
		got, ok := ParseAlgorithm(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseAlgorithm(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestResultString(t *testing.T) {
	want := map[Result]string{
		OK: "OK", Stale: "Stale", BadResponse: "BadResponse", UnknownUser: "UnknownUser",
		Malformed: "Malformed", Replay: "Replay", WrongRealm: "WrongRealm",
		UnsupportedAlgorithm: "UnsupportedAlgorithm", 0: "Result(0)", 99: "Result(99)", -1: "Result(-1)",
	}
	for r, s := range want {
		if r.String() != s {
			t.Errorf("Result(%d).String() = %q, want %q", int(r), r.String(), s)
		}
	}
	var zero Result
	if zero == OK {
		t.Error("zero Result is OK; must fail closed")
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"empty realm", Config{}},
		{"CR in realm", Config{Realm: "a\r\nb"}},
		{"invalid UTF-8 realm", Config{Realm: "\xff"}},
		{"negative TTL", Config{Realm: "r", NonceTTL: -1}},
		{"negative MaxNonces", Config{Realm: "r", MaxNonces: -1}},
		{"short key", Config{Realm: "r", Key: []byte("short")}},
		{"unknown algorithm", Config{Realm: "r", Algorithms: []Algorithm{"SHA-512"}}},
		{"lower-case algorithm", Config{Realm: "r", Algorithms: []Algorithm{"md5"}}},
		{"duplicate algorithm", Config{Realm: "r", Algorithms: []Algorithm{MD5, SHA256, MD5}}},
	}
	for _, tt := range tests {
		a, err := New(tt.cfg)
		if err == nil {
			t.Errorf("%s: New succeeded: %+v", tt.name, a)
			continue
		}
		if !errors.Is(err, ErrConfig) || !strings.HasPrefix(err.Error(), "gateway/digest: ") {
			t.Errorf("%s: error %q does not wrap ErrConfig", tt.name, err)
		}
	}
}

var challengeRE = regexp.MustCompile(`^Digest realm="((?:[^"\\]|\\.)*)", nonce="([A-Za-z0-9_-]{43})", opaque="([A-Za-z0-9_-]+)", algorithm=(MD5|SHA-256), qop="auth"(, stale=true)?$`)

func TestChallenges(t *testing.T) {
	a := newAuth(t, Config{Realm: `we "quote" \ here`})
	for _, stale := range []bool{false, true} {
		ch := a.Challenges(stale)
		if len(ch) != 2 {
			t.Fatalf("Challenges(%v) = %q, want 2 values", stale, ch)
		}
		var nonce, opaque string
		for i, s := range ch {
			m := challengeRE.FindStringSubmatch(s)
			if m == nil {
				t.Fatalf("challenge %q does not match %v", s, challengeRE)
			}
			if m[1] != `we \"quote\" \\ here` {
				t.Errorf("realm not escaped: %q", m[1])
			}
			if want := string(algs[i]); m[4] != want {
				t.Errorf("challenge %d algorithm %s, want %s (config order)", i, m[4], want)
			}
			if (m[5] != "") != stale {
				t.Errorf("Challenges(%v): %q", stale, s)
			}
			if i == 0 {
				nonce, opaque = m[2], m[3]
			} else if m[2] != nonce || m[3] != opaque {
				t.Errorf("nonce/opaque differ between values of one call: %q", ch)
			}
			chal, err := icholy.ParseChallenge(s)
			if err != nil {
				t.Fatal(err)
			}
			if chal.Realm != a.Realm() || chal.Nonce != nonce || chal.Stale != stale || !chal.SupportsQOP("auth") {
				t.Errorf("independent parse of %q: %+v", s, chal)
			}
		}
	}

	// Order follows the config; nonces are fresh per call.
	b := newAuth(t, Config{Algorithms: []Algorithm{SHA256, MD5}})
	ch1, ch2 := b.Challenges(false), b.Challenges(false)
	if !strings.Contains(ch1[0], "algorithm=SHA-256") || !strings.Contains(ch1[1], "algorithm=MD5") {
		t.Errorf("order not respected: %q", ch1)
	}
	if challengeRE.FindStringSubmatch(ch1[0])[2] == challengeRE.FindStringSubmatch(ch2[0])[2] {
		t.Errorf("nonce reused across calls")
	}
	if got := b.Algorithms(); len(got) != 2 || got[0] != SHA256 {
		t.Errorf("Algorithms() = %v", got)
	}

	// AppendChallenges appends.
	dst := b.AppendChallenges([]string{"x"}, true)
	if len(dst) != 3 || dst[0] != "x" || !strings.HasSuffix(dst[2], ", stale=true") {
		t.Errorf("AppendChallenges = %q", dst)
	}
}

func TestChallengeNoncesUnique(t *testing.T) {
	clk := newClock() // frozen clock: uniqueness must come from the random part
	a := newAuth(t, Config{Now: clk.Now, Algorithms: []Algorithm{MD5}})
	seen := make(map[string]bool)
	for range 5000 {
		n := challengeRE.FindStringSubmatch(a.Challenges(false)[0])[2]
		if seen[n] {
			t.Fatalf("duplicate nonce %s", n)
		}
		seen[n] = true
	}
}

func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	lookup := lookupFor(testRealm)
	a := newAuth(t, Config{Algorithms: []Algorithm{MD5}})
	dst := make([]string, 0, 4)
	if n := testing.AllocsPerRun(100, func() { dst = a.AppendChallenges(dst[:0], false) }); n != 1 {
		t.Errorf("AppendChallenges allocates %v times, want 1", n)
	}
	chal := challengeFor(t, a, MD5, false)
	nc := 0
	creds := make([]Credentials, 200)
	for i := range creds {
		creds[i], _ = ParseCredentials(clientAuth(t, chal, "user0001", "secret1", i+1))
	}
	if r := a.Verify("REGISTER", &creds[0], lookup); r != OK {
		t.Fatalf("Verify = %v", r)
	}
	nc = 1
	if n := testing.AllocsPerRun(100, func() {
		if r := a.Verify("REGISTER", &creds[nc], lookup); r != OK {
			t.Fatalf("Verify nc=%d = %v", nc+1, r)
		}
		nc++
	}); n != 0 {
		t.Errorf("Verify on a known nonce allocates %v times, want 0", n)
	}
}

func TestVerifyConcurrent(t *testing.T) {
	lookup := lookupFor(testRealm)
	const maxNonces = 64
	a := newAuth(t, Config{MaxNonces: maxNonces})
	var wg sync.WaitGroup
	errs := make(chan string, 1000)
	var mu sync.Mutex
	results := map[Result]int{}
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			alg := algs[g%2]
			for range 40 {
				chal := challengeFor(t, a, alg, false)
				for nc := 1; nc <= 3; nc++ {
					r := verify(t, a, clientAuth(t, chal, "user0001", "secret1", nc), lookup)
					// Stale is legitimate: with a small table, a nonce may be
					// (conservatively) considered forgotten under contention.
					if r != OK && r != Stale {
						errs <- fmt.Sprintf("goroutine %d nc=%d: %v", g, nc, r)
					}
					mu.Lock()
					results[r]++
					mu.Unlock()
				}
				if r := verify(t, a, clientAuth(t, chal, "user0001", "secret1", 2), lookup); r != Replay && r != Stale {
					errs <- fmt.Sprintf("goroutine %d replay: %v", g, r)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if results[OK] < results[Stale] {
		t.Errorf("results %v: mostly Stale", results)
	}
	if n := a.replay.len(); n > maxNonces {
		t.Errorf("replay table has %d entries, bound is %d", n, maxNonces)
	}
}
