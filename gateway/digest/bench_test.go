package digest

import (
	"fmt"
	"runtime"
	"testing"
)

func BenchmarkChallenges(b *testing.B) {
	a := newAuth(b, Config{})
	b.Run("Challenges", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = a.Challenges(false)
		}
	})
	b.Run("AppendChallenges", func(b *testing.B) {
		b.ReportAllocs()
		dst := make([]string, 0, 2)
		for b.Loop() {
			dst = a.AppendChallenges(dst[:0], false)
		}
	})
}

func BenchmarkParseCredentials(b *testing.B) {
	inputs := map[string]string{
		"SIPp": `Digest username="user0001",realm="bench.local",cnonce="6b8b4567",nc=00000001,qop=auth,` +
			`uri="sip:127.0.0.51:5060",nonce="Z3JlZXRpbmdzIGZyb20gdGhlIGZ1enogY29ycHVzISE",` +
			`response="0123456789abcdef0123456789abcdef",algorithm=MD5`,
		"escaped": `Digest username="say \"hi\"", realm="bench.local", nonce="n", uri="sip:x", response="r"`,
		"garbage": `Digest username="user0001",realm="bench.local",cnonce="6b8b4567",nc=00000001 qop=auth`,
	}
	for name, in := range inputs {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				_, _ = ParseCredentials(in)
			}
		})
	}
}

// BenchmarkVerify measures Verify on pre-parsed credentials: "reuse" is a
// client reusing one nonce with increasing nc (replay-table update),
// "fresh" a new nonce per request (replay-table insert, and eviction once
// the 1024-entry bound is reached), "bad" a wrong password.
func BenchmarkVerify(b *testing.B) {
	lookup := lookupFor(testRealm)
	// prepare returns an Authenticator and n credentials that all verify OK
	// in order, either on one nonce (nc 1..n) or on n fresh nonces.
	prepare := func(alg Algorithm, n int, fresh bool) (*Authenticator, []Credentials) {
		a := newAuth(b, Config{MaxNonces: 1024})
		chal := challengeFor(b, a, alg, false)
		creds := make([]Credentials, n)
		for i := range creds {
			nc := i + 1
			if fresh {
				chal, nc = challengeFor(b, a, alg, false), 1
			}
			creds[i], _ = ParseCredentials(clientAuth(b, chal, "user0001", "secret1", nc))
		}
		runtime.GC() // keep the set-up garbage out of the measurement
		return a, creds
	}
	for _, alg := range algs {
		for _, fresh := range []bool{false, true} {
			name := fmt.Sprintf("%s/reuse", alg)
			if fresh {
				name = fmt.Sprintf("%s/fresh", alg)
			}
			b.Run(name, func(b *testing.B) {
				const n = 1 << 13
				a, creds := prepare(alg, n, fresh)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if i == n { // used up; start over outside the timed region
						b.StopTimer()
						a, creds = prepare(alg, n, fresh)
						i = 0
						b.StartTimer()
					}
					if r := a.Verify("REGISTER", &creds[i], lookup); r != OK {
						b.Fatalf("Verify = %v", r)
					}
					i++
				}
			})
		}
		b.Run(fmt.Sprintf("%s/bad", alg), func(b *testing.B) {
			a := newAuth(b, Config{})
			c, _ := ParseCredentials(clientAuth(b, challengeFor(b, a, alg, false), "user0001", "wrong", 1))
			b.ReportAllocs()
			for b.Loop() {
				if r := a.Verify("REGISTER", &c, lookup); r != BadResponse {
					b.Fatalf("Verify = %v", r)
				}
			}
		})
	}
}

// BenchmarkRoundTrip is the registrar's full path for one REGISTER:
// challenge, parse the response, verify.
func BenchmarkRoundTrip(b *testing.B) {
	lookup := lookupFor(testRealm)
	a := newAuth(b, Config{Algorithms: []Algorithm{MD5}})
	chal := challengeFor(b, a, MD5, false)
	auth := clientAuth(b, chal, "user0001", "secret1", 1)
	c0, _ := ParseCredentials(auth)
	b.ReportAllocs()
	dst := make([]string, 0, 1)
	for b.Loop() {
		dst = a.AppendChallenges(dst[:0], false)
		c, err := ParseCredentials(auth)
		if err != nil || c != c0 {
			b.Fatal(err)
		}
		_ = a.Verify("REGISTER", &c, lookup) // Replay after the first; same work
	}
}
