package registrar

import (
	"fmt"

	"github.com/emiago/sipgo/sip"
)

// SetRedirect sets the function asked, for every REGISTER of a user (not
// of the MSR account), whether another registrar serves that user: a
// registrar pool's member that is not the user's home. URIs (the home
// first, then its backups) make the registrar answer 301 Moved
// Permanently (RFC 3261 §21.3.2) with a Contact for each, q 1.0 for the
// first and lower for the next, instead of taking the registration; a
// phone that keeps them can move to the backup at once when the home
// fails. None = take it; nil = never.
//
// A REGISTER without credentials is redirected at once when this box
// holds no binding of the user (nothing changes here, so nothing needs
// proving). When it holds one — the phone refreshes at its backup after
// its primary came back — the credentials must verify first: then the
// user's bindings here are dropped (failback) and the phone is
// redirected. So nobody without the password can make the box forget a
// phone.
func (r *Registrar) SetRedirect(f func(aor string) []string) {
	if f == nil {
		r.redirect.Store(nil)
		return
	}
	r.redirect.Store(&f)
}

// redirectFor is where a REGISTER of aor goes instead, preferred first
// (none = here).
func (r *Registrar) redirectFor(aor string) []string {
	f := r.redirect.Load()
	if f == nil {
		return nil
	}
	return (*f)(aor)
}

// moved answers 301 with the other registrars' Contacts.
func (r *Registrar) moved(req *sip.Request, uris []string) *sip.Response {
	r.stats.redirected.Add(1)
	return Redirect(req, sip.StatusMovedPermanently, "Moved Permanently", uris)
}

// Redirect is a 3xx answer (code) to req with a Contact for each of uris,
// the first preferred (q 1.0, then 0.5, 0.4, …).
func Redirect(req *sip.Request, code int, reason string, uris []string) *sip.Response {
	res := reply(req, code, reason)
	for i, uri := range uris {
		q := "1.0"
		if i > 0 {
			q = fmt.Sprintf("0.%d", max(6-i, 1))
		}
		res.AppendHeader(sip.NewHeader("Contact", "<"+uri+">;q="+q))
	}
	return res
}

// handOver drops aor's bindings on behalf of its home registrar and
// redirects the phone there.
func (r *Registrar) handOver(req *sip.Request, aor string, uris []string) *sip.Response {
	if n := r.tbl.dropAOR(aor); n > 0 {
		r.stats.handedOver.Add(uint64(n))
		r.log.Info("bindings handed over to the user's home registrar", "aor", aor, "bindings", n, "home", uris[0])
	}
	return r.moved(req, uris)
}

// SetOnBound sets the function told, after every REGISTER that adds or
// refreshes a binding of a user, that user's AOR (the gateway's
// store-and-forward of messages: a phone is there to take them). It runs
// on the registration's path: it must return at once.
func (r *Registrar) SetOnBound(f func(aor string)) {
	r.onBound.Store(&f)
}

// SetOnUnbound sets the function told, after every REGISTER that removes
// a binding of a user and every expiry of one, that user's AOR
// (presence: the user may be gone). As SetOnBound's, it must return at
// once.
func (r *Registrar) SetOnUnbound(f func(aor string)) {
	r.onUnbound.Store(&f)
}
