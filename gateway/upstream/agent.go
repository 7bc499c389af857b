package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// State of one user's upstream registration.
type State string

const (
	StatePending       State = "pending"       // wanted, not sent yet (or interrupted by Pause)
	StateRegistering   State = "registering"   // REGISTER in flight
	StateRegistered    State = "registered"    // HQ accepted it; refreshed before ExpiresAt
	StateFailed        State = "failed"        // the last attempt failed; retried at NextAt
	StateUnregistering State = "unregistering" // removed locally: Expires: 0 pending or in flight
)

// Entry is one row of Status.
type Entry struct {
	User   string `json:"user"`
	State  State  `json:"state"`
	Code   int    `json:"code,omitempty"`  // last final status from HQ, 0 = none
	Error  string `json:"error,omitempty"` // last failure without a status
	Target string `json:"target,omitempty"`
	// Redirected: a 301/302 sent the user to Target, where it stays
	// until that registrar fails.
	Redirected bool      `json:"redirected,omitempty"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"` // of the binding at HQ, as far as we know
	NextAt     time.Time `json:"next_at,omitzero"`    // next refresh or retry; zero while paused
}

// ErrRunning is returned by a second concurrent Run.
var ErrRunning = errors.New("gateway/upstream: already running")

// op is what a job does for a user.
type op int

const (
	opRegister op = iota
	opUnregister
)

// entry is the state of one user. Guarded by Agent.mu, except auth,
// which belongs to the worker while busy is set.
type entry struct {
	user  string
	want  op
	state State
	code  int
	err   string

	// What HQ holds for the user, as far as we know: the binding we
	// registered (empty: nothing), where and until when.
	target   string
	redirect string // target, when a 3xx sent the user there: its refreshes go there
	// redirectAlts are the other Contacts of that 3xx, best first: where
	// a refresh goes when redirect fails, before HQ's targets again.
	redirectAlts []string
	regDomain    string
	regContact   string
	expiresAt    time.Time

	callID   string // one per user and boot (RFC 3261 §10.2.4)
	fromTag  string
	cseq     uint32
	expires  int // requested seconds after a 423; 0 = the configured value
	auth     authCache
	failures int // consecutive, for the back-off

	due   time.Time // in the queue: when
	seq   uint64    // queue tie-break
	index int       // heap index, -1 when not queued
	busy  bool      // a worker holds it
	gen   uint64    // bumped by Set/Remove/Resume: the worker's snapshot is stale
}

// live reports whether HQ may still hold a binding of ours at now.
func (e *entry) live(now time.Time) bool {
	return e.regContact != "" && e.expiresAt.After(now)
}

// settled reports whether e is registered where it is, waiting for its
// refresh: the only entries recheck may move.
func (e *entry) settled(now time.Time) bool {
	return e.want == opRegister && !e.busy && e.index >= 0 && e.state == StateRegistered &&
		e.live(now) && e.redirect == "" && e.target != ""
}

// idleState is the state of an entry that is neither in flight nor failed.
func (e *entry) idleState(now time.Time) State {
	switch {
	case e.want == opUnregister:
		return StateUnregistering
	case e.live(now):
		return StateRegistered
	}
	return StatePending
}

// doer sends one request and returns its final response; sipgo.Client in
// production, an in-memory HQ in tests.
type doer interface {
	Do(ctx context.Context, req *sip.Request) (*sip.Response, error)
}

type clientDoer struct{ c *sipgo.Client }

func (d clientDoer) Do(ctx context.Context, req *sip.Request) (*sip.Response, error) {
	res, err := d.c.Do(ctx, req)
	if err == nil && res == nil {
		// sipgo ends a transaction whose layer is closing with neither.
		err = errEndedWithoutResponse
	}
	return res, err
}

var errEndedWithoutResponse = errors.New("gateway/upstream: transaction ended without a response")

