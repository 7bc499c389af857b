package sipauth

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/icholy/digest"
)

func md5hex(s string) string { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) }

// check verifies an MD5 qop=auth answer by RFC 7616 §3.4.1, written out
// here rather than through icholy/digest.
func check(t *testing.T, value, method, uri, password string, nc int) {
	t.Helper()
	cr, err := digest.ParseCredentials(value)
	if err != nil {
		t.Fatal(err)
	}
	ha1 := md5hex(cr.Username + ":" + cr.Realm + ":" + password)
	ha2 := md5hex(method + ":" + uri)
	want := md5hex(ha1 + ":" + cr.Nonce + ":" + fmt.Sprintf("%08x", nc) + ":" + cr.Cnonce + ":auth:" + ha2)
	if cr.Nc != nc || cr.URI != uri || cr.Response != want || cr.Algorithm != "MD5" {
		t.Fatalf("credentials %+v, want nc %d uri %s response %s", cr, nc, uri, want)
	}
}

func TestAnswerAndReuse(t *testing.T) {
	c := Client{Username: "1001", Password: "secret"}
	if _, _, err := c.Authorization("REGISTER", "sip:hq"); !errors.Is(err, ErrNoChallenge) {
		t.Fatalf("nothing kept: %v", err)
	}
	stale, err := c.Challenge(401, []string{
		`Digest realm="hq", nonce="x", algorithm=SHA-1`, // not answerable: skipped
		`Digest realm="hq", nonce="n1", qop="auth", algorithm=md5, stale=true`,
	})
	if err != nil || !stale || !c.Kept() {
		t.Fatalf("Challenge: stale %v, err %v, kept %v", stale, err, c.Kept())
	}
	for nc := 1; nc <= 2; nc++ {
		name, value, err := c.Authorization("REGISTER", "sip:hq")
		if err != nil || name != "Authorization" {
			t.Fatalf("Authorization: %s %v", name, err)
		}
		check(t, value, "REGISTER", "sip:hq", "secret", nc)
	}
	c.Forget()
	if c.Kept() {
		t.Fatal("kept after Forget")
	}
}

func TestProxyAndNoQOP(t *testing.T) {
	c := Client{Username: "u", Password: "p"}
	if _, err := c.Challenge(407, []string{`Digest realm="r", nonce="n"`}); err != nil {
		t.Fatal(err)
	}
	name, value, err := c.Authorization("INVITE", "sip:1@r")
	if err != nil || name != "Proxy-Authorization" {
		t.Fatalf("%s %v", name, err)
	}
	cr, _ := digest.ParseCredentials(value)
	if want := md5hex(md5hex("u:r:p") + ":n:" + md5hex("INVITE:sip:1@r")); cr.Response != want {
		t.Fatalf("response %s, want %s", cr.Response, want)
	}
	if c.Kept() {
		t.Fatal("a challenge without qop is kept for a second answer")
	}
	if ch, an := Headers(401); ch != "WWW-Authenticate" || an != "Authorization" {
		t.Fatalf("Headers(401) = %s %s", ch, an)
	}
}

func TestNoUsableChallenge(t *testing.T) {
	c := Client{Username: "u", Password: "p"}
	for _, chals := range [][]string{nil, {"Basic realm=r"}, {`Digest realm="r", nonce="n", qop="auth-int"`}} {
		if _, err := c.Challenge(401, chals); !errors.Is(err, ErrNoChallenge) || c.Kept() {
			t.Errorf("%q: %v (kept %v)", chals, err, c.Kept())
		}
	}
}
