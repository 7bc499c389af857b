package health

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// Reason says why a target last changed state. It is shown by
// `outpostctl status` and carried by Change.
type Reason string

const (
	ReasonNew            Reason = "new"             // first seen; starts up
	ReasonProbesFailed   Reason = "probes failed"   // DownAfter failed probes in a row
	ReasonProbesOK       Reason = "probes ok"       // UpAfter good probes/successes in a row
	ReasonTrafficFailure Reason = "traffic failure" // Observe(Failure): blocked
	ReasonTrafficSuccess Reason = "traffic success" // Observe(Success): unblocked
)

// TargetState is one row of Snapshot.
type TargetState struct {
	Target          string        `json:"target"`
	Up              bool          `json:"up"`
	BlockedUntil    time.Time     `json:"blocked_until,omitzero"` // zero: not blocked
	ConsecutiveOK   int           `json:"consecutive_ok"`
	ConsecutiveFail int           `json:"consecutive_fail"`
	LastRTT         time.Duration `json:"last_rtt_ns"`
	LastChange      time.Time     `json:"last_change"`
	Reason          Reason        `json:"reason"`
	// LastError is why the last probe failed ("" after a good one): what
	// an operator needs to see for a target down by its probes, such as
	// a TLS certificate that fails verification.
	LastError string `json:"last_error,omitempty"`
}

// Change is one published transition: a target went up or down, or was
// blocked or unblocked by real traffic. Up and Blocked give the state
// after the change.
type Change struct {
	Target  string
	Up      bool
	Blocked bool
	Reason  Reason
	At      time.Time
}

// target is the mutable state of one target; guarded by Tracker.mu.
type target struct {
	up           bool
	blockedUntil time.Time // zero: never blocked or unblocked since
	okRun        int       // consecutive good probes/successes
	failRun      int       // consecutive failed probes
	rtt          time.Duration
	changed      time.Time
	reason       Reason
	lastErr      string // of the last probe; "" after a good one
}

// eligible reports whether t may be offered normally at now: up and not
// blocked. An expired block is half-open, i.e. eligible.
func (t *target) eligible(now time.Time) bool {
	return t.up && !now.Before(t.blockedUntil)
}

// Tracker holds the health state of every target it has heard of. It is
// safe for concurrent use. Unknown targets count as up and unblocked.
type Tracker struct {
	cfg Config

	mu      sync.Mutex
	targets map[string]*target
	subs    map[*subscriber]struct{}
}

// New returns a Tracker; zero fields of cfg mean defaults.
func New(cfg Config) *Tracker {
	return &Tracker{
		cfg:     cfg.withDefaults(),
		targets: make(map[string]*target),
		subs:    make(map[*subscriber]struct{}),
	}
}

// Config returns the effective configuration (defaults filled in).
func (tr *Tracker) Config() Config { return tr.cfg }

// get returns the state of name, creating it (up) if needed. Caller holds mu.
func (tr *Tracker) get(name string, now time.Time) *target {
	t := tr.targets[name]
	if t == nil {
		t = &target{up: true, changed: now, reason: ReasonNew}
		tr.targets[name] = t
	}
	return t
}

// Track makes targets known (up, unblocked) so that Snapshot lists them
// before any evidence arrives. Known targets are left as they are.
func (tr *Tracker) Track(targets ...string) {
	now := tr.cfg.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, name := range targets {
		tr.get(name, now)
	}
}

// Forget drops the state of targets; if seen again they start afresh (up).
// No Change is published.
func (tr *Tracker) Forget(targets ...string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, name := range targets {
		delete(tr.targets, name)
	}
}

// ProbeResult feeds one active probe. DownAfter failures in a row take an
// up target down; UpAfter successes in a row bring a down target up. A
// streak shorter than the threshold changes nothing (hysteresis). Probes do
// not touch the block set by traffic: a blocked target waits for its block
// to expire or for a traffic success.
func (tr *Tracker) ProbeResult(name string, ok bool, rtt time.Duration) {
	now := tr.cfg.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	t := tr.get(name, now)
	if ok {
		t.rtt = rtt
		tr.good(name, t, now)
		return
	}
	t.okRun = 0
	t.failRun++
	if t.up && t.failRun >= tr.cfg.DownAfter {
		t.up = false
		tr.changed(name, t, now, ReasonProbesFailed)
	}
}

// good counts one good probe or traffic success. Caller holds mu.
func (tr *Tracker) good(name string, t *target, now time.Time) {
	t.failRun = 0
	t.okRun++
	if !t.up && t.okRun >= tr.cfg.UpAfter {
		t.up = true
		tr.changed(name, t, now, ReasonProbesOK)
	}
}

// ProbeError feeds one active probe like ProbeResult and keeps why it
// failed (err nil = a good probe) for Snapshot.
func (tr *Tracker) ProbeError(name string, err error, rtt time.Duration) {
	tr.ProbeResult(name, err == nil, rtt)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	tr.mu.Lock()
	if t := tr.targets[name]; t != nil {
		t.lastErr = msg
	}
	tr.mu.Unlock()
}

