package config

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// digestResponse computes an RFC 7616 §3.4.1 qop=auth response from an HA1,
// the way a registrar does with a stored HA1.
func digestResponse(alg, ha1, nonce, nc, cnonce, method, uri string) string {
	h := func(s string) string {
		if alg == "MD5" {
			sum := md5.Sum([]byte(s))
			return hex.EncodeToString(sum[:])
		}
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])
	}
	return h(ha1 + ":" + nonce + ":" + nc + ":" + cnonce + ":auth:" + h(method+":"+uri))
}

func TestHA1KnownAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, alg, realm, password, nonce, cnonce string
		ha1, response                             string
	}{
		{ // RFC 2617 §3.5
			name: "RFC2617", alg: "MD5", realm: "testrealm@host.com", password: "Circle Of Life",
			nonce: "dcd98b7102dd2f0e8b11d0f600bfb0c093", cnonce: "0a4f113b",
			ha1:      "939e7578ed9e3c518a452acee763bce9",
			response: "6629fae49393a05397450978507c4ef1",
		},
		{ // RFC 7616 §3.9.1, MD5
			name: "RFC7616-MD5", alg: "MD5", realm: "http-auth@example.org", password: "Circle of Life",
			nonce: "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", cnonce: "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ",
			ha1:      "3d78807defe7de2157e2b0b6573a855f",
			response: "8ca523f5e9506fed4657c9700eebdbec",
		},
		{ // RFC 7616 §3.9.1, SHA-256
			name: "RFC7616-SHA-256", alg: "SHA-256", realm: "http-auth@example.org", password: "Circle of Life",
			nonce: "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", cnonce: "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ",
			ha1:      "7987c64c30e25f1b74be53f966b49b90f2808aa92faf9a00262392d7b4794232",
			response: "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ha1 := HA1(tc.alg, "Mufasa", tc.realm, tc.password)
			if ha1 != tc.ha1 {
				t.Errorf("HA1 = %s, want %s", ha1, tc.ha1)
			}
			// The response printed in the RFC proves the HA1 independently.
			if got := digestResponse(tc.alg, ha1, tc.nonce, "00000001", tc.cnonce, "GET", "/dir/index.html"); got != tc.response {
				t.Errorf("response = %s, want %s", got, tc.response)
			}
		})
	}
}

func TestHA1Algorithms(t *testing.T) {
	if HA1("md5", "u", "r", "p") != HA1("MD5", "u", "r", "p") || HA1("sha-256", "u", "r", "p") != HA1("SHA-256", "u", "r", "p") {
		t.Error("algorithm names must be case-insensitive")
	}
	if got := HA1("SHA-512-256", "u", "r", "p"); got != "" {
		t.Errorf("unknown algorithm: %q, want empty", got)
	}
	if n := len(HA1("MD5", "u", "r", "p")); n != 32 {
		t.Errorf("MD5 HA1 has %d hex digits", n)
	}
	if n := len(HA1("SHA-256", "u", "r", "p")); n != 64 {
		t.Errorf("SHA-256 HA1 has %d hex digits", n)
	}
}
