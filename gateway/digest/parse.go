package digest

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Credentials are the parameters of a Digest Authorization or
// Proxy-Authorization header value. Values are unquoted and unescaped;
// absent parameters are empty. Unknown parameters are ignored.
type Credentials struct {
	Username  string
	Realm     string
	Nonce     string
	URI       string
	Response  string
	Algorithm string
	Cnonce    string
	Opaque    string
	QOP       string
	NC        string
}

// Parse errors. Each wraps ErrMalformed (or ErrNotDigest) and is a
// preallocated value, so rejecting garbage does not allocate.
var (
	errNoScheme     = fmt.Errorf("%w: missing auth scheme", ErrMalformed)
	errSchemeSep    = fmt.Errorf("%w: no whitespace after auth scheme", ErrMalformed)
	errNoParams     = fmt.Errorf("%w: no parameters", ErrMalformed)
	errParamName    = fmt.Errorf("%w: expected parameter name", ErrMalformed)
	errEquals       = fmt.Errorf("%w: expected '=' after parameter name", ErrMalformed)
	errNoValue      = fmt.Errorf("%w: missing parameter value", ErrMalformed)
	errComma        = fmt.Errorf("%w: expected ',' between parameters", ErrMalformed)
	errUnterminated = fmt.Errorf("%w: unterminated quoted-string", ErrMalformed)
	errControl      = fmt.Errorf("%w: control character in quoted-string", ErrMalformed)
	errBadEscape    = fmt.Errorf("%w: invalid quoted-pair", ErrMalformed)
	errUTF8         = fmt.Errorf("%w: invalid UTF-8 in quoted-string", ErrMalformed)
	errDuplicate    = fmt.Errorf("%w: duplicate parameter", ErrMalformed)
)

// ParseCredentials parses the value of an Authorization (or
// Proxy-Authorization) header: `Digest k=v, k="v", ...`.
//
// The scheme and parameter names are matched case-insensitively; values may
// be tokens or quoted-strings (with backslash escapes); whitespace (SP, HTAB,
// CR, LF) around '=' and ',' is tolerated, as are empty list elements.
// Duplicate known parameters, a missing or different scheme, unterminated
// quoted-strings, control characters and invalid UTF-8 in quoted-strings are
// rejected with an error wrapping ErrMalformed or ErrNotDigest. It does not
// check that required parameters are present; Verify does.
//
// Values without escapes are substrings of headerValue (no allocation).
func ParseCredentials(headerValue string) (Credentials, error) {
	var c Credentials
	v := headerValue
	i := skipLWS(v, 0)
	start := i
	for i < len(v) && isTokenChar(v[i]) {
		i++
	}
	if i == start {
		return Credentials{}, errNoScheme
	}
	if !strings.EqualFold(v[start:i], "Digest") {
		if i < len(v) && v[i] == '=' {
			// "username=..." with no scheme at all.
			return Credentials{}, errNoScheme
		}
		return Credentials{}, ErrNotDigest
	}
	if i < len(v) && !isLWS(v[i]) {
		return Credentials{}, errSchemeSep
	}

	var seen uint16
	n := 0
	for {
		i = skipLWS(v, i)
		if i >= len(v) {
			break
		}
		if v[i] == ',' { // empty list element (RFC 7230 §7 #rule)
			i++
			continue
		}
		ks := i
		for i < len(v) && isTokenChar(v[i]) {
			i++
		}
		if i == ks {
			return Credentials{}, errParamName
		}
		key := v[ks:i]
		i = skipLWS(v, i)
		if i >= len(v) || v[i] != '=' {
			return Credentials{}, errEquals
		}
		i = skipLWS(v, i+1)
		if i >= len(v) {
			return Credentials{}, errNoValue
		}
		var val string
		if v[i] == '"' {
			var err error
			val, i, err = parseQuoted(v, i)
			if err != nil {
				return Credentials{}, err
			}
		} else {
			vs := i
			for i < len(v) && isBareValueChar(v[i]) {
				i++
			}
			if i == vs {
				return Credentials{}, errNoValue
			}
			val = v[vs:i]
		}
		i = skipLWS(v, i)
		if i < len(v) {
			if v[i] != ',' {
				return Credentials{}, errComma
			}
			i++
		}
		if f, bit := c.field(key); f != nil {
			if seen&bit != 0 {
				return Credentials{}, errDuplicate
			}
			seen |= bit
			*f = val
		}
		n++
	}
	if n == 0 {
		return Credentials{}, errNoParams
	}
	return c, nil
}

