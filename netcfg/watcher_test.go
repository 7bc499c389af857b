package netcfg

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeSource is a Source whose state the test sets. Like NetlinkSource it
// sends one hint when a subscription starts.
type fakeSource struct {
	mu     sync.Mutex
	st     State
	snaps  int // Snapshot calls
	subs   int // Subscribe calls
	active int // running Subscribe calls
	hint   chan<- struct{}
	kill   chan error
	fail   error // next Snapshot error
}

func newFake(s State) *fakeSource { return &fakeSource{st: s, kill: make(chan error)} }

func (f *fakeSource) Snapshot(ctx context.Context) (State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snaps++
	if err := f.fail; err != nil {
		f.fail = nil
		return State{}, err
	}
	return f.st.Clone(), nil
}

func (f *fakeSource) Subscribe(ctx context.Context, hint chan<- struct{}) error {
	f.mu.Lock()
	f.subs++
	f.active++
	f.hint = hint
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.active--
		f.hint = nil
		f.mu.Unlock()
	}()
	f.poke()
	select {
	case <-ctx.Done():
		return nil
	case err := <-f.kill:
		return err
	}
}

func (f *fakeSource) poke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hint != nil {
		select {
		case f.hint <- struct{}{}:
		default:
		}
	}
}

// set changes the state and hints (a netlink message).
func (f *fakeSource) set(s State) { f.setSilently(s); f.poke() }

// setSilently changes the state without a hint (a lost message).
func (f *fakeSource) setSilently(s State) {
	f.mu.Lock()
	f.st = s
	f.mu.Unlock()
}

func (f *fakeSource) counts() (snaps, subs, active int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snaps, f.subs, f.active
}

// stateN is a state whose eth0 carries N as its MTU and 198.18.N.1/24.
func stateN(n int) State {
	return st([]Link{lo, with(eth0, func(l *Link) { l.MTU = 1500 + n })},
		[]Addr{{LinkIndex: 2, Prefix: netip.MustParsePrefix(fmt.Sprintf("198.18.%d.1/24", n%250))}},
		[]Route{{LinkIndex: 2, Dst: def4, Gateway: gw4, Table: 254}})
}

// recv returns the pending batches of ch without blocking (call after
// synctest.Wait).
func recv(ch <-chan []Event) [][]Event {
	var out [][]Event
	for {
		select {
		case b, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, b)
		default:
			return out
		}
	}
}

// harness starts a Watcher over f in the bubble and returns a stop
// function that cancels it and checks Run's result.
func harness(t *testing.T, f *fakeSource, cfg Config) (*Watcher, func()) {
	w := NewWatcher(f, cfg, nil)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	return w, func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run = %v", err)
		}
	}
}

func TestWatcherInitialBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(stateN(1))
		w := NewWatcher(f, Config{}, nil)
		early, _ := w.Subscribe(4) // before Run
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		time.Sleep(time.Second)
		synctest.Wait()

		want := Diff(State{}, stateN(1))
		if got := recv(early); !reflect.DeepEqual(got, [][]Event{want}) {
			t.Errorf("early subscriber got %v, want one batch %v", got, want)
		}
		late, _ := w.Subscribe(4) // after Run: gets the current state as additions
		synctest.Wait()
		if got := recv(late); !reflect.DeepEqual(got, [][]Event{want}) {
			t.Errorf("late subscriber got %v", got)
		}
		if !reflect.DeepEqual(w.State(), stateN(1)) {
			t.Errorf("State() = %+v", w.State())
		}
		// The subscription's own start-up hint costs one re-read and no batch.
		if snaps, subs, _ := f.counts(); snaps != 2 || subs != 1 {
			t.Errorf("snapshots=%d subscriptions=%d, want 2, 1", snaps, subs)
		}
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

func TestWatcherInitialSnapshotError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(stateN(1))
		f.fail = errors.New("boom")
		w := NewWatcher(f, Config{}, nil)
		ch, _ := w.Subscribe(1)
		if err := w.Run(t.Context()); err == nil {
			t.Fatal("Run succeeded")
		}
		if _, ok := <-ch; ok {
			t.Error("subscriber channel not closed after Run returned")
		}
	})
}

func TestWatcherDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const debounce = 50 * time.Millisecond
		f := newFake(stateN(0))
		w, stop := harness(t, f, Config{Debounce: debounce})
		defer stop()
		ch, _ := w.Subscribe(100)
		time.Sleep(time.Second)
		synctest.Wait()
		recv(ch)
		snaps0, _, _ := f.counts()

		// A burst of 20 changes within the cool-down.
		for i := 1; i <= 20; i++ {
			f.set(stateN(i))
			time.Sleep(time.Millisecond)
		}
		synctest.Wait()
		if snaps, _, _ := f.counts(); snaps != snaps0 {
			t.Fatalf("snapshot taken during the cool-down (%d → %d)", snaps0, snaps)
		}
		time.Sleep(debounce)
		synctest.Wait()
		if snaps, _, _ := f.counts(); snaps != snaps0+1 {
			t.Errorf("burst of 20 hints cost %d snapshots, want 1", snaps-snaps0)
		}
		got := recv(ch)
		if want := [][]Event{Diff(stateN(0), stateN(20))}; !reflect.DeepEqual(got, want) {
			t.Errorf("batches = %v, want %v", got, want)
		}
		// Nothing more: no extra snapshot, no empty batch.
		time.Sleep(time.Second)
		synctest.Wait()
		if snaps, _, _ := f.counts(); snaps != snaps0+1 {
			t.Errorf("%d extra snapshots after the burst", snaps-snaps0-1)
		}
		if got := recv(ch); len(got) != 0 {
			t.Errorf("extra batches %v", got)
		}
	})
}

func TestWatcherResubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const backoff = 2 * time.Second
		f := newFake(stateN(1))
		w, stop := harness(t, f, Config{Resubscribe: backoff})
		defer stop()
		ch, _ := w.Subscribe(10)
		time.Sleep(time.Second)
		synctest.Wait()
		recv(ch)

		// A change whose message is lost, then the subscription dies
		// (receive buffer overrun).
		f.setSilently(stateN(2))
		f.kill <- errors.New("no buffer space available")
		synctest.Wait()
		if got, want := recv(ch), [][]Event{Diff(stateN(1), stateN(2))}; !reflect.DeepEqual(got, want) {
			t.Errorf("resync after subscription death = %v, want %v", got, want)
		}
		if _, subs, active := f.counts(); subs != 1 || active != 0 {
			t.Fatalf("subs=%d active=%d right after death", subs, active)
		}
		time.Sleep(backoff - time.Millisecond)
		synctest.Wait()
		if _, subs, _ := f.counts(); subs != 1 {
			t.Fatalf("re-subscribed before the back-off (%d)", subs)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if _, subs, active := f.counts(); subs != 2 || active != 1 {
			t.Fatalf("subs=%d active=%d after the back-off, want 2, 1", subs, active)
		}
		// A change lost in the gap is caught by the re-subscription's hint.
		f.setSilently(stateN(3))
		f.kill <- errors.New("again")
		synctest.Wait()
		f.setSilently(stateN(4)) // lost while no subscription exists
		time.Sleep(backoff + time.Second)
		synctest.Wait()
		got := recv(ch)
		if len(got) == 0 || !reflect.DeepEqual(w.State(), stateN(4)) {
			t.Errorf("after second death: state %+v, batches %v", w.State(), got)
		}
		// The new subscription works.
		f.set(stateN(5))
		time.Sleep(time.Second)
		synctest.Wait()
		if got := recv(ch); !reflect.DeepEqual(got, [][]Event{Diff(stateN(4), stateN(5))}) {
			t.Errorf("after re-subscribe: %v", got)
		}
	})
}

func TestWatcherSnapshotRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(stateN(1))
		w, stop := harness(t, f, Config{Resubscribe: time.Second})
		defer stop()
		ch, _ := w.Subscribe(10)
		time.Sleep(time.Second)
		synctest.Wait()
		recv(ch)
		f.mu.Lock()
		f.fail = errors.New("transient")
		f.mu.Unlock()
		f.set(stateN(2)) // snapshot after the cool-down fails
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		if got := recv(ch); len(got) != 0 {
			t.Errorf("batches after failed snapshot: %v", got)
		}
		time.Sleep(time.Second) // retry after the back-off
		synctest.Wait()
		if got := recv(ch); !reflect.DeepEqual(got, [][]Event{Diff(stateN(1), stateN(2))}) {
			t.Errorf("after retry: %v", got)
		}
	})
}

func TestWatcherSlowSubscriber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const debounce = 10 * time.Millisecond
		f := newFake(stateN(0))
		w, stop := harness(t, f, Config{Debounce: debounce})
		defer stop()
		slow, _ := w.Subscribe(1) // never read until the end
		fast, _ := w.Subscribe(1)
		time.Sleep(time.Second)
		synctest.Wait()

		var fastBatches int
		v := newView()
		for _, b := range recv(fast) {
			v.apply(b)
			fastBatches++
		}
		const n = 50
		for i := 1; i <= n; i++ {
			f.set(stateN(i))
			time.Sleep(2 * debounce)
			synctest.Wait()
			for _, b := range recv(fast) {
				v.apply(b)
				fastBatches++
			}
		}
		// The watcher kept going although slow's channel was full.
		if !reflect.DeepEqual(w.State(), stateN(n)) {
			t.Fatalf("watcher stuck: state %+v", w.State())
		}
		if fastBatches != n+1 {
			t.Errorf("fast subscriber got %d batches, want %d", fastBatches, n+1)
		}
		if !reflect.DeepEqual(v, viewOf(stateN(n))) {
			t.Errorf("fast subscriber's view is not the final state")
		}
		// slow: its buffered initial batch, the batch its delivery
		// goroutine computed when the channel filled, then one coalesced
		// batch to the final state: 3 batches for 51 changes.
		first := <-slow
		synctest.Wait()
		rest := recv(slow)
		if !reflect.DeepEqual(first, Diff(State{}, stateN(0))) {
			t.Errorf("slow first batch = %v", first)
		}
		if len(rest) != 2 {
			t.Errorf("slow subscriber got %d more batches, want 2 (coalesced): %v", len(rest), rest)
		}
		sv := newView()
		sv.apply(first)
		for _, b := range rest {
			sv.apply(b)
		}
		if !reflect.DeepEqual(sv, viewOf(stateN(n))) {
			t.Errorf("slow subscriber's view is not the final state: %+v", sv)
		}
	})
}

func TestWatcherStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(stateN(1))
		w := NewWatcher(f, Config{}, nil)
		ch1, unsub1 := w.Subscribe(1)
		ch2, _ := w.Subscribe(1)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- w.Run(ctx) }()
		time.Sleep(time.Second)
		f.set(stateN(2)) // ch2 is now full with a delivery pending
		time.Sleep(time.Second)
		synctest.Wait()

		unsub1()
		unsub1() // idempotent
		if got := recv(ch1); len(got) > 1 {
			t.Errorf("ch1 after unsubscribe: %v", got)
		}
		if _, ok := <-ch1; ok {
			t.Error("ch1 not closed by unsubscribe")
		}
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run = %v", err)
		}
		// Run has returned: the subscription is gone and ch2 is closed.
		if _, _, active := f.counts(); active != 0 {
			t.Errorf("%d subscriptions still running", active)
		}
		recv(ch2)
		if _, ok := <-ch2; ok {
			t.Error("ch2 not closed after Run returned")
		}
		ch3, unsub3 := w.Subscribe(1)
		if _, ok := <-ch3; ok {
			t.Error("Subscribe after Run returned gives an open channel")
		}
		unsub3()
		if err := w.Run(context.Background()); err == nil {
			t.Error("second Run succeeded")
		}
		// synctest.Test fails if any goroutine of the bubble is left.
	})
}
