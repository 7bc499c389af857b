package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/gateway/resolve"
	"github.com/outpost/outpost/siptarget"
)

// HQConfig is where calls routed to HQ go: the HQ domain (RFC 3263) or
// static targets, and the health thresholds.
type HQConfig struct {
	Domain string
	// Static targets, each with its transport (siptarget.Parse with
	// Transport as the default); when set, Domain is not resolved.
	Static []siptarget.Target
	// Transport of the SRV lookup of Domain: udp ("" = udp) or tcp. TLS is
	// refused (by newHQTrunk, for Static targets too): the SIP side has no
	// TLS client configuration (CA, client certificate) yet.
	Transport  siptarget.Transport
	DNSServers []string // "ip:port"
	DownAfter  int
	UpAfter    int
	// ProbeInterval is the OPTIONS period per target (hq.options_interval_ms);
	// 0 = health.DefaultInterval.
	ProbeInterval time.Duration
	// TrustedNetworks (hq.trusted_networks) are networks whose every
	// address is trusted as HQ, on any port and transport (trust.go). They
	// do not make the trunk: a change keeps the resolver and health state.
	TrustedNetworks []netip.Prefix
}

// hqTrunk gives the B2BUA the HQ targets to try, in order: resolved
// (SRV priority, then weight), then healthy ones first (health.Tracker.Pick:
// if all are blocked, one blocked target at random). Two kinds of evidence
// feed the targets' health: each call attempt's outcome (passive) and an
// OPTIONS probe per resolved target every ProbeInterval (active). The
// probed set follows DNS: it is re-resolved every probe round (the resolver
// answers from its TTL cache, and keeps the last good answer while DNS is
// unreachable), so a target that leaves the SRV set stops being probed.
type hqTrunk struct {
	cfg       HQConfig
	res       *resolve.Resolver
	tracker   *health.Tracker
	transport siptarget.Transport // of Domain's SRV lookup (upstream's default)

	stop func() // ends the prober started by start; nil = not running
}

// nextHQ is the HQ trunk for cfg: cur when its section is unchanged
// (keeping DNS cache and health), a new one otherwise.
func nextHQ(cur *hqTrunk, cfg Config) (*hqTrunk, error) {
	if cfg.HQTrunk == nil {
		return nil, nil
	}
	if cur != nil && cur.same(*cfg.HQTrunk) {
		return cur, nil
	}
	return newHQTrunk(*cfg.HQTrunk)
}

func newHQTrunk(cfg HQConfig) (*hqTrunk, error) {
	tr := cfg.Transport
	if tr == "" {
		tr = siptarget.UDP
	}
	if err := noTLS(tr, "transport"); err != nil {
		return nil, fmt.Errorf("gateway: hq: %w", err)
	}
	for _, t := range cfg.Static {
		if err := noTLS(t.Transport, "target "+t.String()); err != nil {
			return nil, fmt.Errorf("gateway: hq: %w", err)
		}
	}
	res, err := resolve.New(resolve.Config{Domain: cfg.Domain, Static: cfg.Static, Transport: tr, Servers: cfg.DNSServers})
	if err != nil {
		return nil, fmt.Errorf("gateway: hq: %w", err)
	}
	return &hqTrunk{cfg: cfg, res: res, transport: tr,
		tracker: health.New(health.Config{DownAfter: cfg.DownAfter, UpAfter: cfg.UpAfter, Interval: cfg.ProbeInterval})}, nil
}

