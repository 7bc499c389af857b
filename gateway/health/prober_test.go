package health

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// answer is how the fake Pinger answers one target.
type answer int

const (
	alive  answer = iota // answers at once
	dead                 // returns an error at once (e.g. 503 to OPTIONS)
	silent               // never answers: Ping blocks until its timeout
)

// fakePinger answers per target as scripted by set and records each call.
type fakePinger struct {
	mu      sync.Mutex
	answers map[string]answer
	calls   map[string][]time.Time
}

func newFakePinger() *fakePinger {
	return &fakePinger{answers: map[string]answer{}, calls: map[string][]time.Time{}}
}

func (f *fakePinger) set(target string, a answer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[target] = a
}

func (f *fakePinger) count(target string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls[target])
}

var errUnavailable = errors.New("503 Service Unavailable")

func (f *fakePinger) Ping(ctx context.Context, target string) (time.Duration, error) {
	f.mu.Lock()
	f.calls[target] = append(f.calls[target], time.Now())
	a := f.answers[target]
	f.mu.Unlock()
	switch a {
	case dead:
		return 0, errUnavailable
	case silent:
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return 3 * time.Millisecond, nil
}

// startProber runs p until the returned stop function is called; stop
// checks that Run returned nil.
func startProber(t *testing.T, p *Prober) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	}
}

// sleepUntil advances the bubble's clock to start+d and lets everything
// that was due run.
func sleepUntil(start time.Time, d time.Duration) {
	time.Sleep(time.Until(start.Add(d)))
	synctest.Wait()
}

func TestProberDownAndUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		tr := New(Config{}) // Interval 1 s, Timeout 500 ms, 3/3
		ch, unsub := tr.Subscribe()
		defer unsub()
		f := newFakePinger()
		f.set(hq1, dead)
		f.set(hq2, alive)
		f.set(hq3, silent)
		p := NewProber(tr, f)
		p.SetTargets([]string{hq1, hq2, hq3})
		stop := startProber(t, p)

		// Probes at 0, 1, 2 s. Two failures change nothing.
		sleepUntil(start, 1500*time.Millisecond)
		if !tr.Eligible(hq1) || !tr.Eligible(hq3) {
			t.Fatal("down after 2 failed intervals")
		}
		// The third failure takes hq1 down at 2 s; hq3's third probe
		// times out at 2.5 s.
		sleepUntil(start, 2250*time.Millisecond)
		if tr.Eligible(hq1) || !tr.Eligible(hq3) {
			t.Fatalf("at 2.25 s: %+v", tr.Snapshot())
		}
		sleepUntil(start, 2750*time.Millisecond)
		if tr.Eligible(hq3) || !tr.Eligible(hq2) {
			t.Fatalf("at 2.75 s: %+v", tr.Snapshot())
		}
		if !tr.AllDown([]string{hq1, hq3}) || tr.AllDown([]string{hq1, hq2, hq3}) {
			t.Error("AllDown wrong")
		}

		// hq1 recovers: good probes at 3, 4, 5 s bring it up at 5 s.
		f.set(hq1, alive)
		sleepUntil(start, 4500*time.Millisecond)
		if tr.Eligible(hq1) {
			t.Fatal("up after 2 good intervals")
		}
		sleepUntil(start, 5500*time.Millisecond)
		if !tr.Eligible(hq1) {
			t.Fatal("still down after 3 good intervals")
		}
		stop()

		want := []Change{
			{Target: hq1, Up: false, Reason: ReasonProbesFailed, At: start.Add(2 * time.Second)},
			{Target: hq3, Up: false, Reason: ReasonProbesFailed, At: start.Add(2500 * time.Millisecond)},
			{Target: hq1, Up: true, Reason: ReasonProbesOK, At: start.Add(5 * time.Second)},
		}
		if got := drain(ch); !slices.Equal(got, want) {
			t.Errorf("changes:\n got %+v\nwant %+v", got, want)
		}
		// Probed at 0..5 s: six times each; the silent one did not delay the others.
		for _, name := range []string{hq1, hq2, hq3} {
			if n := f.count(name); n != 6 {
				t.Errorf("%s probed %d times, want 6", name, n)
			}
		}
		if s := state(t, tr, hq2); s.LastRTT != 3*time.Millisecond || s.ConsecutiveOK != 6 {
			t.Errorf("hq2 %+v", s)
		}
	})
}

