package gateway

import (
	"github.com/outpost/outpost/gateway/dialplan"
)

// RouteExplanation is a dial-plan decision plus where it would lead now.
type RouteExplanation struct {
	dialplan.Decision
	OK   bool
	Mode dialplan.Mode
	// Targets in the order they would be tried: the extension's registered
	// contacts (local), the PSTN gateways (pstn) or the HQ targets (hq).
	Targets []string
}

// Route explains how a call to number would be routed in mode, without
// placing it (outpostctl route).
func (s *Server) Route(number string, mode dialplan.Mode) RouteExplanation {
	d, ok := s.plan.Load().Outbound(number, mode)
	ex := RouteExplanation{Decision: d, OK: ok, Mode: mode}
	if !ok {
		return ex
	}
	s.mu.Lock()
	cfg := s.cfg
	s.mu.Unlock()
	switch d.Route {
	case dialplan.RouteLocal:
		for _, b := range s.reg.Lookup(d.Target) {
			ex.Targets = append(ex.Targets, b.Contact+" via "+b.Source)
		}
	case dialplan.RoutePSTN:
		for _, g := range cfg.PSTN {
			ex.Targets = append(ex.Targets, g.Target+" ("+g.Name+")")
		}
	case dialplan.RouteHQ:
		ex.Targets = append(ex.Targets, cfg.HQ...)
	}
	return ex
}