// Agent registers the box's local users at the HQ registrar. Create it
// with New, start it with Run, and tell it who is registered locally
// with Set and Remove.
type Agent struct {
	log  *slog.Logger
	do   doer
	wake chan struct{} // capacity 1: "look at the queue again"

	mu          sync.Mutex
	set         *settings
	cfgGen      uint64 // bumped when the registered identity changes
	workers     int
	entries     map[string]*entry
	q           queue
	pace        pacer
	paused      bool
	running     bool
	runCtx      context.Context
	epoch       context.Context // jobs run in it; Pause cancels it
	cancelEpoch context.CancelFunc
}

// New returns an Agent that sends through ua (the gateway's user agent,
// whose listeners the requests leave from). It sends nothing before Run.
// A nil log discards.
func New(ua *sipgo.UserAgent, cfg Config, log *slog.Logger) (*Agent, error) {
	if ua == nil {
		return nil, fmt.Errorf("gateway/upstream: no user agent")
	}
	cli, err := sipgo.NewClient(ua)
	if err != nil {
		return nil, fmt.Errorf("gateway/upstream: sip client: %w", err)
	}
	return newAgent(clientDoer{cli}, cfg, log)
}

func newAgent(d doer, cfg Config, log *slog.Logger) (*Agent, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	set, err := cfg.settings()
	if err != nil {
		return nil, err
	}
	return &Agent{
		log:     log,
		do:      d,
		wake:    make(chan struct{}, 1),
		set:     set,
		workers: set.workers,
		entries: map[string]*entry{},
		pace:    pacer{interval: set.interval},
	}, nil
}

// Reconfigure applies a new Config. When the registered identity changes
// (domain, contact, credentials, expiry, transport, local address) every
// user is registered again, paced; a binding whose contact or domain
// changed is replaced (the new one is registered, then the old one
// removed with Expires: 0), so HQ follows a new WAN address. A new Trunk
// or rate applies to the next REGISTER. Workers is not changed. On error
// nothing changes.
func (a *Agent) Reconfigure(_ context.Context, cfg Config) error {
	set, err := cfg.settings()
	if err != nil {
		return err
	}
	a.mu.Lock()
	old := a.set
	a.set = set
	a.pace.interval = set.interval
	if !old.sameIdentity(set) {
		a.cfgGen++
		now := time.Now()
		for _, user := range slices.Sorted(maps.Keys(a.entries)) {
			e := a.entries[user]
			e.expires = 0
			if !e.busy && e.want == opRegister {
				a.q.schedule(e, now)
			}
		}
	}
	a.mu.Unlock()
	a.poke()
	return nil
}

// Set asks for user's binding at HQ: the registrar calls it when the
// user's first local binding appears. Calling it again is harmless.
func (a *Agent) Set(user string) {
	a.mu.Lock()
	changed := a.setLocked(user, time.Now())
	a.mu.Unlock()
	if changed {
		a.poke()
	}
}

// Remove withdraws user's binding at HQ (Expires: 0): the registrar calls
// it when the user's last local binding goes. A user never registered at
// HQ is simply forgotten.
func (a *Agent) Remove(user string) {
	a.mu.Lock()
	changed := a.removeLocked(user, time.Now())
	a.mu.Unlock()
	if changed {
		a.poke()
	}
}

// Sync makes the set of wanted users exactly users: Set for each, Remove
// for every other. The appliance calls it at start with the users of the
// restored local bindings (and may call it periodically as a repair).
func (a *Agent) Sync(users []string) {
	now := time.Now()
	want := make(map[string]bool, len(users))
	a.mu.Lock()
	for _, u := range users {
		want[u] = true
	}
	changed := false
	// Withdrawals first: they free HQ of stale bindings before new ones.
	for _, u := range slices.Sorted(maps.Keys(a.entries)) {
		if !want[u] {
			changed = a.removeLocked(u, now) || changed
		}
	}
	for _, u := range users {
		changed = a.setLocked(u, now) || changed
	}
	a.mu.Unlock()
	if changed {
		a.poke()
	}
}

