package upstream

import (
	"errors"
	"fmt"
	"strings"

	"github.com/emiago/sipgo/sip"
	"github.com/icholy/digest"
)

// authCache answers HQ's digest challenges for one user (RFC 3261 §22,
// RFC 7616). It keeps the last challenge with qop=auth and authorises the
// next REGISTER to the same target pre-emptively with the nonce count
// incremented, so that a refresh normally costs one transaction instead
// of a 401 round trip. Challenges without qop are answered but not
// reused: without a nonce count a reused response is a replay.
//
// An authCache belongs to one entry and is used only by the worker that
// holds the entry, so it has no lock.
type authCache struct {
	target   string // the target whose challenge this is
	username string // the credentials it was answered with
	password string
	header   string // "Authorization" or "Proxy-Authorization"
	chal     *digest.Challenge
	nc       int
}

var errNoChallenge = errors.New("no usable digest challenge")

// authorize adds credentials to req if a reusable challenge from target
// is cached for these credentials.
func (a *authCache) authorize(req *sip.Request, target, username, password string) error {
	if a.chal == nil || a.target != target || a.username != username || a.password != password {
		return nil
	}
	a.nc++
	return a.apply(req)
}

// challenge takes the challenge of a 401/407 from target, answers it on
// req and reports whether HQ said the previous nonce was merely stale
// (RFC 7616 §3.3: retry with the new nonce, the password is right).
func (a *authCache) challenge(req *sip.Request, res *sip.Response, target, username, password string) (stale bool, err error) {
	hdr, answer := "WWW-Authenticate", "Authorization"
	if res.StatusCode == sip.StatusProxyAuthRequired {
		hdr, answer = "Proxy-Authenticate", "Proxy-Authorization"
	}
	// Several challenges (one per algorithm, RFC 8760 §2.4) come in the
	// server's order of preference: take the first one we can answer.
	var chal *digest.Challenge
	for _, h := range res.GetHeaders(hdr) {
		c, err := digest.ParseChallenge(h.Value())
		if err != nil {
			continue
		}
		c.Algorithm = strings.ToUpper(c.Algorithm)
		if digest.CanDigest(c) && (len(c.QOP) == 0 || c.SupportsQOP("auth")) {
			chal = c
			break
		}
	}
	if chal == nil {
		a.chal = nil
		return false, fmt.Errorf("%d: %w", res.StatusCode, errNoChallenge)
	}
	*a = authCache{target: target, username: username, password: password, header: answer, chal: chal, nc: 1}
	if err := a.apply(req); err != nil {
		a.chal = nil
		return false, err
	}
	if !chal.SupportsQOP("auth") {
		a.chal = nil // answer this once; never reuse a response without nc
	}
	return chal.Stale, nil
}

// forget drops the cached challenge (HQ rejected it).
func (a *authCache) forget() { a.chal = nil }

func (a *authCache) apply(req *sip.Request) error {
	cred, err := digest.Digest(a.chal, digest.Options{
		Method:   req.Method.String(),
		URI:      req.Recipient.String(),
		Username: a.username,
		Password: a.password,
		Count:    a.nc,
	})
	if err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	req.RemoveHeader("Authorization")
	req.RemoveHeader("Proxy-Authorization")
	req.AppendHeader(sip.NewHeader(a.header, cred.String()))
	return nil
}
