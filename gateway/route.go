package gateway

import (
	"context"
	"time"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/hqtrunk"
	"github.com/outpost/outpost/mode"
)

// RouteExplanation is a dial-plan decision plus where it would lead now.
type RouteExplanation struct {
	dialplan.Decision
	OK   bool
	Mode mode.Mode
	// Targets in the order they would be tried: the extension's registered
	// contacts (local), the PSTN gateways (pstn) or the HQ targets (hq).
	Targets []string
}

// Route explains how a call to number would be routed in mode, without
// placing it (outpostctl route).
func (s *Server) Route(number string, mode mode.Mode) RouteExplanation {
	run := s.now.Load()
	d, ok := run.plan.Outbound(number, mode)
	ex := RouteExplanation{Decision: d, OK: ok, Mode: mode}
	if !ok {
		return ex
	}
	cfg := run.cfg
	switch d.Route {
	case dialplan.RouteLocal:
		for _, b := range s.reg.Lookup(d.Target) {
			ex.Targets = append(ex.Targets, b.Contact+" via "+b.Source)
		}
	case dialplan.RoutePSTN:
		for _, g := range cfg.PSTN {
			ex.Targets = append(ex.Targets, g.Target.String()+" ("+g.Name+")")
		}
	case dialplan.RouteHQ:
		ex.Targets = hqTargetsNow(run.hq, cfg.HQ)
	}
	return ex
}

// hqTargetsNow lists the HQ targets as a call would try them now (resolved,
// healthy first, each with its health); without an answer from DNS within a
// second it falls back to the configured description.
func hqTargetsNow(hq *hqtrunk.Trunk, described []string) []string {
	if hq == nil {
		return described
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	names, err := hq.Targets(ctx)
	if err != nil || len(names) == 0 {
		return described
	}
	state := map[string]string{}
	now := time.Now()
	for _, t := range hq.Health() {
		switch {
		case !t.Up:
			state[t.Target] = " (DOWN: " + string(t.Reason) + ")"
		case t.BlockedUntil.After(now):
			state[t.Target] = " (blocked until " + t.BlockedUntil.Local().Format(time.TimeOnly) + ")"
		}
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n + state[n]
	}
	return out
}