func (a *Agent) setLocked(user string, now time.Time) bool {
	e := a.entries[user]
	switch {
	case e == nil:
		e = &entry{
			user:    user,
			want:    opRegister,
			state:   StatePending,
			callID:  sip.GenerateTagN(32),
			fromTag: sip.GenerateTagN(16),
			cseq:    uint32(rand.IntN(1 << 15)), // RFC 3261 §8.1.1.5: below 2**31
			index:   -1,
		}
		a.entries[user] = e
		a.q.schedule(e, now)
	case e.want == opUnregister:
		e.want = opRegister
		e.gen++
		if !e.busy {
			e.state = e.idleState(now)
			a.q.schedule(e, now)
		}
	default:
		return false
	}
	return true
}

func (a *Agent) removeLocked(user string, now time.Time) bool {
	e := a.entries[user]
	if e == nil || e.want == opUnregister {
		return false
	}
	e.want = opUnregister
	e.gen++
	switch {
	case e.busy: // the worker sees gen and comes back at once
	case e.regContact == "":
		a.dropLocked(e) // nothing at HQ to withdraw
	default:
		e.state = StateUnregistering
		a.q.schedule(e, now)
	}
	return true
}

func (a *Agent) dropLocked(e *entry) {
	a.q.remove(e)
	delete(a.entries, e.user)
}

// Pause stops sending (survivable mode): REGISTERs in flight are
// abandoned, nothing new is sent, and Set/Remove keep being recorded.
func (a *Agent) Pause() {
	a.mu.Lock()
	if a.paused {
		a.mu.Unlock()
		return
	}
	a.paused = true
	if a.cancelEpoch != nil {
		a.cancelEpoch()
	}
	n := len(a.entries)
	a.mu.Unlock()
	a.log.Info("upstream registration paused", "users", n)
}

// Resume sends again (failback): every user is registered again and
// every user removed meanwhile is withdrawn, in user order, paced at
// ReplayRate so that HQ is not flooded.
func (a *Agent) Resume() {
	a.mu.Lock()
	if !a.paused {
		a.mu.Unlock()
		return
	}
	a.paused = false
	if a.running {
		a.newEpochLocked()
	}
	now := time.Now()
	for _, user := range slices.Sorted(maps.Keys(a.entries)) {
		e := a.entries[user]
		e.failures = 0
		if e.busy {
			e.gen++ // abandoned by Pause; its worker requeues it at once
			continue
		}
		a.q.schedule(e, now)
	}
	n, rate := len(a.entries), time.Second.Seconds()/a.pace.interval.Seconds()
	a.mu.Unlock()
	a.poke()
	a.log.Info("upstream registration resumed: replaying", "users", n, "per_second", rate)
}

// Paused reports whether the Agent is paused.
func (a *Agent) Paused() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.paused
}

// Status returns every user's upstream registration, sorted by user.
func (a *Agent) Status() []Entry {
	a.mu.Lock()
	out := make([]Entry, 0, len(a.entries))
	for _, e := range a.entries {
		r := Entry{User: e.user, State: e.state, Code: e.code, Error: e.err, Target: e.target, Redirected: e.redirect != ""}
		if e.regContact != "" {
			r.ExpiresAt = e.expiresAt
		}
		if e.index >= 0 && !a.paused {
			r.NextAt = e.due
		}
		out = append(out, r)
	}
	a.mu.Unlock()
	slices.SortFunc(out, func(x, y Entry) int { return strings.Compare(x.User, y.User) })
	return out
}

func (a *Agent) poke() {
	select {
	case a.wake <- struct{}{}:
	default: // a wake-up is pending
	}
}

// newEpochLocked starts a new context for jobs, ending the previous one.
func (a *Agent) newEpochLocked() {
	if a.cancelEpoch != nil {
		a.cancelEpoch()
	}
	a.epoch, a.cancelEpoch = context.WithCancel(a.runCtx)
}