// field returns the destination of a known parameter and a bit identifying
// it, or nil for an unknown parameter.
func (c *Credentials) field(key string) (*string, uint16) {
	switch len(key) {
	case 2:
		if strings.EqualFold(key, "nc") {
			return &c.NC, 1 << 0
		}
	case 3:
		if strings.EqualFold(key, "uri") {
			return &c.URI, 1 << 1
		}
		if strings.EqualFold(key, "qop") {
			return &c.QOP, 1 << 2
		}
	case 5:
		if strings.EqualFold(key, "realm") {
			return &c.Realm, 1 << 3
		}
		if strings.EqualFold(key, "nonce") {
			return &c.Nonce, 1 << 4
		}
	case 6:
		if strings.EqualFold(key, "cnonce") {
			return &c.Cnonce, 1 << 5
		}
		if strings.EqualFold(key, "opaque") {
			return &c.Opaque, 1 << 6
		}
	case 8:
		if strings.EqualFold(key, "username") {
			return &c.Username, 1 << 7
		}
		if strings.EqualFold(key, "response") {
			return &c.Response, 1 << 8
		}
	case 9:
		if strings.EqualFold(key, "algorithm") {
			return &c.Algorithm, 1 << 9
		}
	}
	return nil, 0
}

// parseQuoted parses the quoted-string starting at v[i] == '"'. It returns
// the unescaped contents and the index just past the closing quote.
func parseQuoted(v string, i int) (string, int, error) {
	i++ // opening quote
	start := i
	high := false
	for ; i < len(v); i++ {
		b := v[i]
		switch {
		case b == '"':
			s := v[start:i]
			if high && !utf8.ValidString(s) {
				return "", 0, errUTF8
			}
			return s, i + 1, nil
		case b == '\\':
			return parseQuotedSlow(v, start, i)
		case b >= 0x80:
			high = true
		case isCtl(b):
			return "", 0, errControl
		}
	}
	return "", 0, errUnterminated
}

// parseQuotedSlow handles a quoted-string containing quoted-pairs; v[start:i]
// has already been scanned and v[i] is the first backslash. It validates and
// measures first, so that the result costs exactly one allocation.
func parseQuotedSlow(v string, start, i int) (string, int, error) {
	n := i - start // unescaped length
	j := i
	for ; ; j++ {
		if j >= len(v) {
			return "", 0, errUnterminated
		}
		b := v[j]
		if b == '"' {
			break
		}
		if b == '\\' {
			j++
			if j >= len(v) {
				return "", 0, errUnterminated
			}
			// RFC 3261 quoted-pair: any US-ASCII except CR and LF; we are
			// stricter and allow only HTAB and printable characters.
			if e := v[j]; e >= 0x80 || (isCtl(e) && e != '\t') {
				return "", 0, errBadEscape
			}
		} else if isCtl(b) {
			return "", 0, errControl
		}
		n++
	}
	// Escapes only remove an ASCII byte that precedes another ASCII byte,
	// which does not change UTF-8 validity, so check before allocating.
	if !utf8.ValidString(v[start:j]) {
		return "", 0, errUTF8
	}
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteString(v[start:i])
	for k := i; k < j; k++ {
		if v[k] == '\\' {
			k++
		}
		sb.WriteByte(v[k])
	}
	return sb.String(), j + 1, nil
}

func skipLWS(v string, i int) int {
	for i < len(v) && isLWS(v[i]) {
		i++
	}
	return i
}

func isLWS(b byte) bool { return b == ' ' || b == '\t' || b == '\r' || b == '\n' }

// isCtl reports control characters not allowed in a quoted-string (HTAB is).
func isCtl(b byte) bool { return (b < 0x20 && b != '\t') || b == 0x7f }

// isTokenChar reports RFC 3261 token characters:
// alphanum / "-" / "." / "!" / "%" / "*" / "_" / "+" / "`" / "'" / "~".
func isTokenChar(b byte) bool { return tokenTable[b] }

// isBareValueChar reports characters accepted in an unquoted parameter
// value: printable ASCII except '"' and ','. This is more liberal than token
// so that sloppy clients sending e.g. uri=sip:host:5060 unquoted still work.
func isBareValueChar(b byte) bool { return b > 0x20 && b < 0x7f && b != '"' && b != ',' }

var tokenTable = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "-.!%*_+`'~" {
		t[c] = true
	}
	return t
}()
