package digest

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzParseCredentials checks that the parser never panics, fails cleanly,
// only returns clean values, and that its output survives a canonical
// re-serialisation. Verify is run on whatever parses, to shake out panics in
// the nonce, nc and hex decoders. Seeds: testdata/fuzz/FuzzParseCredentials.
func FuzzParseCredentials(f *testing.F) {
	f.Add(`Digest username="user0001",realm="bench.local",cnonce="6b8b4567",nc=00000001,qop=auth,uri="sip:127.0.0.51:5060",nonce="AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",response="0123456789abcdef0123456789abcdef",algorithm=MD5`)
	a, err := New(Config{Realm: "bench.local", Key: []byte("fuzz key, sixteen bytes or more"), Now: func() time.Time { return time.Unix(1_700_000_000, 0) }})
	if err != nil {
		f.Fatal(err)
	}
	lookup := func(user string, alg Algorithm) (string, bool) {
		return HA1(alg, user, "bench.local", "pw"), user != ""
	}

	f.Fuzz(func(t *testing.T, in string) {
		c, err := ParseCredentials(in)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNotDigest) {
				t.Fatalf("error %v wraps neither ErrMalformed nor ErrNotDigest", err)
			}
			if c != (Credentials{}) {
				t.Fatalf("partial result %+v with error %v", c, err)
			}
			return
		}
		fields := []*string{&c.Username, &c.Realm, &c.Nonce, &c.URI, &c.Response, &c.Algorithm, &c.Cnonce, &c.Opaque, &c.QOP, &c.NC}
		var b strings.Builder
		b.WriteString("Digest ")
		names := []string{"username", "realm", "nonce", "uri", "response", "algorithm", "cnonce", "opaque", "qop", "nc"}
		for i, p := range fields {
			v := *p
			if !utf8.ValidString(v) {
				t.Fatalf("field %s: invalid UTF-8 %q", names[i], v)
			}
			for j := 0; j < len(v); j++ {
				if isCtl(v[j]) {
					t.Fatalf("field %s: control character in %q", names[i], v)
				}
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(names[i])
			b.WriteByte('=')
			b.WriteString(quote(v))
		}
		c2, err := ParseCredentials(b.String())
		if err != nil {
			t.Fatalf("re-serialised %q does not parse: %v", b.String(), err)
		}
		if c2 != c {
			t.Fatalf("round trip changed credentials:\n%+v\n%+v", c, c2)
		}
		if r := a.Verify("REGISTER", &c, lookup); r == OK || r.String() == "" {
			t.Fatalf("Verify of fuzzed credentials = %v", r)
		}
	})
}
