package mode

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// runDriver runs d.Run in the bubble until the test ends.
func runDriver(t *testing.T, d *Driver) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := d.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func TestDriverHoldWithClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewDriver(Config{HQ: true, Hold: 10 * time.Second}, nil)
		start := time.Now()
		ch, unsubscribe := d.Subscribe()
		defer unsubscribe()
		runDriver(t, d)

		d.Send(Event{Kind: CarrierDown})
		if got := <-ch; got.To != Survivable || got.Reason != ReasonCarrierDown || !got.At.Equal(start) {
			t.Fatalf("first transition %+v", got)
		}
		time.Sleep(time.Second)
		d.Send(Event{Kind: CarrierUp}) // hold 1s..11s

		time.Sleep(4 * time.Second)
		d.Send(Event{Kind: LinkDown}) // relapse at 5s
		time.Sleep(time.Second)
		d.Send(Event{Kind: LinkUp}) // hold 6s..16s

		time.Sleep(10*time.Second - time.Nanosecond)
		synctest.Wait()
		if m := d.Mode(); m != Survivable {
			t.Fatalf("mode %s just before the hold ends", m)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if m := d.Mode(); m != Normal {
			t.Fatalf("mode %s after the hold", m)
		}
		got := <-ch
		if got.From != Survivable || got.To != Normal || got.Reason != ReasonRecovered || !got.At.Equal(start.Add(16*time.Second)) {
			t.Fatalf("failback %+v, want at +16s", got)
		}
		select {
		case extra := <-ch:
			t.Fatalf("unexpected transition %+v", extra)
		default:
		}

		h := d.Transitions()
		want := []Mode{Normal, Survivable, Normal}
		if len(h) != len(want) {
			t.Fatalf("history %v", h)
		}
		for i, tr := range h {
			if tr.To != want[i] {
				t.Fatalf("history[%d] = %v, want → %s", i, tr, want[i])
			}
		}
		if h[0].Reason != ReasonStart || h[0].From != "" {
			t.Fatalf("history starts with %+v", h[0])
		}
		if c := d.Counts(); c[Normal] != 2 || c[Survivable] != 1 {
			t.Fatalf("counts %v", c)
		}
	})
}

func TestDriverDeadlineBeforeRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewDriver(Config{HQ: true, Hold: time.Second}, nil)
		d.Send(Event{Kind: AllTargetsDown})
		d.Send(Event{Kind: TargetUp})
		time.Sleep(5 * time.Second) // the deadline passes with nobody running
		if m := d.Mode(); m != Survivable {
			t.Fatalf("mode %s without Run", m)
		}
		runDriver(t, d) // Run settles the overdue hold at once
		synctest.Wait()
		if m := d.Mode(); m != Normal {
			t.Fatalf("mode %s after Run started", m)
		}
	})
}

func TestDriverReconfigure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewDriver(Config{}, nil)
		if d.Mode() != Standalone {
			t.Fatalf("start %s", d.Mode())
		}
		runDriver(t, d)
		if err := d.Reconfigure(t.Context(), Config{HQ: true}); err != nil {
			t.Fatal(err)
		}
		if d.Mode() != Normal {
			t.Fatalf("after HQ configured: %s", d.Mode())
		}
		d.Send(Event{Kind: CarrierDown})
		_ = d.Reconfigure(t.Context(), Config{})
		if st := d.Status(); st.Mode != Standalone || st.HQ {
			t.Fatalf("after HQ removed: %+v", st)
		}
	})
}

func TestDriverRunOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewDriver(Config{HQ: true}, nil)
		runDriver(t, d)
		synctest.Wait()
		if err := d.Run(t.Context()); !errors.Is(err, ErrRunning) {
			t.Fatalf("second Run: %v", err)
		}
	})
}

func TestDriverHistoryBounded(t *testing.T) {
	d := NewDriver(Config{HQ: true}, nil)
	base := time.Now()
	for i := range HistoryLen { // 3×HistoryLen transitions
		// Three transitions per round, without waiting for a hold:
		// survivable, standalone, then (carrier back) normal.
		s := base.Add(time.Duration(i) * time.Second)
		d.Send(Event{Kind: CarrierDown, At: s})
		d.Send(Event{Kind: Configured, At: s, Config: Config{}})
		d.Send(Event{Kind: CarrierUp, At: s})
		d.Send(Event{Kind: Configured, At: s, Config: Config{HQ: true}})
	}
	h := d.Transitions()
	if len(h) != HistoryLen {
		t.Fatalf("history length %d, want %d", len(h), HistoryLen)
	}
	for i := 1; i < len(h); i++ {
		if h[i].At.Before(h[i-1].At) || h[i].From != h[i-1].To {
			t.Fatalf("history out of order at %d: %v then %v", i, h[i-1], h[i])
		}
	}
	if last := h[len(h)-1]; last.To != Normal || last.Reason != ReasonHQConfigured {
		t.Fatalf("newest entry %v", last)
	}
	if h[0].Reason == ReasonStart {
		t.Fatal("start entry still present after overflow")
	}
	if c := d.Counts(); c[Survivable] != HistoryLen || c[Standalone] != HistoryLen || c[Normal] != HistoryLen+1 {
		t.Fatalf("counts %v", c)
	}
}

func TestSubscribeDropsOldest(t *testing.T) {
	d := NewDriver(Config{HQ: true}, nil)
	ch, unsubscribe := d.Subscribe()
	base := time.Now()
	n := subscriberBuffer + 5
	for i := range n {
		s := base.Add(time.Duration(i) * time.Second)
		d.Send(Event{Kind: LinkDown, At: s})
		d.Send(Event{Kind: Configured, At: s, Config: Config{}})
		d.Send(Event{Kind: LinkUp, At: s})
		d.Send(Event{Kind: Configured, At: s, Config: Config{HQ: true}})
	}
	unsubscribe()
	unsubscribe() // idempotent
	var got []Transition
	for tr := range ch {
		got = append(got, tr)
	}
	if len(got) != subscriberBuffer {
		t.Fatalf("received %d, want the newest %d", len(got), subscriberBuffer)
	}
	if last := got[len(got)-1]; last.To != Normal || !last.At.Equal(base.Add(time.Duration(n-1)*time.Second)) {
		t.Fatalf("newest received %v", last)
	}
}
