package b2bua

import (
	"slices"
	"strings"
	"testing"
)

// A chain passes each body through both anchors in the direction it
// travels (A's through near then far, B's through far then near), and
// closes both.
func TestChainAnchor(t *testing.T) {
	near, far := &fakeAnchor{}, &fakeAnchor{}
	c := ChainAnchor(near, far)
	step := func(what string, f func() ([]byte, error), want string) {
		t.Helper()
		out, err := f()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := strings.Join(strings.Fields(strings.ReplaceAll(string(out), "a=x-anchor:", "")), ","); got != want {
			t.Errorf("%s: marks %q, want %q", what, got, want)
		}
	}
	step("offer from A", func() ([]byte, error) { return c.Offer(LegA, nil) }, "offer-A,offer-A")
	step("answer from B", func() ([]byte, error) { return c.Answer(LegB, nil) }, "answer-B,answer-B")
	step("offer from B", func() ([]byte, error) { return c.Offer(LegB, nil) }, "offer-B,offer-B")
	c.Reject(LegB)
	c.Close()
	nearOps, nearClosed := near.snapshot()
	farOps, farClosed := far.snapshot()
	if want := []string{"offer A", "answer B", "offer B", "reject B"}; !slices.Equal(nearOps, want) || !slices.Equal(farOps, want) {
		t.Errorf("near saw %v, far %v; want %v each", nearOps, farOps, want)
	}
	if nearClosed != 1 || farClosed != 1 {
		t.Errorf("closed: near %d, far %d; want 1 each", nearClosed, farClosed)
	}

	// An offer the far anchor refuses is rejected at the near one too:
	// the session before it stays in force on both.
	near, far = &fakeAnchor{}, &fakeAnchor{refuse: true}
	if _, err := ChainAnchor(near, far).Offer(LegA, nil); err == nil {
		t.Fatal("an offer refused by the far anchor passed")
	}
	if ops, _ := near.snapshot(); !slices.Equal(ops, []string{"offer A", "reject A"}) {
		t.Errorf("near anchor after the far one refused: %v", ops)
	}
}
