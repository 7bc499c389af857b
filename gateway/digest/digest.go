package digest

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
)

// Algorithm is a digest algorithm name as it appears in the algorithm
// parameter of a challenge.
type Algorithm string

// Supported algorithms.
const (
	MD5    Algorithm = "MD5"
	SHA256 Algorithm = "SHA-256"
)

// ParseAlgorithm maps an algorithm parameter value to an Algorithm,
// case-insensitively. An empty string means MD5 (RFC 2617 §3.2.1 backward
// compatibility). It reports false for anything else, including the "-sess"
// variants.
func ParseAlgorithm(s string) (Algorithm, bool) {
	switch {
	case s == "" || strings.EqualFold(s, string(MD5)):
		return MD5, true
	case strings.EqualFold(s, string(SHA256)):
		return SHA256, true
	}
	return "", false
}

// size is the digest size in bytes, or 0 for an unsupported algorithm.
func (alg Algorithm) size() int {
	switch alg {
	case MD5:
		return md5.Size
	case SHA256:
		return sha256.Size
	}
	return 0
}

// sum hashes b with alg into a fixed array; only the first alg.size() bytes
// are meaningful. It does not allocate.
func (alg Algorithm) sum(b []byte) (out [sha256.Size]byte) {
	if alg == SHA256 {
		return sha256.Sum256(b)
	}
	s := md5.Sum(b)
	copy(out[:], s[:])
	return out
}

// HA1 returns H(username ":" realm ":" password) as lower-case hex for alg,
// the value a Lookup returns. For an unsupported algorithm it returns "".
func HA1(alg Algorithm, username, realm, password string) string {
	n := alg.size()
	if n == 0 {
		return ""
	}
	b := make([]byte, 0, len(username)+len(realm)+len(password)+2)
	b = append(b, username...)
	b = append(b, ':')
	b = append(b, realm...)
	b = append(b, ':')
	b = append(b, password...)
	sum := alg.sum(b)
	clear(b) // the password should not linger longer than necessary
	return hex.EncodeToString(sum[:n])
}

// Lookup returns the stored HA1 (hex, as produced by HA1; upper case is
// tolerated) for username in the given algorithm. Passwords are never
// stored, only HA1s. It reports false if the user does not exist or has no
// HA1 for alg. It may be called concurrently.
type Lookup func(username string, alg Algorithm) (ha1 string, ok bool)

// Result is the outcome of Verify.
type Result int

// Results of Verify. The zero value is not a valid Result (and in particular
// not OK), so a forgotten assignment fails closed.
const (
	// OK: the credentials are valid; the request is authenticated.
	OK Result = iota + 1
	// Stale: the response is correct for the nonce, but the nonce has expired
	// (or its replay-table entry was evicted). Answer with a fresh challenge
	// with stale=true: the client knows the password.
	Stale
	// BadResponse: wrong password or wrong digest, or a nonce or opaque this
	// Authenticator did not issue (forged, or issued under another Key).
	BadResponse
	// UnknownUser: Lookup did not know the username for the algorithm.
	UnknownUser
	// Malformed: required parameters are missing or syntactically invalid
	// (nc, qop, cnonce, response length).
	Malformed
	// Replay: the nonce count was already used with this nonce, or is too
	// far behind the highest one seen.
	Replay
	// WrongRealm: the realm parameter is not the configured realm.
	WrongRealm
	// UnsupportedAlgorithm: the algorithm is unknown or not configured.
	UnsupportedAlgorithm
)

var resultNames = [...]string{
	OK:                   "OK",
	Stale:                "Stale",
	BadResponse:          "BadResponse",
	UnknownUser:          "UnknownUser",
	Malformed:            "Malformed",
	Replay:               "Replay",
	WrongRealm:           "WrongRealm",
	UnsupportedAlgorithm: "UnsupportedAlgorithm",
}

// String returns the name of the result, e.g. "BadResponse".
func (r Result) String() string {
	if r > 0 && int(r) < len(resultNames) {
		return resultNames[r]
	}
	return "Result(" + strconv.Itoa(int(r)) + ")"
}

// Errors returned by ParseCredentials and New. Parse errors wrap ErrMalformed
// or ErrNotDigest; configuration errors wrap ErrConfig.
var (
	ErrMalformed = errors.New("gateway/digest: malformed credentials")
	ErrNotDigest = errors.New("gateway/digest: authorization scheme is not Digest")
	ErrConfig    = errors.New("gateway/digest: invalid config")
)
