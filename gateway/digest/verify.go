package digest

import (
	"crypto/subtle"
	"encoding/hex"
	"strings"
)

// Verify checks credentials c, received with a request of the given method
// (e.g. "REGISTER"), and returns the Result; the authenticated user is
// c.Username when the Result is OK.
//
// Checks, in order (the first failure is returned):
//
//  1. username, realm, nonce, uri and response are present, else Malformed;
//  2. the algorithm (absent = MD5) is configured, else UnsupportedAlgorithm;
//  3. the realm equals Config.Realm, else WrongRealm;
//  4. qop is "auth" with a cnonce and an nc of 8 hex digits (not zero), or
//     qop is absent along with nc (RFC 2069; refused if Config.RequireQOP),
//     and response is hex of the algorithm's digest size, else Malformed;
//  5. lookup knows the user for the algorithm, else UnknownUser;
//  6. the response equals H(HA1:nonce:nc:cnonce:qop:H(method:uri)) (or
//     H(HA1:nonce:H(method:uri)) without qop), compared in constant time,
//     else BadResponse;
//  7. the nonce (and opaque, if sent) were issued by this Authenticator,
//     else Stale: the response was right, so the client knows the password
//     and holds a nonce from before a restart;
//  8. the nonce is not older than NonceTTL, else Stale (only reached with a
//     correct response, so Stale means "retry with a fresh nonce");
//  9. with qop, the nc has not been used with this nonce before and is
//     within 64 of the highest one seen, else Replay.
//
// Nonce counts are recorded only for correct responses, so forged requests
// cannot burn a client's counts. lookup is called at most once, only for
// well-formed credentials; a nil lookup knows no users.
func (a *Authenticator) Verify(method string, c *Credentials, lookup Lookup) Result {
	if c == nil || c.Username == "" || c.Realm == "" || c.Nonce == "" || c.URI == "" || c.Response == "" {
		return Malformed
	}
	alg, ok := ParseAlgorithm(c.Algorithm)
	if !ok || (alg == MD5 && !a.md5) || (alg == SHA256 && !a.sha) {
		return UnsupportedAlgorithm
	}
	if c.Realm != a.realm {
		return WrongRealm
	}
	var nc uint32
	switch {
	case c.QOP == "":
		if a.requireQOP || c.NC != "" {
			return Malformed
		}
	case strings.EqualFold(c.QOP, "auth"):
		if c.Cnonce == "" {
			return Malformed
		}
		if nc, ok = parseNC(c.NC); !ok {
			return Malformed
		}
	default:
		return Malformed
	}
	size := alg.size()
	var got [32]byte
	if len(c.Response) != 2*size || !decodeHex(got[:size], c.Response) {
		return Malformed
	}

	id, issued, genuine := a.openNonce(c.Nonce)
	genuine = genuine && (c.Opaque == "" || c.Opaque == a.opaque)
	if lookup == nil {
		return UnknownUser
	}
	ha1, ok := lookup(c.Username, alg)
	if !ok {
		return UnknownUser
	}
	want := response(alg, ha1, method, c)
	if subtle.ConstantTimeCompare(want[:size], got[:size]) != 1 {
		return BadResponse
	}
	if !genuine {
		// A correct response over a nonce we did not issue: the client knows
		// the password and reuses a nonce from before a restart (the key is
		// per process). RFC 7616 §3.3: stale=true lets it retry at once
		// instead of asking its user, and a nonce we never issued cannot be
		// replayed into success since it is never accepted.
		return Stale
	}

	now := a.now().UnixNano()
	if age := now - issued; age > a.ttl || age < -a.ttl {
		// Expired, or issued implausibly far in the future (wall clock
		// stepped back).
		return Stale
	}
	if c.QOP == "" {
		return OK
	}
	return a.replay.check(id, issued, now, a.ttl, nc)
}

// response computes the expected request-digest (RFC 7616 §3.4.1, qop=auth
// or RFC 2069 without qop) without allocating for typical sizes.
func response(alg Algorithm, ha1, method string, c *Credentials) [32]byte {
	size := alg.size()
	var buf [320]byte
	b := append(buf[:0], method...)
	b = append(b, ':')
	b = append(b, c.URI...)
	ha2 := alg.sum(b)

	b = appendLower(buf[:0], ha1)
	b = append(b, ':')
	b = append(b, c.Nonce...)
	if c.QOP != "" {
		b = append(b, ':')
		b = append(b, c.NC...)
		b = append(b, ':')
		b = append(b, c.Cnonce...)
		b = append(b, ':')
		b = append(b, c.QOP...)
	}
	b = append(b, ':')
	b = hex.AppendEncode(b, ha2[:size])
	return alg.sum(b)
}

// appendLower appends s with ASCII upper case folded, so that a store
// holding upper-case hex HA1s still works.
func appendLower(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// parseNC parses a nonce-count: exactly 8 hex digits, not zero.
func parseNC(s string) (uint32, bool) {
	if len(s) != 8 {
		return 0, false
	}
	var v uint32
	for i := 0; i < 8; i++ {
		d := unhex(s[i])
		if d > 15 {
			return 0, false
		}
		v = v<<4 | uint32(d)
	}
	return v, v != 0
}

// decodeHex decodes len(dst)*2 hex digits of either case from s.
func decodeHex(dst []byte, s string) bool {
	var bad byte
	for i := range dst {
		hi, lo := unhex(s[2*i]), unhex(s[2*i+1])
		bad |= hi | lo
		dst[i] = hi<<4 | lo&15
	}
	return bad < 16
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 0xff
}
