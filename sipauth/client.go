package sipauth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/icholy/digest"
)

// ErrNoChallenge: the response carries no challenge the client can
// answer, or (from Authorization) no challenge is kept.
var ErrNoChallenge = errors.New("no usable digest challenge")

// Headers names the challenge header of a 401 or 407 and the header that
// answers it: WWW-Authenticate and Authorization for 401,
// Proxy-Authenticate and Proxy-Authorization for 407 (RFC 3261 §22.3).
func Headers(status int) (challenge, answer string) {
	if status == 407 {
		return "Proxy-Authenticate", "Proxy-Authorization"
	}
	return "WWW-Authenticate", "Authorization"
}

// Client answers the challenges of one user. The zero value with Username
// and Password set is ready to use. A Client is used by one goroutine at
// a time; it has no lock.
type Client struct {
	Username, Password string

	chal   *digest.Challenge
	header string // Authorization or Proxy-Authorization
	nc     int    // the nonce count last sent
}

// Challenge keeps the first challenge it can answer among the values of a
// 401's WWW-Authenticate or a 407's Proxy-Authenticate headers, given in
// the server's order of preference (one per algorithm, RFC 8760 §2.4).
// stale reports stale=true (RFC 7616 §3.3: the nonce had expired, the
// password is right: answer the new one). On error nothing is kept.
func (c *Client) Challenge(status int, challenges []string) (stale bool, err error) {
	c.chal, c.nc = nil, 0
	for _, v := range challenges {
		ch, err := digest.ParseChallenge(v)
		if err != nil {
			continue
		}
		ch.Algorithm = strings.ToUpper(ch.Algorithm) // some servers write md5
		if digest.CanDigest(ch) && (len(ch.QOP) == 0 || ch.SupportsQOP("auth")) {
			_, c.header = Headers(status)
			c.chal = ch
			return ch.Stale, nil
		}
	}
	return false, fmt.Errorf("%d: %w", status, ErrNoChallenge)
}

// Kept reports whether Authorization has a challenge to answer.
func (c *Client) Kept() bool { return c.chal != nil }

// Forget drops the kept challenge (the server refused its answer).
func (c *Client) Forget() { c.chal = nil }

// Authorization answers the kept challenge for a request of method to
// uri (the Request-URI as sent) with the next nonce count, and returns
// the header's name and value. A challenge without qop is dropped once
// answered.
func (c *Client) Authorization(method, uri string) (name, value string, err error) {
	if c.chal == nil {
		return "", "", ErrNoChallenge
	}
	c.nc++
	cred, err := digest.Digest(c.chal, digest.Options{Method: method, URI: uri, Username: c.Username, Password: c.Password, Count: c.nc})
	if err != nil {
		c.chal = nil
		return "", "", fmt.Errorf("digest: %w", err)
	}
	if !c.chal.SupportsQOP("auth") {
		c.chal = nil
	}
	return c.header, cred.String(), nil
}
