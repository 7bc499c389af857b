package registrar

import (
	"math"
	"sync"
	"time"
)

// tokenBucket admits events at rate per second with the given burst.
type tokenBucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
}

func newTokenBucket(rate, burst float64, now func() time.Time) *tokenBucket {
	return &tokenBucket{rate: rate, burst: burst, tokens: burst, last: now(), now: now}
}

func (b *tokenBucket) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(b.burst, b.tokens+el*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// failLimiter counts failed authentications per source IP with a leaky
// budget of limit failures per window. A source that has spent its budget
// is "blocked": its credentials are not even checked until the budget
// refills, so a guesser gets limit tries per window whatever its speed.
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

// blocked reports whether ip has no failures left to spend.
func (f *failLimiter) blocked(ip string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sources[ip]
	if s == nil {
		return false
	}
	f.refill(s, f.now())
	if s.spent < f.limit {
		s.blocked = false
		return false
	}
	return true
}

// fail records a failure and reports whether ip just became blocked
// (so the caller logs once per episode, not once per guess).
func (f *failLimiter) fail(ip string) (nowBlocked bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	s := f.sources[ip]
	if s == nil {
		if len(f.sources) >= maxFailSources {
			f.pruneLocked(now, true)
		}
		s = &failSource{last: now}
		f.sources[ip] = s
	}
	f.refill(s, now)
	s.spent++
	if s.spent >= f.limit && !s.blocked {
		s.blocked = true
		return true
	}
	return false
}

// prune forgets sources whose budget has fully refilled.
func (f *failLimiter) prune() {
	f.mu.Lock()
	f.pruneLocked(f.now(), false)
	f.mu.Unlock()
}

func (f *failLimiter) pruneLocked(now time.Time, hard bool) {
	for ip, s := range f.sources {
		f.refill(s, now)
		if s.spent == 0 || (hard && !s.blocked) {
			delete(f.sources, ip)
		}
	}
}
