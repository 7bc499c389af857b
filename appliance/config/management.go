package config

import (
	"strings"
)

// EffectiveRevokedSerials is RevokedSerials normalised as NormalizeSerial
// does (lower-case hexadecimal, no colons, no leading zeros), without the
// entries that are not serials (validation refuses those).
func (m Management) EffectiveRevokedSerials() []string {
	var out []string
	for _, s := range m.RevokedSerials {
		if n, ok := NormalizeSerial(s); ok {
			out = append(out, n)
		}
	}
	return out
}

// NormalizeSerial turns a certificate serial number written in hexadecimal
// into the form big.Int.Text(16) gives for it: lower case, no colons, no
// leading zeros ("00:0A:FF" → "aff"). s is either plain hex digits or bytes
// of one or two digits separated by colons, as openssl prints them ("1:2"
// is 0x0102). ok is false when s is neither, or longer than maxSerialBytes.
func NormalizeSerial(s string) (n string, ok bool) {
	s = strings.TrimSpace(s)
	var h string
	if strings.Contains(s, ":") {
		var b strings.Builder
		for part := range strings.SplitSeq(s, ":") {
			if len(part) == 0 || len(part) > 2 {
				return "", false
			}
			if len(part) == 1 {
				b.WriteByte('0')
			}
			b.WriteString(part)
		}
		h = b.String()
	} else {
		h = s
	}
	if h == "" || len(h) > 2*maxSerialBytes {
		return "", false
	}
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return "", false
		}
	}
	h = strings.TrimLeft(strings.ToLower(h), "0")
	if h == "" {
		h = "0"
	}
	return h, true
}

// maxSerialBytes bounds a serial: RFC 5280 §4.1.2.2 allows 20 octets; a
// few more tolerate non-conforming CAs and a leading 00.
const maxSerialBytes = 32
