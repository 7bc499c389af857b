package overload

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// delayTarget is the INVITEs' queueing delay target, Interval the
	// interval of the rule (see the package doc).
	delayTarget = 50 * time.Millisecond
	Interval    = 100 * time.Millisecond
	// sojournTarget is the sojourn target of the UDP sockets.
	sojournTarget = 200 * time.Millisecond
	// decreasePct is the percentage of the last interval's
	// admissions the next may admit after an overloaded interval;
	// increaseDiv the divisor of the quota's growth after one that
	// was not (an eighth: the quota doubles in about 0.6 s); holdFor
	// how long a cut stands while the overload lasts (see the package doc).
	decreasePct = 50
	increaseDiv = 8
	holdFor     = 300 * time.Millisecond
	// pauseFloorPct is the percentage of the pace a pause's cut keeps;
	// paceIntervals the pace's averaging weight (1/8: about the
	// last second); calmIntervals how many intervals under half the quota
	// lift it; silence how long without a sample or a new call
	// lifts it at once (shorter gaps are pauses of the process, or of the
	// load, and count as one interval).
	pauseFloorPct = 75
	paceIntervals = 8
	calmIntervals = 5
	silence       = time.Second
	// RetryAfter is the Retry-After of the 503, in seconds: long
	// enough for a trunk to spread its next attempts, short enough that a
	// phone's user retrying by hand finds the box serving again.
	RetryAfter = "1"
	// defaultHeapLimit is the live-heap threshold when the process has no
	// memory limit; with one, half of it (see the package doc).
	defaultHeapLimit = 64 << 20
	// heapEvery is how often shedding reads the live heap (a
	// runtime/metrics read): it changes only at the end of a collection.
	heapEvery = 10 * time.Millisecond
)

// Gate decides whether new calls are shed (see the package doc). It is
// safe for concurrent use.
type Gate struct {
	target, interval time.Duration
	socketTarget     time.Duration
	now              func() time.Time
	heapLimit        uint64        // live heap bytes above which calls are shed
	heapLive         func() uint64 // the live heap as of the last collection

	mu    sync.Mutex
	start time.Time     // of the current interval
	min   time.Duration // smallest delay seen in it; -1 = none
	smin  time.Duration // smallest socket sojourn seen in it; -1 = none
	// While limited (the box is or was lately overloaded), an interval
	// admits at most quota new calls; taken counts the current interval's
	// admissions.
	limited      bool
	quota, taken int
	// finished counts the current interval's admitted calls whose setup
	// ended (finish), refused its refusals; pace is finished's average
	// over the last intervals.
	finished, refused int
	pace              float64
	calm              int       // intervals in a row under half the quota
	hold              time.Time // no further cut before
	heapAt            time.Time // when heapOver was read
	heapOvr           bool      // the live heap was over heapLimit then

	// New INVITEs answered 503, by reason; delays observed.
	refusedQueue, refusedMemory atomic.Uint64
	observed                    atomic.Uint64
}

// New is a gate on the process's clock and live heap.
func New() *Gate {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	live := func() uint64 {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return sample[0].Value.Uint64()
	}
	return NewWith(time.Now, live)
}

// NewWith is a gate on another clock and heap reading (tests).
func NewWith(now func() time.Time, heapLive func() uint64) *Gate {
	return &Gate{target: delayTarget, socketTarget: sojournTarget, interval: Interval, now: now, min: -1, smin: -1,
		heapLimit: heapThreshold(debug.SetMemoryLimit(-1)), heapLive: heapLive}
}

// SetHeapLimit sets the live heap above which new calls are shed, for a
// benchmark that measures past it.
func (g *Gate) SetHeapLimit(bytes uint64) {
	g.mu.Lock()
	g.heapLimit = bytes
	g.mu.Unlock()
}

// Refused counts the new calls refused: while setups queued, and while
// the heap was full.
func (g *Gate) Refused() (queue, memory uint64) { return g.refusedQueue.Load(), g.refusedMemory.Load() }

