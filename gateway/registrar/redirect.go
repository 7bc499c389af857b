package registrar

import (
	"github.com/emiago/sipgo/sip"
)

// SetRedirect sets the function asked, for every REGISTER of a user (not
// of the MSR account), whether another registrar serves that user: a
// registrar pool's member that is not the user's home. ok = true makes the
// registrar answer 301 Moved Permanently with Contact <uri> (RFC 3261
// §21.3.2) instead of taking the registration. nil = never.
//
// A REGISTER without credentials is redirected at once when this box
// holds no binding of the user (nothing changes here, so nothing needs
// proving). When it holds one — the phone refreshes at its backup after
// its primary came back — the credentials must verify first: then the
// user's bindings here are dropped (failback) and the phone is
// redirected. So nobody without the password can make the box forget a
// phone.
func (r *Registrar) SetRedirect(f func(aor string) (uri string, ok bool)) {
	if f == nil {
		r.redirect.Store(nil)
		return
	}
	r.redirect.Store(&f)
}

// redirectFor is where a REGISTER of aor goes instead ("" = here).
func (r *Registrar) redirectFor(aor string) string {
	f := r.redirect.Load()
	if f == nil {
		return ""
	}
	if uri, ok := (*f)(aor); ok {
		return uri
	}
	return ""
}

// moved answers 301 with the other registrar's Contact.
func (r *Registrar) moved(req *sip.Request, uri string) *sip.Response {
	r.stats.redirected.Add(1)
	res := reply(req, sip.StatusMovedPermanently, "Moved Permanently")
	res.AppendHeader(sip.NewHeader("Contact", "<"+uri+">"))
	return res
}

// handOver drops aor's bindings on behalf of its home registrar and
// redirects the phone there.
func (r *Registrar) handOver(req *sip.Request, aor, uri string) *sip.Response {
	if n := r.tbl.dropAOR(aor); n > 0 {
		r.stats.handedOver.Add(uint64(n))
		r.log.Info("bindings handed over to the user's home registrar", "aor", aor, "bindings", n, "home", uri)
	}
	return r.moved(req, uri)
}
