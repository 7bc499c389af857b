package gateway

import (
	"strings"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/b2bua"
	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/registrar"
)

// onInvite admits a new call: only local users who authenticate as the
// caller in their From header may place calls (the PSTN is reachable from
// here, so an open INVITE would be toll fraud). Authenticated calls go to
// the B2BUA. Inbound calls from the PSTN gateways come with the survivable
// mode issue (DID routing).
func (s *Server) onInvite(req *sip.Request, tx sip.ServerTransaction) {
	if to := req.To(); to != nil && to.Params.Has("tag") {
		s.b2b.OnInvite(req, tx) // in-dialog: the B2BUA answers (re-INVITE not yet supported)
		return
	}
	if _, res := s.reg.AuthorizeCall(req); res != nil {
		s.respond(tx, res)
		return
	}
	s.b2b.OnInvite(req, tx)
}

// Calls returns the calls in progress.
func (s *Server) Calls() []b2bua.CallInfo { return s.b2b.Calls() }

func (c Config) b2buaConfig() b2bua.Config {
	bc := c.Calls
	bc.PSTNGateways = nil
	for _, g := range c.PSTN {
		bc.PSTNGateways = append(bc.PSTNGateways, g.Target)
	}
	return bc
}

// locator hands the B2BUA the registrar's live bindings.
type locator struct{ reg *registrar.Registrar }

func (l locator) Contacts(ext string) []b2bua.Contact {
	var out []b2bua.Contact
	for _, b := range l.reg.Lookup(ext) {
		transport, addr, _ := strings.Cut(b.Source, ":")
		var u sip.Uri
		if err := sip.ParseUri(strings.Trim(strings.SplitN(b.Contact, ">", 2)[0], "<> "), &u); err != nil {
			continue
		}
		out = append(out, b2bua.Contact{URI: u.String(), Transport: transport, Addr: addr})
	}
	return out
}

// router routes with the current plan in the current mode.
type router struct{ s *Server }

func (r router) Outbound(number string) (dialplan.Decision, bool) {
	mode, _ := r.s.mode.Load().(dialplan.Mode)
	return r.s.plan.Load().Outbound(number, mode)
}
