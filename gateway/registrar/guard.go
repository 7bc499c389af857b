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

// failLimiter counts failed authentications per key with a leaky budget of
// limit failures per window. The registrar keeps two: one keyed by source
// IP and user name (wrong passwords for a real user), one keyed by source IP
// alone (unknown users, user names that are not the AOR). A key that has
// spent its budget is "blocked": its further failures are answered 503 with
// Retry-After instead of 401/403, and are not logged one by one. Blocking
// never stops credentials from being checked: what verifies is accepted
// (see the package doc for why).
type failLimiter struct {
	mu      sync.Mutex
	limit   float64
	window  time.Duration
	now     func() time.Time
	sources map[string]*failSource
}

type failSource struct {
	spent   float64 // failures not yet refilled
	last    time.Time
	blocked bool // logged as blocked, reset when it refills
}

// maxFailSources bounds the table against spoofed-source floods; beyond it
// the oldest-looking entries are pruned early.
const maxFailSources = 65536

func newFailLimiter(limit int, window time.Duration, now func() time.Time) *failLimiter {
	return &failLimiter{limit: float64(limit), window: window, now: now, sources: map[string]*failSource{}}
}

func (f *failLimiter) setLimit(limit int) {
	f.mu.Lock()
	f.limit = float64(limit)
	f.mu.Unlock()
}

func (f *failLimiter) refill(s *failSource, now time.Time) {
	el := now.Sub(s.last)
	if el <= 0 {
		return
	}
	s.spent = math.Max(0, s.spent-f.limit*el.Seconds()/f.window.Seconds())
	s.last = now
}

// blocked reports whether key has no failures left to spend.
func (f *failLimiter) blocked(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sources[key]
	if s == nil {
		return false
	}
	f.refill(s, f.now())
	if s.spent < f.limit {
		// The episode (logged once) ends when the budget is whole again,
		// not at the first refilled failure, so a steady guesser is
		// logged once, not every window/limit.
		if s.spent == 0 {
			s.blocked = false
		}
		return false
	}
	return true
}

// fail records a failure and reports whether key just became blocked
// (so the caller logs once per episode, not once per guess). The spent
// budget never exceeds the limit, so a key is unblocked at most one
// refill step (window/limit) after its last failure.
func (f *failLimiter) fail(key string) (nowBlocked bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	s := f.sources[key]
	if s == nil {
		if len(f.sources) >= maxFailSources {
			f.pruneLocked(now, true)
		}
		s = &failSource{last: now}
		f.sources[key] = s
	}
	f.refill(s, now)
	s.spent = math.Min(s.spent+1, f.limit)
	if s.spent >= f.limit && !s.blocked {
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
	return max(1, int(math.Ceil(f.window.Seconds()/max(f.limit, 1))))
}

// prune forgets keys whose budget has fully refilled.
func (f *failLimiter) prune() {
	f.mu.Lock()
	f.pruneLocked(f.now(), false)
	f.mu.Unlock()
}

func (f *failLimiter) pruneLocked(now time.Time, hard bool) {
	for key, s := range f.sources {
		f.refill(s, now)
		if s.spent == 0 || (hard && !s.blocked) {
			delete(f.sources, key)
		}
	}
}
