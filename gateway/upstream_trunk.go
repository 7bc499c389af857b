package gateway

import (
	"context"

	"github.com/outpost/outpost/gateway/upstream"
)

// Candidates makes the HQ trunk an upstream.Pool: every resolved target
// with its SRV priority (static targets: their place in the list, so a
// static list is an ordered one) and its health now, so that each user's
// upstream registration keeps one registrar of the best priority group,
// chosen by rendezvous hashing (see package upstream).
func (h *hqTrunk) Candidates(ctx context.Context) ([]upstream.Candidate, error) {
	ts, err := h.res.Resolve(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]upstream.Candidate, 0, len(ts))
	for _, t := range ts {
		name := t.Dest().String()
		out = append(out, upstream.Candidate{Target: name, Priority: int(t.Priority), Eligible: h.tracker.Eligible(name)})
	}
	return out, nil
}

var _ upstream.Pool = (*hqTrunk)(nil)
