package digest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Defaults applied by New for zero Config fields.
const (
	DefaultNonceTTL  = 5 * time.Minute
	DefaultMaxNonces = 65536
)

// MinKeyLen is the minimum length of a configured Config.Key.
const MinKeyLen = 16

// Config configures an Authenticator.
type Config struct {
	// Realm is the protection realm, sent in challenges and required in
	// credentials. Must be non-empty, valid UTF-8 without control characters.
	Realm string
	// Algorithms lists the offered algorithms in challenge order (most
	// preferred first, RFC 8760 §2.4). Empty means [MD5, SHA256].
	Algorithms []Algorithm
	// NonceTTL is how long a nonce is accepted. Zero means DefaultNonceTTL.
	// A genuine nonce older than this gets Stale.
	NonceTTL time.Duration
	// Key is the HMAC key that authenticates nonces; instances sharing a Key
	// (and Realm) accept each other's nonces. Nil or empty means 32 random
	// bytes (nonces then do not survive a restart). Otherwise at least
	// MinKeyLen bytes.
	Key []byte
	// MaxNonces bounds the nonce-count replay table. Zero means
	// DefaultMaxNonces.
	MaxNonces int
	// RequireQOP rejects responses without qop (RFC 2069 compatibility
	// mode, which has no replay protection) as Malformed.
	RequireQOP bool
	// Now returns the current time; nil means time.Now. For tests; it is
	// called concurrently.
	Now func() time.Time
}

// Authenticator issues challenges and verifies credentials for one realm.
// It is safe for concurrent use.
type Authenticator struct {
	realm      string
	algs       []Algorithm
	md5, sha   bool // configured algorithms
	ttl        int64
	requireQOP bool
	now        func() time.Time
	opaque     string
	tmpl       []challengeTemplate
	challLen   int // total length of one non-stale set of challenges

	macKey  []byte
	macPool sync.Pool // *macState

	rnd    randBuffer
	replay replayTable
}

// challengeTemplate is one challenge split around its nonce.
type challengeTemplate struct {
	prefix string // `Digest realm="...", nonce="`
	suffix string // `", opaque="...", algorithm=..., qop="auth"`
}

const staleSuffix = ", stale=true"

// New validates cfg and returns an Authenticator. Errors wrap ErrConfig.
func New(cfg Config) (*Authenticator, error) {
	if cfg.Realm == "" {
		return nil, fmt.Errorf("%w: empty realm", ErrConfig)
	}
	if !utf8.ValidString(cfg.Realm) || strings.ContainsFunc(cfg.Realm, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, fmt.Errorf("%w: realm %q contains control characters or invalid UTF-8", ErrConfig, cfg.Realm)
	}
	if cfg.NonceTTL < 0 {
		return nil, fmt.Errorf("%w: negative NonceTTL %v", ErrConfig, cfg.NonceTTL)
	}
	if cfg.MaxNonces < 0 {
		return nil, fmt.Errorf("%w: negative MaxNonces %d", ErrConfig, cfg.MaxNonces)
	}
	if len(cfg.Key) != 0 && len(cfg.Key) < MinKeyLen {
		return nil, fmt.Errorf("%w: Key is %d bytes, want at least %d", ErrConfig, len(cfg.Key), MinKeyLen)
	}

	a := &Authenticator{
		realm:      cfg.Realm,
		ttl:        int64(cfg.NonceTTL),
		requireQOP: cfg.RequireQOP,
		now:        cfg.Now,
	}
	if a.ttl == 0 {
		a.ttl = int64(DefaultNonceTTL)
	}
	if a.now == nil {
		a.now = time.Now
	}
	algs := cfg.Algorithms
	if len(algs) == 0 {
		algs = []Algorithm{MD5, SHA256}
	}
	for _, alg := range algs {
		switch {
		case alg == MD5 && !a.md5:
			a.md5 = true
		case alg == SHA256 && !a.sha:
			a.sha = true
		case alg == MD5 || alg == SHA256:
			return nil, fmt.Errorf("%w: duplicate algorithm %s", ErrConfig, alg)
		default:
			return nil, fmt.Errorf("%w: unsupported algorithm %q", ErrConfig, alg)
		}
	}
	a.algs = append([]Algorithm(nil), algs...)

	key := cfg.Key
	if len(key) == 0 {
		key = make([]byte, 32)
		rand.Read(key) // never fails (crashes the program instead) since Go 1.24
	}
	a.macKey = derive(key, "nonce", cfg.Realm)
	a.opaque = base64.RawURLEncoding.EncodeToString(derive(key, "opaque", cfg.Realm)[:12])
	a.macPool.New = func() any { return &macState{h: hmac.New(sha256.New, a.macKey)} }

	maxNonces := cfg.MaxNonces
	if maxNonces == 0 {
		maxNonces = DefaultMaxNonces
	}
	a.replay.init(maxNonces)
	a.rnd.off = len(a.rnd.buf)

	qrealm := quote(cfg.Realm)
	for _, alg := range a.algs {
		t := challengeTemplate{
			prefix: `Digest realm=` + qrealm + `, nonce="`,
			suffix: `", opaque="` + a.opaque + `", algorithm=` + string(alg) + `, qop="auth"`,
		}
		a.tmpl = append(a.tmpl, t)
		a.challLen += len(t.prefix) + nonceLen + len(t.suffix)
	}
	return a, nil
}

