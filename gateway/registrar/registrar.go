package registrar

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost/outpost/gateway/digest"
)

// Persister stores bindings so they survive a restart. The appliance backs
// it with SQLite; SaveBindings is called from one goroutine at a time.
type Persister interface {
	LoadBindings(ctx context.Context, now time.Time) ([]Binding, error)
	SaveBindings(ctx context.Context, upserts []Binding, deletes []BindingKey) error
}

// Stats are counters since start.
type Stats struct {
	Registered   uint64 `json:"registered"`    // successful REGISTERs that added or refreshed
	Unregistered uint64 `json:"unregistered"`  // bindings removed by request
	Expired      uint64 `json:"expired"`       // bindings removed by time
	AuthFailures uint64 `json:"auth_failures"` // wrong password or no qop for a user, unknown user, user name not the AOR
	AuthBlocked  uint64 `json:"auth_blocked"`  // of those, answered 503 because their budget was spent
	StormRefused uint64 `json:"storm_refused"` // 503s of the storm guard
	Challenges   uint64 `json:"challenges"`
	// Redirected counts 301s to the user's home in a registrar pool;
	// HandedOver the bindings dropped on failback (SetRedirect).
	Redirected uint64 `json:"redirected,omitempty"`
	HandedOver uint64 `json:"handed_over,omitempty"`
}

// state is everything derived from one Config, swapped atomically so that a
// request sees either the old or the new configuration, never a mix.
type state struct {
	cfg   Config
	users map[string]User
	auth  *digest.Authenticator
	storm *stormGuard // nil = unlimited
}

// Registrar is the local registrar. Create it with New, start its
// background work with Run, and hand it REGISTER requests via Handle.
type Registrar struct {
	log     *slog.Logger
	persist Persister
	now     func() time.Time

	st  atomic.Pointer[state]
	tbl *table
	// fails budgets failed authentications per source IP and user name,
	// strangers per source IP for names that are no user (see verifyAs).
	fails, strangers *failLimiter
	reconfMu         sync.Mutex

	stats struct {
		registered, unregistered, expired, authFailures, authBlocked, stormRefused, challenges atomic.Uint64
		redirected, handedOver                                                                 atomic.Uint64
	}

	date dateCache // Date header of the 200s

	presence  atomic.Pointer[func(aor string, present bool)]
	redirect  atomic.Pointer[func(aor string) []string]
	onBound   atomic.Pointer[func(aor string)]
	onUnbound atomic.Pointer[func(aor string)]
	msr       atomic.Pointer[func(MSRRegistration)]
}

// OnPresence sets the function told, about once a second from Run, which
// AORs gained their first binding (present) or lost their last one (by
// un-registration, expiry or the user's removal). Repeats are possible:
// an AOR whose bindings were refreshed is reported present again.
func (r *Registrar) OnPresence(f func(aor string, present bool)) { r.presence.Store(&f) }

// Present returns the AORs that have at least one live binding, sorted.
func (r *Registrar) Present() []string {
	var out []string
	for _, b := range r.Bindings() {
		if len(out) == 0 || out[len(out)-1] != b.AOR {
			out = append(out, b.AOR)
		}
	}
	return out
}

func (r *Registrar) notifyPresence() {
	f := r.presence.Load()
	present, absent := r.tbl.takeTouched()
	if f == nil {
		return
	}
	for _, aor := range absent {
		(*f)(aor, false)
	}
	for _, aor := range present {
		(*f)(aor, true)
	}
}

// Option adjusts a Registrar for tests.
type Option func(*Registrar)

// WithClock injects the time source.
func WithClock(now func() time.Time) Option { return func(r *Registrar) { r.now = now } }

// New builds a registrar. persist may be nil (bindings then live in memory only).
func New(cfg Config, persist Persister, log *slog.Logger, opts ...Option) (*Registrar, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Registrar{log: log, persist: persist, now: time.Now, tbl: newTable()}
	for _, o := range opts {
		o(r)
	}
	st, err := r.build(cfg)
	if err != nil {
		return nil, err
	}
	r.st.Store(st)
	r.fails = newFailLimiter(cfg.authFailLimit(), time.Minute, r.now)
	r.strangers = newFailLimiter(cfg.authFailLimit(), time.Minute, r.now)
	return r, nil
}

func (r *Registrar) build(cfg Config) (*state, error) {
	if cfg.Realm == "" {
		return nil, fmt.Errorf("gateway/registrar: realm is empty")
	}
	auth, err := digest.New(digest.Config{Realm: cfg.Realm, Algorithms: cfg.algorithms(), Now: r.now})
	if err != nil {
		return nil, fmt.Errorf("gateway/registrar: %w", err)
	}
	users := make(map[string]User, len(cfg.Users))
	for _, u := range cfg.Users {
		users[u.Extension] = u
	}
	st := &state{cfg: cfg, users: users, auth: auth}
	if perSecond := cfg.stormRate(); perSecond > 0 {
		st.storm = newStormGuard(perSecond, r.now)
	}
	return st, nil
}

// Reconfigure applies a new Config to the running registrar. Bindings of
// users that no longer exist are dropped; everyone else stays registered.
// A changed realm or algorithm list invalidates outstanding nonces, which
// clients see as stale=true and answer without asking their user.
func (r *Registrar) Reconfigure(_ context.Context, cfg Config) error {
	c, err := r.Prepare(cfg)
	if err != nil {
		return err
	}
	c.Commit()
	return nil
}

