package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/outpost/outpost/gateway/health"
	"github.com/outpost/outpost/gateway/resolve"
)

// HQConfig is where calls routed to HQ go: the HQ domain (RFC 3263) or
// static targets, and the health thresholds.
type HQConfig struct {
	Domain     string
	Static     []string // "host:port"
	Transport  string   // udp, tcp
	DNSServers []string // "ip:port"
	DownAfter  int
	UpAfter    int
}

// hqTrunk gives the B2BUA the HQ targets to try, in order: resolved
// (SRV priority, then weight), then healthy ones first (health.Tracker.Pick:
// if all are blocked, one blocked target at random). Each attempt's outcome
// feeds the target's health (passive health; the OPTIONS prober comes with
// the survivable-mode issue).
type hqTrunk struct {
	cfg       HQConfig
	res       *resolve.Resolver
	tracker   *health.Tracker
	transport string
}

func newHQTrunk(cfg HQConfig) (*hqTrunk, error) {
	tr := strings.ToLower(cfg.Transport)
	if tr == "" {
		tr = "udp"
	}
	res, err := resolve.New(resolve.Config{Domain: cfg.Domain, Static: cfg.Static, Transport: tr, Servers: cfg.DNSServers})
	if err != nil {
		return nil, fmt.Errorf("gateway: hq: %w", err)
	}
	return &hqTrunk{cfg: cfg, res: res, transport: tr,
		tracker: health.New(health.Config{DownAfter: cfg.DownAfter, UpAfter: cfg.UpAfter})}, nil
}

// same reports whether the trunk was built from an equal configuration, so
// a push that does not touch HQ keeps the resolver cache and target health.
func (h *hqTrunk) same(cfg HQConfig) bool {
	return h.cfg.Domain == cfg.Domain && slices.Equal(h.cfg.Static, cfg.Static) && h.cfg.Transport == cfg.Transport &&
		slices.Equal(h.cfg.DNSServers, cfg.DNSServers) && h.cfg.DownAfter == cfg.DownAfter && h.cfg.UpAfter == cfg.UpAfter
}

func (h *hqTrunk) Targets(ctx context.Context) ([]string, error) {
	ts, err := h.res.Resolve(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		names = append(names, h.transport+":"+t.Addr.String())
	}
	return h.tracker.Pick(names), nil
}

func (h *hqTrunk) Report(target string, status int, err error) {
	h.tracker.Observe(target, health.ClassifyForHealth(status, err))
}