// derive returns HMAC-SHA256(key, label-prefix ‖ purpose ‖ 0 ‖ realm), a
// subkey separating purposes and realms that share one configured key.
func derive(key []byte, purpose, realm string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("outpost gateway/digest v1 "))
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(realm))
	return m.Sum(nil)
}

// quote returns s as a quoted-string, escaping '"' and '\'.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// Realm returns the configured realm.
func (a *Authenticator) Realm() string { return a.realm }

// Algorithms returns the configured algorithms in challenge order.
func (a *Authenticator) Algorithms() []Algorithm { return append([]Algorithm(nil), a.algs...) }

// Challenges returns the WWW-Authenticate / Proxy-Authenticate header values
// (without the header name), one per configured algorithm in order:
//
//	Digest realm="..", nonce="..", opaque="..", algorithm=MD5, qop="auth"[, stale=true]
//
// All values of one call share one fresh nonce (RFC 8760 §2.4).
func (a *Authenticator) Challenges(stale bool) []string {
	return a.AppendChallenges(make([]string, 0, len(a.tmpl)), stale)
}

// AppendChallenges appends the values Challenges would return to dst and
// returns the extended slice. The appended strings share one allocation;
// with enough capacity in dst that is the only one.
func (a *Authenticator) AppendChallenges(dst []string, stale bool) []string {
	var nonce [nonceLen]byte
	a.newNonce(&nonce)
	n := a.challLen
	if stale {
		n += len(a.tmpl) * len(staleSuffix)
	}
	var b strings.Builder
	b.Grow(n)
	for _, t := range a.tmpl {
		b.WriteString(t.prefix)
		b.Write(nonce[:])
		b.WriteString(t.suffix)
		if stale {
			b.WriteString(staleSuffix)
		}
	}
	s := b.String()
	for _, t := range a.tmpl {
		l := len(t.prefix) + nonceLen + len(t.suffix)
		if stale {
			l += len(staleSuffix)
		}
		dst = append(dst, s[:l])
		s = s[l:]
	}
	return dst
}

// Nonce layout: base64url (no padding) of
//
//	[0:8]   issue time, unix nanoseconds, big endian
//	[8:16]  random
//	[16:32] HMAC-SHA256(macKey, [0:16]) truncated to 16 bytes
const (
	nonceRaw = 32
	nonceLen = 43 // base64.RawURLEncoding.EncodedLen(nonceRaw)
	tagLen   = 16
)

// nonceID identifies an issued nonce in the replay table (time ‖ random).
type nonceID [16]byte

