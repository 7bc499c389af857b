package gateway

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/gateway/hqtrunk"
)

// The trunks as the Server holds them: HQ's (gateway/hqtrunk) and the
// PSTN gateways' health.

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

// pstnHealth is the health of the PSTN gateways (docs/design.md §1, the rule the
// HQ targets follow too): one health.Tracker fed by every call attempt's
// outcome (the B2BUA observes it by the retry rule: 408, 503, 504, no
// response or a transport error block the gateway for
// health.DefaultBlockFor) and, when Config.PSTNProbeInterval is set, by an
// OPTIONS probe of every gateway each interval (health.DefaultDownAfter
// failed probes take a gateway down, health.DefaultUpAfter good ones bring
// it back). Calls try the eligible gateways in the configured order; when
// none is eligible, one at random (health.Tracker.Pick).
//
// Probe verdicts are not mode events: a dead PSTN gateway does not make the
// box survivable, it only steers calls.
type pstnHealth struct {
	gws      []PSTNGateway
	names    []string // gws' targets, siptarget.Target.String(): the Tracker's keys
	interval time.Duration
	tr       *health.Tracker
	stop     func() // ends the prober started by start; nil = not running
}

// nextPSTN is the PSTN health for cfg (nil without gateways). The Tracker
// of cur is kept when the probe interval is unchanged, so a push keeps the
// state (blocks included) of the gateways that stay.
func nextPSTN(cur *pstnHealth, cfg Config) *pstnHealth {
	if len(cfg.PSTN) == 0 {
		return nil
	}
	p := &pstnHealth{gws: slices.Clone(cfg.PSTN), interval: cfg.PSTNProbeInterval}
	for _, g := range cfg.PSTN {
		p.names = append(p.names, g.Target.String())
	}
	if cur != nil && cur.interval == p.interval {
		p.tr = cur.tr
	} else {
		// The interval is the Tracker's (the Prober reads it there); 0 =
		// no probes, and then only the block matters.
		p.tr = health.New(health.Config{Interval: p.interval})
	}
	return p
}

// tracker is the B2BUA's Config.PSTNHealth (nil for no gateways).
func (p *pstnHealth) tracker() *health.Tracker {
	if p == nil {
		return nil
	}
	return p.tr
}

// start makes the gateways known to the Tracker, forgetting those of old
// that are gone, and, with an interval, probes them under ctx until close.
func (p *pstnHealth) start(ctx context.Context, old *pstnHealth, ping health.Pinger, log *slog.Logger) {
	if p == nil {
		return
	}
	if old != nil && old.tr == p.tr {
		for _, n := range old.names {
			if !slices.Contains(p.names, n) {
				p.tr.Forget(n)
			}
		}
	}
	p.tr.Track(p.names...)
	if p.interval <= 0 || ctx == nil {
		return
	}
	pr := health.NewProber(p.tr, ping)
	pr.SetTargets(p.names)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := pr.Run(ctx); err != nil {
			log.Error("pstn prober stopped", "err", err)
		}
	})
	p.stop = func() { cancel(); wg.Wait() }
}

// close stops the prober, if running.
func (p *pstnHealth) close() {
	if p != nil && p.stop != nil {
		p.stop()
		p.stop = nil
	}
}

// PSTNGatewayHealth is one PSTN gateway's health, for status and metrics.
type PSTNGatewayHealth struct {
	Name   string // pstn.gateways[].name
	Probed bool   // OPTIONS probes run (pstn.options_interval_ms)
	health.TargetState
}

// PSTNHealth is the health of every PSTN gateway, in the configured order
// (nil without gateways).
func (s *Server) PSTNHealth() []PSTNGatewayHealth {
	p := s.now.Load().pstn
	if p == nil {
		return nil
	}
	snap := p.tr.Snapshot()
	out := make([]PSTNGatewayHealth, 0, len(p.gws))
	for i, g := range p.gws {
		st := health.TargetState{Target: p.names[i], Up: true}
		if j := slices.IndexFunc(snap, func(t health.TargetState) bool { return t.Target == p.names[i] }); j >= 0 {
			st = snap[j]
		}
		out = append(out, PSTNGatewayHealth{Name: g.Name, Probed: p.interval > 0, TargetState: st})
	}
	return out
}
