package gateway

import (
	"slices"
	"testing"

	"github.com/outpost/outpost/gateway/upstream"
	"github.com/outpost/outpost/siptarget"
)

// The HQ trunk gives the upstream agent every resolved target with its
// priority and health, whatever its health (Targets leaves the blocked
// ones out).
func TestHQTrunkCandidates(t *testing.T) {
	h, err := newHQTrunk(HQConfig{Static: []siptarget.Target{siptarget.MustParse("198.18.1.10", ""), siptarget.MustParse("198.18.1.11:5070", "")}})
	if err != nil {
		t.Fatal(err)
	}
	h.Report("udp:198.18.1.10:5060", 503, nil) // blocked for a while
	got, err := h.Candidates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []upstream.Candidate{
		{Target: "udp:198.18.1.10:5060", Priority: 0, Eligible: false},
		{Target: "udp:198.18.1.11:5070", Priority: 1, Eligible: true},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("candidates %+v\nwant %+v", got, want)
	}
}