// start runs the OPTIONS prober under ctx until stop. The caller (the
// Server) owns it: it stops a trunk it replaces and the last one on exit.
// Verdicts (a target up or down by its probes, or gone from the probed
// set) go to notify, in order, from one goroutine.
func (h *hqTrunk) start(ctx context.Context, ping health.Pinger, notify func(HQTargetEvent), log *slog.Logger) {
	ctx, cancel := context.WithCancel(ctx)
	p := health.NewProber(h.tracker, ping)
	changes, unsubscribe := h.tracker.Subscribe()
	gone := make(chan []string, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.Run(ctx); err != nil {
			log.Error("hq prober stopped", "err", err)
		}
	})
	wg.Go(func() {
		every := h.tracker.Config().Interval
		t := time.NewTicker(every)
		defer t.Stop()
		var probed []string
		for {
			rctx, rcancel := context.WithTimeout(ctx, every)
			ts, err := h.res.Resolve(rctx)
			rcancel()
			if err == nil {
				names := make([]string, 0, len(ts))
				for _, t := range ts {
					names = append(names, t.Dest().String())
				}
				p.SetTargets(names)
				var left []string
				for _, n := range probed {
					if !slices.Contains(names, n) {
						left = append(left, n)
					}
				}
				probed = names
				if len(left) > 0 {
					select {
					case gone <- left:
					case <-ctx.Done():
						return
					}
				}
			} else if ctx.Err() == nil {
				log.Debug("hq: resolve for probing", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	wg.Go(func() {
		defer unsubscribe()
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-changes:
				// Only probe verdicts: a block by one failed call expires
				// silently and must not flip the box's mode (see package mode).
				if c.Reason == health.ReasonProbesFailed || c.Reason == health.ReasonProbesOK {
					notify(HQTargetEvent{Target: c.Target, Up: c.Up, Reason: string(c.Reason), At: c.At})
				}
			case names := <-gone:
				for _, n := range names {
					notify(HQTargetEvent{Target: n, Gone: true, Reason: "no longer resolved", At: time.Now()})
				}
			}
		}
	})
	h.stop = func() { cancel(); wg.Wait() }
}

// HQTargetEvent is a change of one HQ target's probe verdict.
type HQTargetEvent struct {
	Target string // "udp:198.18.1.10:5060" (siptarget.Target.String)
	Up     bool
	Gone   bool // no longer an HQ target (DNS or config changed)
	Reason string
	At     time.Time
}

// close stops the prober, if running.
func (h *hqTrunk) close() {
	if h != nil && h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// Health is the state of every HQ target, for status and the mode logic.
func (h *hqTrunk) Health() []health.TargetState { return h.tracker.Snapshot() }

// same reports whether the trunk was built from an equal configuration, so
// a push that does not touch HQ keeps the resolver cache and target health.
func (h *hqTrunk) same(cfg HQConfig) bool {
	return h.cfg.Domain == cfg.Domain && slices.Equal(h.cfg.Static, cfg.Static) && h.cfg.Transport == cfg.Transport &&
		slices.Equal(h.cfg.DNSServers, cfg.DNSServers) && h.cfg.DownAfter == cfg.DownAfter && h.cfg.UpAfter == cfg.UpAfter &&
		h.cfg.ProbeInterval == cfg.ProbeInterval
}

func (h *hqTrunk) Targets(ctx context.Context) ([]string, error) {
	ts, err := h.res.Resolve(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		names = append(names, t.Dest().String())
	}
	return h.tracker.Pick(names), nil
}

func (h *hqTrunk) Report(target string, status int, err error) {
	h.tracker.Observe(target, health.ClassifyForHealth(status, err))
}

// errNoTLS: SIP over TLS to a peer (HQ, a PSTN gateway) needs a TLS client
// configuration (the peer's CA, the box's certificate) the gateway does not
// have yet, and sipgo would otherwise dial with the system roots. A target
// naming tls is refused when configured instead of failing every call.
var errNoTLS = errors.New("SIP over TLS to HQ or PSTN gateways is not supported yet")

func noTLS(tr siptarget.Transport, what string) error {
	if tr == siptarget.TLS {
		return fmt.Errorf("%s: %w", what, errNoTLS)
	}
	return nil
}

// HQHealth is the health of every HQ target (nil without HQ): for
// outpostctl status, metrics and the mode logic.
func (s *Server) HQHealth() []health.TargetState {
	if hq := s.hqNow.Load(); hq != nil {
		return hq.Health()
	}
	return nil
}
