package gateway

import (
	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/gateway/hqtrunk"
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
func (s *Server) HQHealth() []health.TargetState { return s.now.Load().hq.Health() }
