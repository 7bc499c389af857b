package pool

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Header carries a member's signature on the INVITEs it sends another
// member: "t=UNIXSECONDS;m=BASE64URL(HMAC-SHA256)".
const Header = "X-Outpost-Pool"

// Window is how far a signature's timestamp may be from the receiver's
// clock, either way: long enough for the members' clocks (NTP) and a
// retransmitted INVITE (Timer B, 32 s), short enough that a captured
// INVITE cannot be replayed later.
const Window = 60 * time.Second

// Signature errors.
var (
	ErrNoSignature  = errors.New("pool: no signature")
	ErrBadSignature = errors.New("pool: bad signature")
	ErrStale        = errors.New("pool: signature outside its validity window")
)

// mac is HMAC-SHA256(secret, t \n Call-ID \n from-user \n to-user).
func mac(secret string, t int64, callID, from, to string) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(strconv.FormatInt(t, 10) + "\n" + callID + "\n" + from + "\n" + to))
	return h.Sum(nil)
}

// Sign is the Header value for an INVITE with this Call-ID, From user and
// To user, sent at now.
func Sign(secret, callID, from, to string, now time.Time) string {
	t := now.Unix()
	return "t=" + strconv.FormatInt(t, 10) + ";m=" + base64.RawURLEncoding.EncodeToString(mac(secret, t, callID, from, to))
}

// Verify checks a Header value against the INVITE's Call-ID, From and To
// users at now: the MAC (constant-time) and the timestamp (within Window).
func Verify(secret, value, callID, from, to string, now time.Time) error {
	if value == "" {
		return ErrNoSignature
	}
	var ts, m string
	for _, part := range strings.Split(value, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "m":
			m = v
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrBadSignature
	}
	got, err := base64.RawURLEncoding.DecodeString(m)
	if err != nil || !hmac.Equal(got, mac(secret, t, callID, from, to)) {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(t, 0)); d > Window || d < -Window {
		return ErrStale
	}
	return nil
}
