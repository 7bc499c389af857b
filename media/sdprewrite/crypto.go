package sdprewrite

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// SRTP crypto suites of RFC 4568 §6.2 and RFC 7714 §14.2 that the box
// keys (SDES), in its preference order.
const (
	SuiteAES80  = "AES_CM_128_HMAC_SHA1_80"
	SuiteAES32  = "AES_CM_128_HMAC_SHA1_32"
	SuiteGCM128 = "AEAD_AES_128_GCM"
)

// Suites lists the supported crypto suites in preference order.
var Suites = []string{SuiteAES80, SuiteAES32, SuiteGCM128}

// SuiteKeyLen returns the length of the master key plus master salt that
// the inline key of suite carries (RFC 4568 §6.2: 16 + 14 bytes for the
// AES-CM suites; RFC 7714 §12: 16 + 12 bytes for AEAD_AES_128_GCM), or 0
// for a suite the box does not support.
func SuiteKeyLen(suite string) int {
	switch suite {
	case SuiteAES80, SuiteAES32:
		return 30
	case SuiteGCM128:
		return 28
	}
	return 0
}

// Errors of ParseCrypto. A line with one of them is unusable: the relay
// ignores it and uses another line of the offer, if any.
var (
	ErrCryptoSyntax  = errors.New("media/sdprewrite: a=crypto syntax")
	ErrCryptoSuite   = errors.New("media/sdprewrite: a=crypto suite not supported")
	ErrCryptoKey     = errors.New("media/sdprewrite: a=crypto key length")
	ErrCryptoMKI     = errors.New("media/sdprewrite: a=crypto with MKI not supported")
	ErrCryptoKeys    = errors.New("media/sdprewrite: a=crypto with several keys not supported")
	ErrCryptoSession = errors.New("media/sdprewrite: a=crypto session parameters not supported")
)

// Crypto is one a=crypto attribute (RFC 4568 §9.1) with a single inline
// key and no MKI: "TAG SUITE inline:BASE64(KEY||SALT)[|LIFETIME]".
//
// Key is secret. String and LogValue never show it; only Line, which
// writes the attribute into an SDP body, does.
type Crypto struct {
	Tag      int    // 1..999999999, unique in the media section
	Suite    string // e.g. AES_CM_128_HMAC_SHA1_80
	Key      []byte // master key || master salt (SuiteKeyLen bytes)
	Lifetime string // as written ("2^31"), "" when absent; informative only
}

// String describes c without its key material (safe to log).
func (c Crypto) String() string {
	return strconv.Itoa(c.Tag) + " " + c.Suite + " inline:<redacted>"
}

// LogValue keeps the key out of structured logs.
func (c Crypto) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Line returns the attribute value after "a=crypto:", key included: for
// SDP bodies only, never for logs.
func (c Crypto) Line() string {
	s := strconv.Itoa(c.Tag) + " " + c.Suite + " inline:" + base64.StdEncoding.EncodeToString(c.Key)
	if c.Lifetime != "" {
		s += "|" + c.Lifetime
	}
	return s
}

// ParseCrypto reads the value of an a=crypto attribute (after
// "a=crypto:"). It accepts one inline key with an optional lifetime and
// refuses, with the errors above, what the relay cannot key: unknown
// suites, wrong key lengths, an MKI (RFC 4568 §6.1 "|MKI:LEN"), several
// keys, and session parameters (RFC 4568 §6.3: an answerer must not
// ignore one it does not understand, so the line is unusable). The
// returned error never contains key material.
func ParseCrypto(v string) (Crypto, error) {
	f := strings.Fields(v)
	if len(f) < 3 {
		return Crypto{}, ErrCryptoSyntax
	}
	tag, err := strconv.Atoi(f[0])
	if err != nil || tag < 0 || tag > 999999999 || len(f[0]) > 9 {
		return Crypto{}, ErrCryptoSyntax
	}
	c := Crypto{Tag: tag, Suite: f[1]}
	if SuiteKeyLen(c.Suite) == 0 {
		return Crypto{}, ErrCryptoSuite
	}
	if len(f) > 3 {
		return Crypto{}, ErrCryptoSession
	}
	params := f[2]
	if strings.Contains(params, ";") {
		return Crypto{}, ErrCryptoKeys
	}
	method, info, ok := strings.Cut(params, ":")
	if !ok || !strings.EqualFold(method, "inline") {
		return Crypto{}, ErrCryptoSyntax
	}
	parts := strings.Split(info, "|")
	switch len(parts) {
	case 1:
	case 2:
		// "|LIFETIME" or "|MKI:LEN": an MKI has a colon.
		if strings.Contains(parts[1], ":") {
			return Crypto{}, ErrCryptoMKI
		}
		c.Lifetime = parts[1]
	case 3:
		return Crypto{}, ErrCryptoMKI
	default:
		return Crypto{}, ErrCryptoSyntax
	}
	if c.Lifetime != "" && !validLifetime(c.Lifetime) {
		return Crypto{}, ErrCryptoSyntax
	}
	key, err := base64.StdEncoding.DecodeString(parts[0])
	if err != nil {
		// Some phones omit the padding.
		key, err = base64.RawStdEncoding.DecodeString(parts[0])
	}
	if err != nil {
		return Crypto{}, ErrCryptoSyntax // no detail: it would quote the key
	}
	if len(key) != SuiteKeyLen(c.Suite) {
		return Crypto{}, fmt.Errorf("%w: %d bytes for %s", ErrCryptoKey, len(key), c.Suite)
	}
	c.Key = key
	return c, nil
}

// validLifetime reads "N" or "2^N" (RFC 4568 §6.1).
func validLifetime(s string) bool {
	if e, ok := strings.CutPrefix(s, "2^"); ok {
		n, err := strconv.Atoi(e)
		return err == nil && n >= 0 && n <= 64
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// IsSecure reports whether proto is an SRTP profile (RTP/SAVP, RTP/SAVPF).
func IsSecure(proto string) bool {
	return strings.EqualFold(proto, "RTP/SAVP") || strings.EqualFold(proto, "RTP/SAVPF")
}

// Profile returns proto made secure (RTP/AVP → RTP/SAVP, RTP/AVPF →
// RTP/SAVPF) or plain (the reverse); other profiles come back as they are.
func Profile(proto string, secure bool) string {
	switch strings.ToUpper(proto) {
	case "RTP/AVP", "RTP/SAVP", "":
		if secure {
			return "RTP/SAVP"
		}
		return "RTP/AVP"
	case "RTP/AVPF", "RTP/SAVPF":
		if secure {
			return "RTP/SAVPF"
		}
		return "RTP/AVPF"
	}
	return proto
}