func TestProberSetTargets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		tr := New(Config{})
		f := newFakePinger()
		f.set(hq1, silent) // its probe is in flight when it is removed
		f.set(hq2, dead)
		p := NewProber(tr, f)
		p.SetTargets([]string{hq1, hq1}) // duplicates collapse
		stop := startProber(t, p)
		synctest.Wait()
		if n := f.count(hq1); n != 1 {
			t.Fatalf("hq1 probed %d times at start, want 1", n)
		}

		sleepUntil(start, 200*time.Millisecond)
		p.SetTargets([]string{hq2, hq3})
		synctest.Wait()
		// New targets are known and up before their first answer is in;
		// the removed one is forgotten, and its late answer discarded.
		var names []string
		for _, s := range tr.Snapshot() {
			names = append(names, s.Target)
			if !s.Up || s.Reason != ReasonNew {
				t.Errorf("new target %+v", s)
			}
		}
		if want := []string{hq3, hq2}; !slices.Equal(names, want) {
			t.Errorf("snapshot targets %v, want %v", names, want)
		}
		if got := p.Targets(); !slices.Equal(got, []string{hq3, hq2}) {
			t.Errorf("Targets() = %v", got)
		}

		// hq2 fails at 0.2, 1.2, 2.2 s → down; hq1 is never probed again.
		sleepUntil(start, 3*time.Second)
		if tr.Eligible(hq2) || !tr.Eligible(hq3) {
			t.Errorf("at 3 s: %+v", tr.Snapshot())
		}
		if n := f.count(hq1); n != 1 {
			t.Errorf("removed hq1 probed %d times", n)
		}
		if n := f.count(hq2); n != 3 {
			t.Errorf("hq2 probed %d times, want 3", n)
		}
		if slices.ContainsFunc(tr.Snapshot(), func(s TargetState) bool { return s.Target == hq1 }) {
			t.Error("late answer of removed hq1 re-created it")
		}

		// Removed and re-added: starts afresh (up), probed again at once.
		p.SetTargets([]string{hq3})
		p.SetTargets([]string{hq2, hq3})
		synctest.Wait()
		if !tr.Eligible(hq2) {
			t.Error("re-added hq2 kept its old down state")
		}
		if n := f.count(hq2); n != 4 {
			t.Errorf("re-added hq2 probed %d times, want 4", n)
		}
		stop()
	})
}

func TestProberStopsOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(Config{Interval: 200 * time.Millisecond})
		if got := tr.Config().Timeout; got != 100*time.Millisecond {
			t.Fatalf("timeout %v", got)
		}
		f := newFakePinger()
		f.set(hq2, silent)
		p := NewProber(tr, f)
		p.SetTargets([]string{hq1, hq2})
		stop := startProber(t, p)
		synctest.Wait()
		if err := p.Run(t.Context()); !errors.Is(err, ErrRunning) {
			t.Errorf("second Run = %v, want ErrRunning", err)
		}
		time.Sleep(time.Second + 50*time.Millisecond)
		stop() // Run has returned, so every probe goroutine has exited
		n1, n2 := f.count(hq1), f.count(hq2)
		if n1 != 6 || n2 != 6 {
			t.Errorf("probes %d/%d, want 6/6", n1, n2)
		}
		time.Sleep(10 * time.Second)
		if f.count(hq1) != n1 || f.count(hq2) != n2 {
			t.Error("probing went on after Run returned")
		}
		// It can run again after a clean stop.
		stop = startProber(t, p)
		synctest.Wait()
		stop()
		if f.count(hq1) != n1+1 {
			t.Error("restarted Run did not probe")
		}
		// synctest.Test fails if any goroutine of the bubble is left over.
	})
}
