package gateway

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Overload control for new calls (issue: "past the knee the B2BUA must
// degrade gracefully: answer 503 early, keep the calls it admitted").
//
// What overload looks like here: every admitted INVITE becomes a server
// transaction (the fast path's over UDP, sipgo's over TCP) and a handler
// goroutine, and a call costs far more CPU than reading and refusing a
// datagram. When calls arrive faster than the CPU
// completes them, the handler goroutines queue behind each other, 100
// Trying goes out late, callers retransmit (T1 = 500 ms), and the
// retransmissions cost CPU too: the box collapses (half the calls failing
// one step above the knee, measured in bench/RESULTS.md) instead of
// carrying what it can.
//
// The signal is the queueing delay of admitted INVITEs: the time from the
// fast path's decision (the socket's read goroutine) to the INVITE
// handler's start, once the transaction is made and the scheduler ran the
// goroutine. It is near zero while the CPU keeps up, whatever the
// rate, and grows only when work queues. The rule is CoDel's (RFC 8289)
// applied to call setups: when the smallest delay seen during an interval
// (overloadInterval) is above the target (overloadTarget), the queue did
// not drain once in that interval: the interval was overloaded.
//
// What an overloaded interval does is the admission rate's business, as
// with TCP's congestion window (additive increase, multiplicative
// decrease): the next interval admits at most overloadDecrease per cent
// (half) of the new calls the last one admitted, and every new
// out-of-dialog INVITE over that quota gets a stateless 503 with
// Retry-After from the fast path, which costs a parse and a send.
// Intervals that stay overloaded keep the quota until overloadHold has
// passed since the cut (a cut shows in the delays only once the queue it
// found has drained), then cut again; an interval that was not overloaded
// and used at least half its quota raises it by an eighth (at least one
// call). After overloadCalm intervals in a row that refused nothing and
// took less than half their quota, or a silence of overloadSilence
// without a new call or a datagram, there is no quota.
//
// A pause is not demand. A pause of the whole process (a collection, the
// heap's pages faulted back in, the CPU quota's throttling) leaves one
// interval with few admissions and a long smallest delay. Halving those
// few cut a box carrying 1,400 calls/s under the 0.5-CPU cap to 30 calls/s;
// it refused thousands of INVITEs a second (mostly the callers'
// retransmissions of refused ones) at a fifth of its CPU, and a 200-ms
// pause read as a silence lifted the quota into a burst that did overload
// it: one run in five of that step failed (bench/RESULTS.md, issue 16
// item 1). So when the first overloaded interval after a time without a
// quota admitted less than half the pace (the setups the box finished per
// interval over the last second or so: an average with weight
// 1/overloadPaceIntervals), the quota starts at overloadFloor per cent
// (three quarters) of the pace instead. Only then: a floor on every cut
// (counted from the setups started, then from those finished) kept
// admitting, through item 3's flood of 10,000 INVITEs/s, what the box had
// carried before the refusals took its CPU: 5,400-28,000 of the flood's
// calls failed in each of five runs, against 0-13,900 for the old gate
// and 0-7,600 for this one on the same box (bench/RESULTS.md). Intervals
// whose calls the memory criterion refused are not calm: they lifted the
// quota as soon as the heap went down.
//
// The first gate shed every new call for the interval after an
// overloaded one, and so admitted every call in the interval after that:
// uncapped at 2,500 calls/s, a quarter above the knee, admission swung
// between all and nothing, the admitted bursts overflowed the socket and
// the box collapsed (three runs: 3,966-4,249 admitted calls failed,
// 24,000-27,000 datagrams dropped, 56-62 % of the calls failed); with the
// quota 0-596 admitted calls failed, 600-11,000 datagrams were dropped,
// 26-40 % failed, at two thirds of the CPU. A cut to three quarters held
// for 500 ms was tried first: better at 2,500/s (817-2,053 admitted calls
// failed), but through item 3's flood of 10,000 INVITEs/s it admitted too
// many: resident peaks 189-215 MB, median 200 MB; halving, held 300 ms:
// 179-202 MB, median 185 MB, and the flood's admitted calls no longer
// fail (bench/RESULTS.md, issue 16 items 1 and 3).
//
// That delay starts at the read, so it misses the queue before it: the
// socket's. Under a CPU quota the process is frozen for part of each
// period and the socket fills; when the reader itself falls behind, the
// INVITEs it reads have waited there already, and before the handler
// delay grew the kernel dropped datagrams (a 4 MiB buffer full), callers
// retransmitted, and 1,200 calls/s at a 0.5-CPU cap, the knee, failed
// 20-90 % (bench/RESULTS.md, issue 16 item 1) instead of a few per cent
// answered 503. So the UDP sockets report their sojourn time too: at
// each batch read, how long its oldest datagram had waited in the socket
// (kernel receive timestamps, gateway/listen). The same rule applies to
// it on its own: when the smallest sojourn of an interval is over its
// target (overloadSocketTarget), the socket never drained in it, and the
// box sheds. Kept apart from the INVITE delays, whose minimum a quick
// socket would otherwise hide (and the other way round). Its target is
// 200 ms, not 50: the reader takes up to 16 datagrams at a time and works
// through them before it reads again, so a slow box (the race detector
// under CI's parallel tests, at 100 calls/s) saw sojourns over 50 ms for
// whole intervals and shed calls it then carried; what must not happen is
// a queue near T1, when callers retransmit and the load doubles.
// Requests of admitted calls (ACK, BYE, re-INVITEs, retransmissions of an
// admitted INVITE) are never shed: the calls the box took, it keeps.
//
// Memory is the second reason to shed. Each admitted call leaves sipgo's
// finished transactions behind for a while (txretention.go: 2 s, down
// from RFC 3261/6026's 32 s, which made 6 KiB a call at 400 calls/s, 74
// MiB live, and 1.5 GiB resident in a flood the CPU could carry:
// bench/mem_bench.sh). While the live heap (as of the last collection) is
// over half of the process's memory limit (debug.SetMemoryLimit, which
// cmd/outpostd sets to min(half the RAM, 150 MiB), or GOMEMLIMIT), new
// calls are shed the same way; it falls as the transactions expire. With
// the default limit that is 75 MiB: an active call with its dialogs holds
// about 11 KiB once it is up (1000 calls up: 12.7 MiB live), a finished
// one about 12 KB while its transactions are kept (BenchmarkCall's
// live-B/call), so at 2,000 new 1 s calls a second (far more than a
// branch carries) the live heap stays under it; and the collector,
// holding the heap under the limit, keeps the resident size under 200 MB
// through a flood (peaks 180-188 MB in three runs). Two fifths (60 MiB)
// shed 2,000 calls/s uncapped and tipped those runs into collapse (3.5
// and 56.9 % failed, against 0.0 and 0.0 at half); three fifths let one
// flood peak at 206 MB (bench/RESULTS.md, issue 16 items 1 and 3).
// Without a limit (tests) the threshold is overloadHeapLive.
//
// Decision: the target is 50 ms, ten times a quiet box's delay and a
// tenth of T1 (a caller retransmits an INVITE that has no 100 Trying after
// 500 ms); the interval is 100 ms, CoDel's. Neither is configurable: they
// describe the box's CPU, not the site. Only INVITEs from a trusted trunk
// or with verified credentials are shed (an unauthenticated one gets its
// challenge as before), so the 503 goes to a source that would have been
// served, and is not limited per source like the refusals that protect
// forged ones (fastpath.Admit).
const (
	overloadTarget   = 50 * time.Millisecond
	overloadInterval = 100 * time.Millisecond
	// overloadSocketTarget is the sojourn target of the UDP sockets.
	overloadSocketTarget = 200 * time.Millisecond
	// overloadDecrease is the percentage of the last interval's
	// admissions the next may admit after an overloaded interval;
	// overloadIncrease the divisor of the quota's growth after one that
	// was not (an eighth: the quota doubles in about 0.6 s); overloadHold
	// how long a cut stands while the overload lasts (see above).
	overloadDecrease = 50
	overloadIncrease = 8
	overloadHold     = 300 * time.Millisecond
	// overloadFloor is the percentage of the pace a pause's cut keeps;
	// overloadPaceIntervals the pace's averaging weight (1/8: about the
	// last second); overloadCalm how many intervals under half the quota
	// lift it; overloadSilence how long without a sample or a new call
	// lifts it at once (shorter gaps are pauses of the process, or of the
	// load, and count as one interval).
	overloadFloor         = 75
	overloadPaceIntervals = 8
	overloadCalm          = 5
	overloadSilence       = time.Second
	// overloadRetryAfter is the Retry-After of the 503, in seconds: long
	// enough for a trunk to spread its next attempts, short enough that a
	// phone's user retrying by hand finds the box serving again.
	overloadRetryAfter = "1"
	// overloadHeapLive is the live-heap threshold when the process has no
	// memory limit; with one, half of it (see above).
	overloadHeapLive = 64 << 20
	// overloadHeapEvery is how often shedding reads the live heap (a
	// runtime/metrics read): it changes only at the end of a collection.
	overloadHeapEvery = 10 * time.Millisecond
)

// overloadGate decides whether new calls are shed (see above).
type overloadGate struct {
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

	// New INVITEs answered 503, by reason.
	refusedQueue, refusedMemory atomic.Uint64
}

func newOverloadGate() *overloadGate {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	live := func() uint64 {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return sample[0].Value.Uint64()
	}
	return &overloadGate{target: overloadTarget, socketTarget: overloadSocketTarget, interval: overloadInterval, now: time.Now, min: -1, smin: -1,
		heapLimit: heapThreshold(debug.SetMemoryLimit(-1)), heapLive: live}
}

// heapThreshold is the live heap above which new calls are shed for a
// process memory limit (math.MaxInt64: none).
func heapThreshold(limit int64) uint64 {
	if limit <= 0 || limit >= 1<<50 {
		return overloadHeapLive
	}
	return uint64(limit) / 2
}

// roll ends the intervals that are over at now and sets the next one's
// quota (see above); g.mu is held.
func (g *overloadGate) roll(now time.Time) {
	if g.start.IsZero() {
		g.start = now
		return
	}
	elapsed := now.Sub(g.start)
	if elapsed < g.interval {
		return
	}
	over := g.min > g.target || g.smin > g.socketTarget
	g.pace += (float64(g.finished) - g.pace) / overloadPaceIntervals
	switch {
	case elapsed >= overloadSilence:
		g.limited, g.pace = false, 0
	case over && g.limited && now.Before(g.hold):
		// the last cut has not shown in the delays yet
	case over:
		base := g.taken
		if g.limited {
			base = min(base, g.quota)
		}
		quota := base * overloadDecrease / 100
		if !g.limited && float64(g.taken) < g.pace/2 {
			quota = max(quota, int(g.pace*overloadFloor/100)) // a pause
		}
		g.limited, g.quota, g.hold, g.calm = true, quota, now.Add(overloadHold), 0
	case !g.limited:
		// no quota to grow or lift
	case g.refused == 0 && g.taken < g.quota/2:
		g.calm++
		if g.calm >= overloadCalm {
			g.limited = false // demand has stayed well under the quota
		}
	case g.taken >= g.quota/2:
		g.calm = 0
		g.quota += max(g.quota/overloadIncrease, 1)
	default:
		g.calm = 0 // the heap refused what the quota would have taken
	}
	g.start, g.min, g.smin, g.taken, g.finished, g.refused = now, -1, -1, 0, 0, 0
}

// observe records the queueing delay of one admitted INVITE.
func (g *overloadGate) observe(delay time.Duration) { g.sample(&g.min, delay) }

// finish records the end of an admitted call's setup (its INVITE
// handler returned: answered, or failed).
func (g *overloadGate) finish() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.roll(g.now())
	g.finished++
}

// observeSocket records the sojourn time of a UDP socket's queue at a read
// (listen.Options.Sojourn).
func (g *overloadGate) observeSocket(sojourn time.Duration) { g.sample(&g.smin, sojourn) }

// sample lowers the interval's minimum *min to d; min is a field of g.
func (g *overloadGate) sample(min *time.Duration, d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.roll(g.now())
	if *min < 0 || d < *min {
		*min = d
	}
}

// shedding reports whether a new call would be refused now: the
// interval's quota is used up, or the live heap is over the limit.
func (g *overloadGate) shedding() (queue, memory bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.verdict()
}

// verdict is shedding's; g.mu is held.
func (g *overloadGate) verdict() (queue, memory bool) {
	now := g.now()
	g.roll(now)
	if g.limited && g.taken >= g.quota {
		return true, false
	}
	if now.Sub(g.heapAt) >= overloadHeapEvery || now.Before(g.heapAt) {
		g.heapOvr, g.heapAt = g.heapLive() > g.heapLimit, now
	}
	return false, g.heapOvr
}

// refuseNew reports whether a new call is to be refused now and counts
// the refusal by its reason, or the admission against the quota.
func (g *overloadGate) refuseNew() bool {
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
