package gateway

import (
	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/gateway/hqtrunk"
	"github.com/outpost/outpost/mode"
)

// The HQ trunk's configuration and verdicts, as the appliance names them.
type (
	HQConfig      = hqtrunk.Config
	HQPool        = hqtrunk.Pool
	HQTargetEvent = hqtrunk.Event
)

// OnHQTarget sets the function told every HQ target verdict (a new target,
// probes took it down or brought it up, or it left the target set) and
// every pool that could not be resolved or resolved again, for the mode
// logic. It is called from the prober's goroutine and must not block for
// long.
func (s *Server) OnHQTarget(f func(HQTargetEvent)) { s.probe.OnEvent(f) }

// HQHealth is the health of every HQ target (nil without HQ): for
// outpostctl status, metrics and the mode logic.
func (s *Server) HQHealth() []health.TargetState {
	if hq := s.hqNow.Load(); hq != nil {
		return hq.Health()
	}
	return nil
}

// HQFallback is the per-call fallback the B2BUA asks for (b2bua.HQFallback)
// when every HQ target of a call failed by the retry rule: the route the
// number takes in survivable mode (the rule's survivable alternative or
// the pstn_prefix fallback), if hq.call_fallback is on and that route is
// not HQ again. The mode is not changed: the probes decide that.
func (r router) HQFallback(number string) (dialplan.Decision, bool) {
	cfg := r.s.cfg.Load()
	if cfg.HQTrunk == nil || !cfg.HQTrunk.CallFallback {
		return dialplan.Decision{}, false
	}
	d, ok := r.s.plan.Load().Outbound(number, mode.Survivable)
	if !ok || d.Route == "" || d.Route == dialplan.RouteHQ {
		return dialplan.Decision{}, false
	}
	return d, true
}