func (a *Authenticator) newNonce(dst *[nonceLen]byte) {
	var raw [nonceRaw]byte
	binary.BigEndian.PutUint64(raw[0:8], uint64(a.now().UnixNano()))
	a.rnd.read(raw[8:16])
	a.tag(raw[:16], raw[16:])
	base64.RawURLEncoding.Encode(dst[:], raw[:])
}

// openNonce authenticates a nonce and returns its identity and issue time.
func (a *Authenticator) openNonce(s string) (id nonceID, issued int64, ok bool) {
	var raw [nonceRaw]byte
	if len(s) != nonceLen || !decodeNonce(&raw, s) {
		return id, 0, false
	}
	var tag [tagLen]byte
	a.tag(raw[:16], tag[:])
	if subtle.ConstantTimeCompare(tag[:], raw[16:]) != 1 {
		return id, 0, false
	}
	copy(id[:], raw[:16])
	return id, int64(binary.BigEndian.Uint64(raw[0:8])), true
}

// Issued reports whether the nonce of c (and its opaque, if sent) was
// issued by this Authenticator: the nonce's MAC verifies under its key. It
// does not look at the nonce's age, the response or the nonce count, and it
// costs one HMAC, no lookup and no digest computation.
//
// A caller uses it to tell a failed Verify apart: BadResponse over a nonce
// that was never issued is not a guess at the user's password that any
// correct answer could have passed (anyone can make one up), so a caller
// that budgets failed guesses per user need not charge it to that user.
func (a *Authenticator) Issued(c *Credentials) bool {
	if c == nil || (c.Opaque != "" && c.Opaque != a.opaque) {
		return false
	}
	_, _, ok := a.openNonce(c.Nonce)
	return ok
}

// macState is a pooled keyed HMAC with its own buffers, so that nothing on
// the caller's stack is handed to the hash.Hash interface (which would make
// it escape to the heap).
type macState struct {
	h   hash.Hash
	in  [16]byte
	sum [sha256.Size]byte
}

// tag writes the truncated HMAC of msg (16 bytes) into out.
func (a *Authenticator) tag(msg, out []byte) {
	m := a.macPool.Get().(*macState)
	copy(m.in[:], msg)
	m.h.Reset()
	m.h.Write(m.in[:])
	m.h.Sum(m.sum[:0])
	copy(out, m.sum[:tagLen])
	a.macPool.Put(m)
}

// decodeNonce decodes a 43-character unpadded base64url string into 32
// bytes, rejecting non-alphabet characters and non-zero trailing bits (so
// that every nonce has exactly one valid spelling).
func decodeNonce(dst *[nonceRaw]byte, s string) bool {
	var bad byte
	j := 0
	i := 0
	for ; i+4 <= len(s); i += 4 {
		a, b, c, d := b64[s[i]], b64[s[i+1]], b64[s[i+2]], b64[s[i+3]]
		bad |= a | b | c | d
		v := uint32(a&63)<<18 | uint32(b&63)<<12 | uint32(c&63)<<6 | uint32(d&63)
		dst[j], dst[j+1], dst[j+2] = byte(v>>16), byte(v>>8), byte(v)
		j += 3
	}
	// 3 characters (18 bits) remain for the last 2 bytes.
	a, b, c := b64[s[i]], b64[s[i+1]], b64[s[i+2]]
	bad |= a | b | c
	v := uint32(a&63)<<12 | uint32(b&63)<<6 | uint32(c&63)
	dst[j], dst[j+1] = byte(v>>10), byte(v>>2)
	return bad&0x80 == 0 && v&3 == 0
}

var b64 = func() (t [256]byte) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range t {
		t[i] = 0xff
	}
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = byte(i)
	}
	return t
}()

// randBuffer hands out crypto/rand bytes drawn in batches, so that nonce
// generation costs one getrandom call per 64 nonces.
type randBuffer struct {
	mu  sync.Mutex
	off int
	buf [512]byte
}

func (r *randBuffer) read(dst []byte) {
	r.mu.Lock()
	if r.off+len(dst) > len(r.buf) {
		rand.Read(r.buf[:])
		r.off = 0
	}
	copy(dst, r.buf[r.off:])
	r.off += len(dst)
	r.mu.Unlock()
}
