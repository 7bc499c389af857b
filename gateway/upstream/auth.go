package upstream

import (
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/sipauth"
)

// authCache answers HQ's digest challenges for one user with sipauth's
// client, remembering whose challenge it holds: a kept qop=auth challenge
// authorises the next REGISTER to the same target with the same
// credentials pre-emptively, so that a refresh normally costs one
// transaction instead of a 401 round trip.
//
// An authCache belongs to one entry and is used only by the worker that
// holds the entry, so it has no lock.
type authCache struct {
	target string // the target whose challenge this is
	c      sipauth.Client
}

// authorize adds credentials to req if a reusable challenge from target
// is kept for these credentials.
func (a *authCache) authorize(req *sip.Request, target, username, password string) error {
	if !a.c.Kept() || a.target != target || a.c.Username != username || a.c.Password != password {
		return nil
	}
	return a.apply(req)
}

// challenge takes the challenge of a 401/407 from target, answers it on
// req and reports whether HQ said the previous nonce was merely stale
// (RFC 7616 §3.3: retry with the new nonce, the password is right).
func (a *authCache) challenge(req *sip.Request, res *sip.Response, target, username, password string) (stale bool, err error) {
	*a = authCache{target: target, c: sipauth.Client{Username: username, Password: password}}
	hdr, _ := sipauth.Headers(res.StatusCode)
	var values []string
	for _, h := range res.GetHeaders(hdr) {
		values = append(values, h.Value())
	}
	if stale, err = a.c.Challenge(res.StatusCode, values); err != nil {
		return false, err
	}
	return stale, a.apply(req)
}

// forget drops the kept challenge (HQ rejected it).
func (a *authCache) forget() { a.c.Forget() }

func (a *authCache) apply(req *sip.Request) error {
	name, value, err := a.c.Authorization(req.Method.String(), req.Recipient.String())
	if err != nil {
		return err
	}
	req.RemoveHeader("Authorization")
	req.RemoveHeader("Proxy-Authorization")
	req.AppendHeader(sip.NewHeader(name, value))
	return nil
}