// Observed counts the queueing delays observed.
func (g *Gate) Observed() uint64 { return g.observed.Load() }

// heapThreshold is the live heap above which new calls are shed for a
// process memory limit (math.MaxInt64: none).
func heapThreshold(limit int64) uint64 {
	if limit <= 0 || limit >= 1<<50 {
		return defaultHeapLimit
	}
	return uint64(limit) / 2
}

// roll ends the intervals that are over at now and sets the next one's
// quota (see the package doc); g.mu is held.
func (g *Gate) roll(now time.Time) {
	if g.start.IsZero() {
		g.start = now
		return
	}
	elapsed := now.Sub(g.start)
	if elapsed < g.interval {
		return
	}
	over := g.min > g.target || g.smin > g.socketTarget
	g.pace += (float64(g.finished) - g.pace) / paceIntervals
	switch {
	case elapsed >= silence:
		g.limited, g.pace = false, 0
	case over && g.limited && now.Before(g.hold):
		// the last cut has not shown in the delays yet
	case over:
		base := g.taken
		if g.limited {
			base = min(base, g.quota)
		}
		quota := base * decreasePct / 100
		if !g.limited && float64(g.taken) < g.pace/2 {
			quota = max(quota, int(g.pace*pauseFloorPct/100)) // a pause
		}
		g.limited, g.quota, g.hold, g.calm = true, quota, now.Add(holdFor), 0
	case !g.limited:
		// no quota to grow or lift
	case g.refused == 0 && g.taken < g.quota/2:
		g.calm++
		if g.calm >= calmIntervals {
			g.limited = false // demand has stayed well under the quota
		}
	case g.taken >= g.quota/2:
		g.calm = 0
		g.quota += max(g.quota/increaseDiv, 1)
	default:
		g.calm = 0 // the heap refused what the quota would have taken
	}
	g.start, g.min, g.smin, g.taken, g.finished, g.refused = now, -1, -1, 0, 0, 0
}

// Observe records the queueing delay of one admitted INVITE.
func (g *Gate) Observe(delay time.Duration) {
	g.observed.Add(1)
	g.sample(&g.min, delay)
}

// Finish records the end of an admitted call's setup (its INVITE
// handler returned: answered, or failed).
func (g *Gate) Finish() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.roll(g.now())
	g.finished++
}

// ObserveSocket records the sojourn time of a UDP socket's queue at a read
// (listen.Options.Sojourn).
func (g *Gate) ObserveSocket(sojourn time.Duration) { g.sample(&g.smin, sojourn) }

// sample lowers the interval's minimum *min to d; min is a field of g.
func (g *Gate) sample(min *time.Duration, d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.roll(g.now())
	if *min < 0 || d < *min {
		*min = d
	}
}

// Shedding reports whether a new call would be refused now: the
// interval's quota is used up, or the live heap is over the limit.
func (g *Gate) Shedding() (queue, memory bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.verdict()
}

// verdict is Shedding's; g.mu is held.
func (g *Gate) verdict() (queue, memory bool) {
	now := g.now()
	g.roll(now)
	if g.limited && g.taken >= g.quota {
		return true, false
	}
	if now.Sub(g.heapAt) >= heapEvery || now.Before(g.heapAt) {
		g.heapOvr, g.heapAt = g.heapLive() > g.heapLimit, now
	}
	return false, g.heapOvr
}

// RefuseNew reports whether a new call is to be refused now and counts
// the refusal by its reason, or the admission against the quota.
func (g *Gate) RefuseNew() bool {
	g.mu.Lock()
	queue, memory := g.verdict()
	if !queue && !memory {
		g.taken++
	} else {
		g.refused++
	}
	g.mu.Unlock()
	switch {
	case queue:
		g.refusedQueue.Add(1)
	case memory:
		g.refusedMemory.Add(1)
	}
	return queue || memory
}