// Change is a checked configuration, ready to replace the running one.
type Change struct {
	r  *Registrar
	st *state
}

// Prepare checks cfg and builds what it needs without changing what runs:
// the appliance prepares every part of a document before committing any.
func (r *Registrar) Prepare(cfg Config) (*Change, error) {
	st, err := r.build(cfg)
	if err != nil {
		return nil, err
	}
	return &Change{r: r, st: st}, nil
}

// Commit makes the prepared configuration the running one. It cannot
// fail. Nonces stay valid across changes that keep the realm and the
// algorithms; the bindings of removed users are dropped.
func (c *Change) Commit() {
	r, st := c.r, c.st
	r.reconfMu.Lock()
	defer r.reconfMu.Unlock()
	old := r.st.Load()
	if old.cfg.Realm == st.cfg.Realm && slices.Equal(old.cfg.algorithms(), st.cfg.algorithms()) {
		st.auth = old.auth
	}
	if old.storm != nil && st.storm != nil && old.cfg.stormRate() == st.cfg.stormRate() {
		st.storm = old.storm
	}
	r.st.Store(st)
	r.fails.setLimit(st.cfg.authFailLimit())
	r.strangers.setLimit(st.cfg.authFailLimit())
	for ext := range old.users {
		if _, ok := st.users[ext]; !ok {
			if n := r.tbl.dropAOR(ext); n > 0 {
				r.log.Info("user removed: bindings dropped", "aor", ext, "bindings", n)
			}
		}
	}
}

// Run expires bindings on time and writes changes behind until ctx ends;
// it flushes once more before returning. Call Load before serving requests.
func (r *Registrar) Run(ctx context.Context) error {
	persistTick := time.NewTicker(r.st.Load().cfg.persistInterval())
	defer persistTick.Stop()
	expireTick := time.NewTicker(time.Second)
	defer expireTick.Stop()
	for {
		select {
		case <-ctx.Done():
			// The daemon is stopping: write what is pending with a fresh,
			// short context so a clean stop loses nothing.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return r.Flush(fctx)
		case <-expireTick.C:
			r.expire()
			r.fails.prune()
			r.strangers.prune()
			r.notifyPresence()
		case <-persistTick.C:
			if err := r.Flush(ctx); err != nil {
				r.log.Warn("persisting bindings failed; will retry", "err", err)
			}
		}
	}
}

// expire drops the bindings whose time has passed; their users' AORs go
// to SetOnUnbound's function, so a phone that lapsed shows in presence
// within a second, as one that unregistered does.
func (r *Registrar) expire() {
	n, lost := r.tbl.expire(r.now())
	if n == 0 {
		return
	}
	r.stats.expired.Add(uint64(n))
	r.log.Debug("bindings expired", "count", n)
	if f := r.onUnbound.Load(); f != nil {
		for _, aor := range lost {
			(*f)(aor)
		}
	}
}

// Load reads persisted bindings into memory. The gateway calls it before
// it serves the first request, so a restarted box answers for every phone
// from its first packet on.
func (r *Registrar) Load(ctx context.Context) error {
	if r.persist == nil {
		return nil
	}
	bs, err := r.persist.LoadBindings(ctx, r.now())
	if err != nil {
		return fmt.Errorf("gateway/registrar: loading bindings: %w", err)
	}
	users := r.st.Load().users
	kept := bs[:0]
	for _, b := range bs {
		if _, ok := users[b.AOR]; ok {
			kept = append(kept, b)
		}
	}
	r.tbl.load(kept, r.now())
	if len(bs) > 0 {
		r.log.Info("bindings restored", "count", len(kept), "dropped_unknown_users", len(bs)-len(kept))
	}
	return nil
}

// Flush writes pending binding changes to the persister.
func (r *Registrar) Flush(ctx context.Context) error {
	if r.persist == nil {
		r.tbl.takeDirty()
		return nil
	}
	ups, dels := r.tbl.takeDirty()
	if len(ups) == 0 && len(dels) == 0 {
		return nil
	}
	if err := r.persist.SaveBindings(ctx, ups, dels); err != nil {
		r.tbl.requeue(ups, dels)
		return fmt.Errorf("gateway/registrar: saving %d bindings: %w", len(ups)+len(dels), err)
	}
	return nil
}

// Lookup returns the live bindings of an extension.
func (r *Registrar) Lookup(aor string) []Binding { return r.tbl.lookup(aor, r.now()) }

// Bindings returns every live binding.
func (r *Registrar) Bindings() []Binding { return r.tbl.all(r.now()) }

// Stats returns the counters.
func (r *Registrar) Stats() Stats {
	return Stats{
		Registered:   r.stats.registered.Load(),
		Unregistered: r.stats.unregistered.Load(),
		Expired:      r.stats.expired.Load(),
		AuthFailures: r.stats.authFailures.Load(),
		AuthBlocked:  r.stats.authBlocked.Load(),
		StormRefused: r.stats.stormRefused.Load(),
		Challenges:   r.stats.challenges.Load(),
		Redirected:   r.stats.redirected.Load(),
		HandedOver:   r.stats.handedOver.Load(),
	}
}
