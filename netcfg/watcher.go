package netcfg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Source is the kernel side of a Watcher.
//
// Snapshot reads the complete current state. Subscribe watches for
// changes until ctx ends (it then returns nil or ctx.Err()) or the
// subscription dies (it returns why). For every change it sends a hint
// on hint WITHOUT blocking (select with default: the Watcher gives it a
// one-slot channel, so a pending hint already covers the new one), and it
// sends one hint as soon as the subscription is in place, so that changes
// made between the caller's last Snapshot and the subscription are seen.
type Source interface {
	Snapshot(ctx context.Context) (State, error)
	Subscribe(ctx context.Context, hint chan<- struct{}) error
}

// Config tunes a Watcher. The zero value is the default.
type Config struct {
	// Debounce is the cool-down between the first hint of a burst and the
	// snapshot that covers it. 0 means 50 ms (sub-second WAN detection
	// while a burst of netlink messages still costs one re-read).
	Debounce time.Duration
	// Resubscribe is the pause before re-subscribing after the
	// subscription died, and before retrying a snapshot that failed.
	// 0 means 1 s.
	Resubscribe time.Duration
}

func (c Config) debounce() time.Duration {
	if c.Debounce <= 0 {
		return 50 * time.Millisecond
	}
	return c.Debounce
}

func (c Config) resubscribe() time.Duration {
	if c.Resubscribe <= 0 {
		return time.Second
	}
	return c.Resubscribe
}

// Watcher keeps the newest State of a Source and publishes every change
// to its subscribers as one batch of Events per change.
//
// Delivery policy: each subscriber has its own channel and its own
// delivery goroutine, and remembers the last State it was given. Each
// batch it receives is Diff(last given, newest). The Watcher never waits
// for a subscriber: if a subscriber is slow, the changes that happen
// meanwhile are coalesced: besides the channel's buffer, at most one
// computed batch waits in flight, and the batch after it takes the
// subscriber from what it was last given straight to the newest state. It may
// therefore miss a transient flap (down then up again), but it never
// misses or misorders the final state. A subscriber that joins late
// first receives the whole current state as additions.
type Watcher struct {
	src Source
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	cur     State
	have    bool // cur holds a snapshot
	subs    map[*subscriber]struct{}
	running bool
	stopped bool          // Run has returned
	done    chan struct{} // closed when Run returns
	pumps   sync.WaitGroup
}

type subscriber struct {
	ch   chan []Event
	wake chan struct{} // one slot: "the Watcher has a newer state"
	quit chan struct{}
	once sync.Once
}

// NewWatcher returns a Watcher of src. A nil log discards.
func NewWatcher(src Source, cfg Config, log *slog.Logger) *Watcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watcher{
		src:  src,
		cfg:  cfg,
		log:  log,
		subs: map[*subscriber]struct{}{},
		done: make(chan struct{}),
	}
}

// State returns a copy of the latest snapshot (empty before Run has read
// the first one).
func (w *Watcher) State() State {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur.Clone()
}

// Subscribe returns a channel of event batches and a function that ends
// the subscription (idempotent; it closes the channel and returns once the
// delivery goroutine has exited). buf is the channel's capacity (at least
// 1). The channel is also closed when Run returns. See Watcher for the
// delivery policy.
func (w *Watcher) Subscribe(buf int) (<-chan []Event, func()) {
	s := &subscriber{
		ch:   make(chan []Event, max(buf, 1)),
		wake: make(chan struct{}, 1),
		quit: make(chan struct{}),
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		close(s.ch)
		return s.ch, func() {}
	}
	w.subs[s] = struct{}{}
	if w.have {
		s.wake <- struct{}{}
	}
	exited := make(chan struct{})
	w.pumps.Add(1)
	go func() {
		defer w.pumps.Done()
		defer close(exited)
		w.pump(s)
	}()
	return s.ch, func() {
		s.once.Do(func() {
			w.mu.Lock()
			delete(w.subs, s)
			w.mu.Unlock()
			close(s.quit)
		})
		<-exited
	}
}

// pump delivers to one subscriber: whenever woken, it sends the diff from
// what the subscriber last received to the newest state.
func (w *Watcher) pump(s *subscriber) {
	defer close(s.ch)
	var last State // what this subscriber has been given
	for {
		select {
		case <-s.wake:
		case <-s.quit:
			return
		case <-w.done:
			return
		}
		w.mu.Lock()
		cur := w.cur
		w.mu.Unlock()
		batch := Diff(last, cur)
		if len(batch) == 0 {
			continue
		}
		select {
		case s.ch <- batch:
			last = cur
		case <-s.quit:
			return
		case <-w.done:
			return
		}
	}
}

// Run reads the initial state, publishes it (every link, address and
// default route as added), then follows the Source until ctx ends: on
// every hint it waits Config.Debounce, re-reads the whole state and
// publishes the difference. When the subscription dies it logs, re-reads
// at once and re-subscribes after Config.Resubscribe. Run returns an
// error only if the initial snapshot fails; it returns nil when ctx ends,
// after every goroutine it started (including subscriber deliveries) has
// exited. Run may be called once.
func (w *Watcher) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return errors.New("netcfg: Watcher.Run called twice")
	}
	w.running = true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.stopped = true
		close(w.done)
		w.mu.Unlock()
		w.pumps.Wait()
	}()

	st, err := w.src.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("netcfg: initial snapshot: %w", err)
	}
	w.publish(st)

	hint := make(chan struct{}, 1)
	subCtx, cancelSub := context.WithCancel(ctx)
	subErr := make(chan error, 1)
	subActive := false
	startSub := func() {
		subActive = true
		go func() { subErr <- w.src.Subscribe(subCtx, hint) }()
	}
	defer func() {
		cancelSub()
		if subActive {
			<-subErr
		}
	}()
	startSub()

	deb := Debounce{Delay: w.cfg.debounce()}
	var (
		resub <-chan time.Time // re-subscribe back-off
		retry <-chan time.Time // failed-snapshot back-off
	)
	refresh := func() {
		st, err := w.src.Snapshot(ctx)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("netcfg: snapshot failed, retrying", "err", err, "after", w.cfg.resubscribe())
				retry = time.After(w.cfg.resubscribe())
			}
			return
		}
		retry = nil
		w.publish(st)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hint:
			// Hints during the cool-down are covered by the one
			// snapshot at its end.
			deb.Hint()
		case <-deb.C():
			deb.Fired()
			refresh()
		case err := <-subErr:
			subActive = false
			if ctx.Err() != nil {
				return nil
			}
			w.log.Warn("netcfg: subscription ended, re-reading state and re-subscribing",
				"err", err, "after", w.cfg.resubscribe())
			refresh()
			resub = time.After(w.cfg.resubscribe())
		case <-resub:
			resub = nil
			startSub()
		case <-retry:
			retry = nil
			refresh()
		}
	}
}

// publish installs st as the newest state and wakes the subscribers if
// anything changed. It never blocks on a subscriber.
func (w *Watcher) publish(st State) {
	w.mu.Lock()
	old, had := w.cur, w.have
	w.cur, w.have = st, true
	evs := Diff(old, st)
	if had && len(evs) == 0 {
		w.mu.Unlock()
		return
	}
	for s := range w.subs {
		select {
		case s.wake <- struct{}{}:
		default: // already pending; the pump will read the newest state
		}
	}
	w.mu.Unlock()
	if w.log.Enabled(context.Background(), slog.LevelDebug) {
		for _, e := range evs {
			w.log.Debug("netcfg: event", "event", e.String())
		}
	}
}
