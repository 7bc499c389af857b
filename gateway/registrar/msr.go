package registrar

import (
	"strconv"
	"strings"

	"github.com/emiago/sipgo/sip"
)

// MSRAccount lets distributed media servers (other boxes' MSR agents, or
// media servers of the site) register their media resources here
// (docs/design.md §1 "Media resource selection"). Such a REGISTER is recognised by
// its {HeaderPrefix}Name or {HeaderPrefix}Iface-Name header; its AOR is
// "{interface};{contact-id}@{msr-name}", not an extension, so it is
// authenticated against this one account instead of a user, and it does
// not create a binding: the headers go to the OnMSR hook (the media
// resource table).
type MSRAccount struct {
	User         User   // Extension = the MSR username (msr.username)
	HeaderPrefix string // "P-Eltex-MSR-"
}

// MSRRegistration is one accepted MSR REGISTER.
type MSRRegistration struct {
	Headers map[string]string // every {prefix}… header, name as received → value
	Contact string            // the Contact URI
	Expires int               // granted seconds; 0 = the resource is withdrawn
}

// OnMSR sets the function given every authenticated MSR REGISTER. It runs
// on the SIP handler's goroutine and must not block.
func (r *Registrar) OnMSR(f func(MSRRegistration)) { r.msr.Store(&f) }

// msrHeaders returns the {prefix}… headers of req, or nil when it is not an
// MSR REGISTER (or no MSR account is configured).
func msrHeaders(req *sip.Request, acc *MSRAccount) map[string]string {
	if acc == nil {
		return nil
	}
	p := acc.HeaderPrefix
	var out map[string]string
	isMSR := false
	for _, h := range req.Headers() {
		name := h.Name()
		if len(name) <= len(p) || !strings.EqualFold(name[:len(p)], p) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = h.Value()
		switch rest := name[len(p):]; {
		case strings.EqualFold(rest, "Name"), strings.EqualFold(rest, "Iface-Name"):
			isMSR = true
		}
	}
	if !isMSR {
		return nil
	}
	return out
}

// handleMSR authenticates an MSR REGISTER against the MSR account and hands
// it to the hook. The expiry follows the same rules as a phone's (Contact
// parameter, else Expires header, else the default; bounded by
// min/max_expires).
func (r *Registrar) handleMSR(req *sip.Request, st *state, h *registerHeaders, hdrs map[string]string) *sip.Response {
	acc := st.cfg.MSR
	if h.authz == "" {
		return r.challenge(req, st, false, false)
	}
	users := map[string]User{acc.User.Extension: acc.User}
	if res := r.verifyAs(req, st, h.authz, acc.User.Extension, users, false); res != nil {
		return res
	}
	if len(h.contacts) != 1 || h.contacts[0].Address.Wildcard {
		return reply(req, sip.StatusBadRequest, "An MSR REGISTER carries exactly one Contact")
	}
	c := h.contacts[0]
	exp := h.expires
	if v, ok := c.Params.Get("expires"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return reply(req, sip.StatusBadRequest, "Bad Contact expires")
		}
		exp = n
	}
	minExp, maxExp := st.cfg.minExpires(), st.cfg.maxExpires()
	switch {
	case exp < 0:
		exp = min(defaultExpires, maxExp)
	case exp > 0 && exp < minExp:
		res := reply(req, sip.StatusIntervalToBrief, "Interval Too Brief")
		res.AppendHeader(sip.NewHeader("Min-Expires", strconv.Itoa(minExp)))
		return res
	case exp > maxExp:
		exp = maxExp
	}
	if f := r.msr.Load(); f != nil {
		(*f)(MSRRegistration{Headers: hdrs, Contact: c.Address.String(), Expires: exp})
	}
	res := reply(req, sip.StatusOK, "OK")
	if exp > 0 {
		ct := c.Clone()
		ct.Params.Remove("expires")
		ct.Params.Add("expires", strconv.Itoa(exp))
		res.AppendHeader(ct)
	}
	return res
}
