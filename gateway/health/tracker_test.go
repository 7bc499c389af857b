package health

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// clock is a manual clock for Tracker tests.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) Advance(d time.Duration) { c.now = c.now.Add(d) }

const (
	hq1  = "udp:198.18.1.10:5060"
	hq2  = "udp:198.18.1.11:5060"
	hq3  = "tcp:198.18.1.12:5060"
	pstn = "udp:198.18.3.2:5060"
)

func newTestTracker(t *testing.T) (*Tracker, *clock) {
	t.Helper()
	c := &clock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	return New(Config{Now: c.Now, Rand: rand.New(rand.NewPCG(1, 2))}), c
}

func state(t *testing.T, tr *Tracker, name string) TargetState {
	t.Helper()
	for _, s := range tr.Snapshot() {
		if s.Target == name {
			return s
		}
	}
	t.Fatalf("%s not in snapshot", name)
	return TargetState{}
}

// drain returns the changes pending on ch.
func drain(ch <-chan Change) []Change {
	var out []Change
	for {
		select {
		case c := <-ch:
			out = append(out, c)
		default:
			return out
		}
	}
}

func TestDefaults(t *testing.T) {
	cfg := New(Config{}).Config()
	if cfg.DownAfter != 3 || cfg.UpAfter != 3 || cfg.BlockFor != 30*time.Second ||
		cfg.Interval != time.Second || cfg.Timeout != 500*time.Millisecond || cfg.Now == nil || cfg.Rand == nil {
		t.Errorf("defaults: %+v", cfg)
	}
	if got := New(Config{Interval: 10 * time.Second}).Config().Timeout; got != 2*time.Second {
		t.Errorf("timeout for 10 s interval = %v, want capped 2s", got)
	}
}

func TestHysteresisDownAndUp(t *testing.T) {
	tr, c := newTestTracker(t)
	ch, stop := tr.Subscribe()
	defer stop()
	tr.ProbeResult(hq1, true, 5*time.Millisecond)
	for i := 1; i <= 3; i++ {
		if !tr.Eligible(hq1) {
			t.Fatalf("down after %d failures, want 3", i-1)
		}
		c.Advance(time.Second)
		tr.ProbeResult(hq1, false, 0)
	}
	if tr.Eligible(hq1) || !tr.AllDown([]string{hq1}) {
		t.Fatal("still up after 3 failed probes")
	}
	downAt := c.now
	for i := 1; i <= 3; i++ {
		if tr.Eligible(hq1) {
			t.Fatalf("up after %d good probes, want 3", i-1)
		}
		c.Advance(time.Second)
		tr.ProbeResult(hq1, true, 7*time.Millisecond)
	}
	if !tr.Eligible(hq1) {
		t.Fatal("still down after 3 good probes")
	}
	got := drain(ch)
	want := []Change{
		{Target: hq1, Up: false, Reason: ReasonProbesFailed, At: downAt},
		{Target: hq1, Up: true, Reason: ReasonProbesOK, At: c.now},
	}
	if !slices.Equal(got, want) {
		t.Errorf("changes:\n got %+v\nwant %+v", got, want)
	}
	s := state(t, tr, hq1)
	if !s.Up || s.ConsecutiveOK != 3 || s.ConsecutiveFail != 0 || s.LastRTT != 7*time.Millisecond ||
		!s.LastChange.Equal(c.now) || s.Reason != ReasonProbesOK || !s.BlockedUntil.IsZero() {
		t.Errorf("snapshot %+v", s)
	}
}

func TestFlappingBelowThresholdChangesNothing(t *testing.T) {
	tr, c := newTestTracker(t)
	ch, stop := tr.Subscribe()
	defer stop()
	// Up target: fail, fail, ok, repeated — never 3 failures in a row.
	for range 10 {
		c.Advance(time.Second)
		tr.ProbeResult(hq1, false, 0)
		tr.ProbeResult(hq1, false, 0)
		tr.ProbeResult(hq1, true, time.Millisecond)
	}
	if !tr.Eligible(hq1) {
		t.Fatal("flapping up target went down")
	}
	// Take it down, then ok, ok, fail, repeated — never 3 good in a row.
	for range 3 {
		tr.ProbeResult(hq1, false, 0)
	}
	drain(ch)
	for range 10 {
		tr.ProbeResult(hq1, true, time.Millisecond)
		tr.ProbeResult(hq1, true, time.Millisecond)
		tr.ProbeResult(hq1, false, 0)
	}
	if tr.Eligible(hq1) {
		t.Fatal("flapping down target came up")
	}
	if got := drain(ch); len(got) != 0 {
		t.Errorf("flapping published %+v", got)
	}
}

