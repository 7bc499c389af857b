package registrar

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// stormGuard admits unauthenticated REGISTERs at a rate per second with
// a burst of one second's worth. The bucket is golang.org/x/time/rate's,
// read on the registrar's clock so that tests step time.
type stormGuard struct {
	lim *rate.Limiter
	now func() time.Time
}

func newStormGuard(perSecond int, now func() time.Time) *stormGuard {
	return &stormGuard{lim: rate.NewLimiter(rate.Limit(perSecond), perSecond), now: now}
}

func (g *stormGuard) allow() bool { return g.lim.AllowN(g.now(), 1) }

// failLimiter counts failed authentications per key with a budget of
// limit failures per window. The registrar keeps two: one keyed by source
// IP and user name (wrong passwords for a real user), one keyed by source IP
// alone (unknown users, user names that are not the AOR). A key that has
// spent its budget is "blocked": its further failures are answered 503 with
// Retry-After instead of 401/403, and are not logged one by one. Blocking
// never stops credentials from being checked: what verifies is accepted
// (see the package doc for why).
type failLimiter struct {
	mu      sync.Mutex
	limit   int
	window  time.Duration
	now     func() time.Time
	sources map[string]*failSource
}

// failSource is one key's budget: a token bucket of limit failures that
// refills at limit per window.
type failSource struct {
	budget  *rate.Limiter
	blocked bool // logged as blocked, reset when the budget is whole again
}

// maxFailSources bounds the table against spoofed-source floods; beyond it
// the oldest-looking entries are pruned early.
const maxFailSources = 65536

func newFailLimiter(limit int, window time.Duration, now func() time.Time) *failLimiter {
	return &failLimiter{limit: limit, window: window, now: now, sources: map[string]*failSource{}}
}

func (f *failLimiter) every() rate.Limit { return rate.Limit(float64(f.limit) / f.window.Seconds()) }

func (f *failLimiter) setLimit(limit int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limit = limit
	now := f.now()
	for _, s := range f.sources {
		s.budget.SetLimitAt(now, f.every())
		s.budget.SetBurstAt(now, limit)
	}
}

// blocked reports whether key has no whole failure left to spend: it
// stays blocked until one has refilled (window/limit, the Retry-After).
func (f *failLimiter) blocked(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sources[key]
	if s == nil {
		return false
	}
	left := s.budget.TokensAt(f.now())
	if left >= float64(f.limit) {
		// The episode (logged once) ends when the budget is whole again,
		// not at the first refilled failure, so a steady guesser is
		// logged once, not every window/limit.
		s.blocked = false
	}
	return left < 1
}

// fail spends one failure of key's budget and reports whether key just
// became blocked (so the caller logs once per episode, not once per
// guess).
func (f *failLimiter) fail(key string) (nowBlocked bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	s := f.sources[key]
	if s == nil {
		if len(f.sources) >= maxFailSources {
			f.pruneLocked(now, true)
		}
		s = &failSource{budget: rate.NewLimiter(f.every(), f.limit)}
		f.sources[key] = s
	}
	s.budget.AllowN(now, 1)
	if s.budget.TokensAt(now) < 1 && !s.blocked {
		s.blocked = true
		return true
	}
	return false
}

// retryAfter is the time one failure takes to refill: what a blocked key
// is told to wait (Retry-After), in whole seconds, at least 1.
func (f *failLimiter) retryAfter() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return max(1, int(math.Ceil(f.window.Seconds()/float64(max(f.limit, 1)))))
}

// prune forgets keys whose budget has fully refilled.
func (f *failLimiter) prune() {
	f.mu.Lock()
	f.pruneLocked(f.now(), false)
	f.mu.Unlock()
}

func (f *failLimiter) pruneLocked(now time.Time, hard bool) {
	for key, s := range f.sources {
		if s.budget.TokensAt(now) >= float64(f.limit) || (hard && !s.blocked) {
			delete(f.sources, key)
		}
	}
}
