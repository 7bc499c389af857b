package hqtrunk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outpost/outpost/gateway/upstream"
	"github.com/outpost/outpost/siptarget"
)

// Candidates makes the HQ trunk an upstream.Pool: every resolved target
// with its SRV priority (static targets: their place in the list, so a
// static list is an ordered one) and its health now, so that each user's
// upstream registration keeps one registrar of the best priority group,
// chosen by rendezvous hashing (see package upstream). A backup pool's
// targets come as lower-priority groups after the primary's (priority +
// backupPriority), so registrations move there only when no primary
// target is eligible; an unresolved pool is skipped without waiting for
// its DNS.
func (h *Trunk) Candidates(ctx context.Context) ([]upstream.Candidate, error) {
	var out []upstream.Candidate
	var errs []error
	for i, pool := range h.pools {
		if pool.unresolved.Load() {
			errs = append(errs, fmt.Errorf("%s: %w", pool.name, errUnresolved))
			continue
		}
		ts, err := pool.res.Resolve(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", pool.name, err))
			continue
		}
		for _, t := range ts {
			name := t.Dest().String()
			out = append(out, upstream.Candidate{Target: name, Priority: i*backupPriority + int(t.Priority), Eligible: pool.tracker.Eligible(name)})
		}
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// backupPriority puts the backup pool's priority groups after every SRV
// priority (0-65535) of the primary.
const backupPriority = 1 << 16

var _ upstream.Pool = (*Trunk)(nil)

// Transport is the transport of the primary domain's SRV lookup, the
// upstream registrations' default.
func (h *Trunk) Transport() siptarget.Transport { return h.transport }

// Domain is HQ's SIP domain (the upstream REGISTERs' Request-URI).
func (h *Trunk) Domain() string { return h.cfg.Domain }

// ProbeInterval is how often a target's health may change: once per probe.
func (h *Trunk) ProbeInterval() time.Duration { return h.pools[0].tracker.Config().Interval }

// FirstDest is an HQ target's host:port, to find the listener facing HQ:
// one the prober knows (no DNS query: a dead WAN must not stall a push),
// else, before the first probe round, whatever the resolver answers
// within a second; "" = none.
func (h *Trunk) FirstDest() string {
	for _, t := range h.Health() {
		if g, err := siptarget.Parse(t.Target, siptarget.UDP); err == nil {
			return g.HostPort()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if ts, err := h.Targets(ctx); err == nil && len(ts) > 0 {
		if g, err := siptarget.Parse(ts[0], siptarget.UDP); err == nil {
			return g.HostPort()
		}
	}
	return ""
}