func TestPassiveFailureBlocksAndExpires(t *testing.T) {
	tr, c := newTestTracker(t)
	ch, stop := tr.Subscribe()
	defer stop()
	tr.Observe(hq1, Failure)
	blockedAt := c.now
	if tr.Eligible(hq1) {
		t.Fatal("eligible right after a traffic failure")
	}
	if s := state(t, tr, hq1); !s.Up || !s.BlockedUntil.Equal(blockedAt.Add(30*time.Second)) || s.Reason != ReasonTrafficFailure {
		t.Errorf("blocked snapshot %+v", s)
	}
	// Good probes do not lift a block.
	tr.ProbeResult(hq1, true, time.Millisecond)
	c.Advance(30*time.Second - time.Nanosecond)
	if tr.Eligible(hq1) {
		t.Fatal("eligible before the block expired")
	}
	c.Advance(time.Nanosecond)
	if !tr.Eligible(hq1) {
		t.Fatal("not half-open when the block expired")
	}
	if s := state(t, tr, hq1); !s.BlockedUntil.IsZero() {
		t.Errorf("expired block still shown: %+v", s)
	}

	// Half-open, then a failure: blocked again for a full period.
	tr.Observe(hq1, Failure)
	reblockedAt := c.now
	c.Advance(29 * time.Second)
	if tr.Eligible(hq1) {
		t.Fatal("re-block after half-open failure did not last BlockFor")
	}
	// A failure while blocked extends the block but publishes nothing new.
	tr.Observe(hq1, Failure)
	c.Advance(29 * time.Second)
	if tr.Eligible(hq1) {
		t.Fatal("failure while blocked did not extend the block")
	}
	// Half-open or not, a success unblocks at once.
	tr.Observe(hq1, Success)
	if !tr.Eligible(hq1) {
		t.Fatal("success did not unblock")
	}
	want := []Change{
		{Target: hq1, Up: true, Blocked: true, Reason: ReasonTrafficFailure, At: blockedAt},
		{Target: hq1, Up: true, Blocked: true, Reason: ReasonTrafficFailure, At: reblockedAt},
		{Target: hq1, Up: true, Blocked: false, Reason: ReasonTrafficSuccess, At: c.now},
	}
	if got := drain(ch); !slices.Equal(got, want) {
		t.Errorf("changes:\n got %+v\nwant %+v", got, want)
	}
}

func TestHalfOpenSuccessUnblocks(t *testing.T) {
	tr, c := newTestTracker(t)
	tr.Observe(hq1, Failure)
	c.Advance(31 * time.Second)
	tr.Observe(hq1, Success)
	c.Advance(time.Hour)
	tr.Observe(hq1, Unknown) // no evidence: ignored
	if s := state(t, tr, hq1); !s.Up || !s.BlockedUntil.IsZero() || s.Reason != ReasonTrafficSuccess || s.ConsecutiveOK != 1 {
		t.Errorf("snapshot %+v", s)
	}
}

func TestTrafficSuccessCountsAsGoodProbe(t *testing.T) {
	tr, _ := newTestTracker(t)
	for range 3 {
		tr.ProbeResult(hq1, false, 0)
	}
	tr.ProbeResult(hq1, true, time.Millisecond)
	tr.Observe(hq1, Success)
	if tr.Eligible(hq1) {
		t.Fatal("up after 2 good")
	}
	tr.Observe(hq1, Success)
	if !tr.Eligible(hq1) {
		t.Fatal("probe + 2 traffic successes did not bring it up")
	}
	// A traffic failure breaks a streak of good probes.
	for range 3 {
		tr.ProbeResult(hq2, false, 0)
	}
	tr.ProbeResult(hq2, true, 0)
	tr.ProbeResult(hq2, true, 0)
	tr.Observe(hq2, Failure)
	tr.ProbeResult(hq2, true, 0)
	if s := state(t, tr, hq2); s.Up || s.ConsecutiveOK != 1 {
		t.Errorf("streak not broken: %+v", s)
	}
}

