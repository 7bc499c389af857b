package mode

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

const (
	// HistoryLen bounds Driver.Transitions.
	HistoryLen = 64
	// subscriberBuffer is the capacity of each Subscribe channel.
	subscriberBuffer = 16
)

// ErrRunning is returned by a second concurrent Driver.Run.
var ErrRunning = errors.New("mode: driver already running")

// Driver runs a Machine with the real clock. Send and Reconfigure may be
// called from any goroutine, before or during Run; Run owns the one timer
// that completes the failback hold.
type Driver struct {
	log  *slog.Logger
	now  func() time.Time
	wake chan struct{} // capacity 1: "the deadline may have moved"

	mu      sync.Mutex
	m       *Machine
	hist    []Transition // ring of the last HistoryLen, oldest at head
	head    int
	counts  map[Mode]uint64
	subs    map[*subscriber]struct{}
	running bool
}

// NewDriver returns a Driver whose Machine starts now in the mode cfg
// implies; that start is the first entry of Transitions. A nil log
// discards.
func NewDriver(cfg Config, log *slog.Logger) *Driver {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Driver{
		log:    log,
		now:    time.Now,
		wake:   make(chan struct{}, 1),
		counts: map[Mode]uint64{},
		subs:   map[*subscriber]struct{}{},
	}
	now := d.now()
	d.m = New(cfg, now)
	d.record([]Transition{{To: d.m.Mode(), Reason: ReasonStart, At: now}})
	return d
}

// Send feeds one event; a zero At is stamped with the current time. It
// never blocks on subscribers.
func (d *Driver) Send(ev Event) {
	if ev.At.IsZero() {
		ev.At = d.now()
	}
	d.mu.Lock()
	ts := d.m.Apply(ev)
	d.record(ts)
	d.mu.Unlock()
	d.poke()
}

// Reconfigure applies a new Config (a Configured event now). It cannot
// fail; the error is there for the appliance's uniform part interface.
func (d *Driver) Reconfigure(_ context.Context, cfg Config) error {
	d.Send(Event{Kind: Configured, Config: cfg})
	return nil
}

// Run completes failback holds on time until ctx ends; it returns nil on
// a clean stop. Only one Run at a time.
func (d *Driver) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.running {
		d.mu.Unlock()
		return ErrRunning
	}
	d.running = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.running = false
		d.mu.Unlock()
	}()

	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		// Settle a deadline that passed, then sleep until the next one.
		d.mu.Lock()
		if t, ok := d.m.Tick(d.now()); ok {
			d.record([]Transition{t})
		}
		deadline, armed := d.m.Next()
		d.mu.Unlock()

		timer.Stop()
		var fire <-chan time.Time
		if armed {
			timer.Reset(time.Until(deadline))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
		case <-fire:
		}
	}
}

func (d *Driver) poke() {
	select {
	case d.wake <- struct{}{}:
	default: // a wake-up is pending; Run re-reads the deadline anyway
	}
}

// record logs, counts, keeps and publishes transitions. Caller holds mu.
func (d *Driver) record(ts []Transition) {
	for _, t := range ts {
		if t.From != "" {
			d.log.Info("mode changed", "from", t.From, "to", t.To, "reason", t.Reason, "detail", t.Detail, "at", t.At)
		}
		d.counts[t.To]++
		if len(d.hist) < HistoryLen {
			d.hist = append(d.hist, t)
		} else {
			d.hist[d.head] = t
			d.head = (d.head + 1) % HistoryLen
		}
		for s := range d.subs {
			s.send(t)
		}
	}
}

// Mode returns the current mode.
func (d *Driver) Mode() Mode {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m.Mode()
}

// Status returns a snapshot of the Machine.
func (d *Driver) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m.Status()
}

// Transitions returns the last HistoryLen transitions, oldest first,
// starting with the initial mode (From empty, ReasonStart) until it is
// pushed out.
func (d *Driver) Transitions() []Transition {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Transition, 0, len(d.hist))
	out = append(out, d.hist[d.head:]...)
	return append(out, d.hist[:d.head]...)
}

// Counts returns how often each mode was entered since start (the start
// included), for metrics.
func (d *Driver) Counts() map[Mode]uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[Mode]uint64, len(d.counts))
	for m, n := range d.counts {
		out[m] = n
	}
	return out
}

// subscriber is one Subscribe channel.
type subscriber struct{ ch chan Transition }

// send delivers t without blocking, dropping the oldest pending
// transition when the buffer is full. Caller holds Driver.mu.
func (s *subscriber) send(t Transition) {
	for {
		select {
		case s.ch <- t:
			return
		default:
		}
		select {
		case <-s.ch:
		default:
		}
	}
}

// Subscribe returns a channel of every Transition from now on and a
// function that ends the subscription and closes the channel
// (idempotent). Publishing never blocks: a slow reader loses the oldest
// pending transitions, so a reader acts on Mode() (the truth) and uses
// the transition for its reason. The routing layer's loop is:
//
//	for range ch { apply(d.Mode()) }
func (d *Driver) Subscribe() (<-chan Transition, func()) {
	s := &subscriber{ch: make(chan Transition, subscriberBuffer)}
	d.mu.Lock()
	d.subs[s] = struct{}{}
	d.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			d.mu.Lock()
			delete(d.subs, s)
			close(s.ch)
			d.mu.Unlock()
		})
	}
}