// Observe feeds the outcome of one real request (see ClassifyForHealth).
//
// A Failure blocks the target for BlockFor (again, if it was half-open)
// and breaks any streak of good probes; it does not count towards
// DownAfter, which belongs to the probes. A Success unblocks the target at
// once and counts as one good probe. Unknown is ignored.
func (tr *Tracker) Observe(name string, outcome Outcome) {
	if outcome != Success && outcome != Failure {
		return
	}
	now := tr.cfg.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	t := tr.get(name, now)
	wasBlocked := now.Before(t.blockedUntil)
	if outcome == Failure {
		t.okRun = 0
		t.blockedUntil = now.Add(tr.cfg.BlockFor)
		if !wasBlocked {
			tr.changed(name, t, now, ReasonTrafficFailure)
		}
		return
	}
	hadBlock := !t.blockedUntil.IsZero()
	t.blockedUntil = time.Time{}
	wasUp := t.up
	tr.good(name, t, now)
	// Publish the unblock unless good already published the way up. An
	// expired (half-open) block also ends here, so subscribers learn that
	// the target is confirmed healthy.
	if hadBlock && wasUp == t.up {
		tr.changed(name, t, now, ReasonTrafficSuccess)
	}
}

// changed records a transition and publishes it. Caller holds mu.
func (tr *Tracker) changed(name string, t *target, now time.Time, why Reason) {
	t.changed, t.reason = now, why
	c := Change{Target: name, Up: t.up, Blocked: now.Before(t.blockedUntil), Reason: why, At: now}
	for s := range tr.subs {
		s.send(c)
	}
}

// Knows reports whether the Tracker holds a state for name (tracked,
// probed or observed), so that a caller with several Trackers (an HQ pool
// and its backup) reports an outcome to the one the target belongs to.
func (tr *Tracker) Knows(name string) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.targets[name] != nil
}

// Eligible reports whether name would be offered by Pick in the normal
// way: up, and not blocked (or its block expired: half-open).
func (tr *Tracker) Eligible(name string) bool {
	now := tr.cfg.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	t := tr.targets[name]
	return t == nil || t.eligible(now)
}

// Pick orders candidates for one attempt. The eligible ones come first,
// in the given order (the caller has ordered them by SRV priority and
// weight). Only if none is eligible, Pick returns exactly one candidate
// chosen at random, so that traffic can discover a recovery (docs/design.md §1:
// "if every target is blocked, one blocked target is tried at random").
// It returns nil for no candidates. The result is a new slice.
func (tr *Tracker) Pick(candidates []string) []string {
	if len(candidates) == 0 {
		return nil
	}
	now := tr.cfg.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
	for i, name := range candidates {
		if t := tr.targets[name]; t == nil || t.eligible(now) {
			if out == nil {
				out = make([]string, 0, len(candidates)-i)
			}
			out = append(out, name)
		}
	}
	if out != nil {
		return out
	}
	return []string{candidates[tr.cfg.Rand.IntN(len(candidates))]}
}

// AllDown reports whether no candidate is eligible: every one is down or
// blocked. It is the signal the mode logic uses to go survivable. It is
// false for no candidates (nothing configured is not an outage).
func (tr *Tracker) AllDown(candidates []string) bool {
	if len(candidates) == 0 {
		return false
	}
	now := tr.cfg.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, name := range candidates {
		if t := tr.targets[name]; t == nil || t.eligible(now) {
			return false
		}
	}
	return true
}

// Snapshot returns the state of every known target, sorted by target.
// BlockedUntil is zero unless the target is blocked now.
func (tr *Tracker) Snapshot() []TargetState {
	now := tr.cfg.Now()
	tr.mu.Lock()
	out := make([]TargetState, 0, len(tr.targets))
	for name, t := range tr.targets {
		s := TargetState{
			Target:          name,
			Up:              t.up,
			ConsecutiveOK:   t.okRun,
			ConsecutiveFail: t.failRun,
			LastRTT:         t.rtt,
			LastChange:      t.changed,
			Reason:          t.reason,
			LastError:       t.lastErr,
		}
		if now.Before(t.blockedUntil) {
			s.BlockedUntil = t.blockedUntil
		}
		out = append(out, s)
	}
	tr.mu.Unlock()
	slices.SortFunc(out, func(a, b TargetState) int { return strings.Compare(a.Target, b.Target) })
	return out
}

// subscriber is one Subscribe channel.
type subscriber struct {
	ch chan Change
}

// send delivers c without blocking: when the buffer is full the oldest
// pending change is dropped to make room. Caller holds Tracker.mu, so
// there is one sender at a time.
func (s *subscriber) send(c Change) {
	for {
		select {
		case s.ch <- c:
			return
		default:
		}
		select {
		case <-s.ch: // drop the oldest
		default: // the reader drained it meanwhile; try again
		}
	}
}

// Subscribe returns a channel of every Change from now on and a function
// that ends the subscription and closes the channel (idempotent).
//
// Publishing never blocks: each channel buffers 64 changes and, when a
// slow reader lets it fill, the oldest pending change is dropped. A reader
// that needs the exact current state after a burst should re-read it
// (Snapshot, AllDown) rather than replay changes: changes are hints.
//
// Block expiry is not an event (there is no timer); a half-open target is
// simply eligible again for Pick and AllDown.
func (tr *Tracker) Subscribe() (<-chan Change, func()) {
	s := &subscriber{ch: make(chan Change, subscriberBuffer)}
	tr.mu.Lock()
	tr.subs[s] = struct{}{}
	tr.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			tr.mu.Lock()
			delete(tr.subs, s)
			close(s.ch)
			tr.mu.Unlock()
		})
	}
}