func TestPick(t *testing.T) {
	tr, c := newTestTracker(t)
	all := []string{hq1, hq2, hq3}
	if got := tr.Pick(nil); got != nil {
		t.Errorf("Pick(nil) = %v", got)
	}
	if got := tr.Pick(all); !slices.Equal(got, all) {
		t.Errorf("all healthy: %v", got)
	}
	tr.Observe(hq1, Failure) // blocked
	for range 3 {
		tr.ProbeResult(hq3, false, 0) // down
	}
	if got := tr.Pick(all); !slices.Equal(got, []string{hq2}) {
		t.Errorf("one eligible: %v", got)
	}
	// The caller's order is kept, including for unknown targets.
	if got := tr.Pick([]string{pstn, hq3, hq2, hq1}); !slices.Equal(got, []string{pstn, hq2}) {
		t.Errorf("order: %v", got)
	}
	if tr.AllDown(all) {
		t.Error("AllDown with hq2 eligible")
	}
	tr.Observe(hq2, Failure)
	if !tr.AllDown(all) {
		t.Error("AllDown false with every target blocked or down")
	}
	if tr.AllDown(nil) {
		t.Error("AllDown(nil) = true")
	}
	// None eligible: exactly one, at random, reproducible with the seed.
	seen := map[string]int{}
	for range 300 {
		got := tr.Pick(all)
		if len(got) != 1 || !slices.Contains(all, got[0]) {
			t.Fatalf("all blocked: %v", got)
		}
		seen[got[0]]++
	}
	if len(seen) != 3 {
		t.Errorf("random pick does not spread over all targets: %v", seen)
	}
	tr2, _ := newTestTracker(t)
	tr2.Observe(hq1, Failure)
	tr2.Observe(hq2, Failure)
	tr2.Observe(hq3, Failure)
	want := []string{}
	for range 5 {
		want = append(want, tr2.Pick(all)[0])
	}
	tr3, _ := newTestTracker(t)
	tr3.Observe(hq1, Failure)
	tr3.Observe(hq2, Failure)
	tr3.Observe(hq3, Failure)
	for i := range 5 {
		if got := tr3.Pick(all)[0]; got != want[i] {
			t.Fatalf("seeded pick %d = %s, want %s", i, got, want[i])
		}
	}
	// Blocks expire: hq1 and hq2 are half-open, hq3 still down.
	c.Advance(30 * time.Second)
	if got := tr.Pick(all); !slices.Equal(got, []string{hq1, hq2}) {
		t.Errorf("after expiry: %v", got)
	}
}

func TestSnapshotSortedAndForget(t *testing.T) {
	tr, _ := newTestTracker(t)
	tr.Track(hq3, pstn, hq1)
	tr.ProbeResult(hq2, true, 3*time.Millisecond)
	var names []string
	for _, s := range tr.Snapshot() {
		names = append(names, s.Target)
		if !s.Up {
			t.Errorf("%s starts down", s.Target)
		}
	}
	if want := []string{hq3, hq1, hq2, pstn}; !slices.Equal(names, want) {
		t.Errorf("order %v, want %v", names, want)
	}
	for range 3 {
		tr.ProbeResult(hq1, false, 0)
	}
	tr.Forget(hq1)
	if !tr.Eligible(hq1) || len(tr.Snapshot()) != 3 {
		t.Error("Forget kept state")
	}
}

func TestSubscribeDropsOldestAndUnsubscribe(t *testing.T) {
	tr, _ := newTestTracker(t)
	ch, stop := tr.Subscribe()
	n := subscriberBuffer + 10
	for i := range n {
		tr.Observe(fmt.Sprintf("udp:198.18.2.%d:5060", i), Failure) // never blocks
	}
	got := drain(ch)
	if len(got) != subscriberBuffer {
		t.Fatalf("buffered %d, want %d", len(got), subscriberBuffer)
	}
	if got[0].Target != "udp:198.18.2.10:5060" || got[len(got)-1].Target != fmt.Sprintf("udp:198.18.2.%d:5060", n-1) {
		t.Errorf("not drop-oldest: first %s last %s", got[0].Target, got[len(got)-1].Target)
	}
	stop()
	stop() // idempotent
	if _, ok := <-ch; ok {
		t.Error("channel open after unsubscribe")
	}
	tr.Observe(hq1, Failure) // no panic on a closed subscription
}

func BenchmarkPick(b *testing.B) {
	tr := New(Config{Rand: rand.New(rand.NewPCG(1, 2))})
	cands := []string{hq1, hq2, hq3, pstn}
	for _, name := range cands {
		tr.ProbeResult(name, true, time.Millisecond)
	}
	b.Run("healthy4", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = tr.Pick(cands)
		}
	})
	tr.Observe(hq1, Failure)
	tr.Observe(hq3, Failure)
	b.Run("half-blocked4", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = tr.Pick(cands)
		}
	})
	tr.Observe(hq2, Failure)
	tr.Observe(pstn, Failure)
	b.Run("all-blocked4", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = tr.Pick(cands)
		}
	})
}
