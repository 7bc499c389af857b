package overload

import (
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/siptest"
)

// testGate is a gate on a fake clock whose live heap is what *heap says.
func testGate() (*Gate, *siptest.Clock, *atomic.Uint64) {
	c := siptest.NewClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	g := New()
	g.now = c.Now
	var heap atomic.Uint64
	g.heapLive = heap.Load
	return g, c, &heap
}

// interval records samples spread over the gate's current interval and
// moves the clock to its end.
func interval(g *Gate, c *siptest.Clock, record func(time.Duration), samples ...time.Duration) {
	for _, d := range samples {
		record(d)
		c.Advance(g.interval / time.Duration(len(samples)+1))
	}
	c.Set(g.start.Add(g.interval))
}

// admitting calls RefuseNew n times and returns how many it admitted.
func admitting(g *Gate, n int) int {
	admitted := 0
	for range n {
		if !g.RefuseNew() {
			admitted++
		}
	}
	return admitted
}

// gateStep is one interval of g: offered new calls, each admitted one
// followed by its setup delay and the end of its setup; it returns how
// many were admitted.
func gateStep(g *Gate, c *siptest.Clock, offered int, delay time.Duration) int {
	return gateStepFinishing(g, c, offered, delay, offered)
}

// gateStepFinishing is gateStep with at most finishing setups ended in the
// interval.
func gateStepFinishing(g *Gate, c *siptest.Clock, offered int, delay time.Duration, finishing int) int {
	n := 0
	interval(g, c, func(time.Duration) {
		if !g.RefuseNew() {
			n++
			g.Observe(delay)
			if n <= finishing {
				g.Finish()
			}
		}
	}, slices.Repeat([]time.Duration{delay}, offered)...)
	return n
}

// pace is the gate's pace after intervals that finished these many setups
// (an average with weight 1/paceIntervals, from 0).
func pace(finished ...int) float64 {
	p := 0.0
	for _, n := range finished {
		p += (float64(n) - p) / paceIntervals
	}
	return p
}

// After an interval whose smallest delay was over the target, the next
// admits decreasePct per cent of the calls the last one admitted
// (it admitted more than half the pace: demand, not a pause) and refuses
// the rest; while the overload lasts the cut stands until holdFor has
// passed, then is cut again; quick intervals that use the quota raise it
// by an eighth; calmIntervals intervals of demand under half the quota lift
// it.
func TestOverloadGate(t *testing.T) {
	g, c, _ := testGate()
	step := func(offered int, delay time.Duration) int { return gateStep(g, c, offered, delay) }
	slow, quick := time.Second, time.Millisecond
	if n := step(200, quick); n != 200 {
		t.Fatalf("a new gate admitted %d of 200", n)
	}
	if n := step(200, slow); n != 200 {
		t.Fatalf("the first slow interval admitted %d of 200; the verdict is for the next", n)
	}
	cut := 200 * decreasePct / 100
	if n := step(200, slow); n != cut {
		t.Fatalf("after a slow interval of 200 admissions: %d admitted, want %d", n, cut)
	}
	if q := g.refusedQueue.Load(); q != uint64(200-cut) {
		t.Fatalf("refusals counted: %d, want %d", q, 200-cut)
	}
	for range holdFor/g.interval - 1 {
		if n := step(200, slow); n != cut {
			t.Fatalf("within holdFor of the cut: %d admitted, want %d", n, cut)
		}
	}
	cut2 := cut * decreasePct / 100
	if n := step(200, quick); n != cut2 {
		t.Fatalf("after the hold, slow again: %d admitted, want %d", n, cut2)
	}
	grown := cut2 + cut2/increaseDiv
	if n := step(200, quick); n != grown {
		t.Fatalf("after a quick interval: %d admitted, want %d", n, grown)
	}
	few := grown/2 - 1
	for i := range calmIntervals {
		if step(few, quick) != few {
			t.Fatalf("fewer calls than the quota were not all admitted")
		}
		g.mu.Lock()
		g.roll(g.now())
		limited := g.limited
		g.mu.Unlock()
		if i < calmIntervals-1 && !limited {
			t.Fatalf("the quota lifted after %d intervals under half of it, want %d", i+1, calmIntervals)
		}
	}
	if n := step(300, quick); n != 300 {
		t.Fatalf("%d intervals of demand under half the quota did not lift it: %d of 300 admitted", calmIntervals, n)
	}
}

// A pause of the process (one interval with few admissions and a long
// delay, then a gap without samples) cuts the quota only to the floor,
// three quarters of the pace, and the gap does not lift it; a silence of
// silence does. A second pause while the quota stands is an
// overload like any other: it halves what the interval admitted.
func TestOverloadGatePause(t *testing.T) {
	g, c, _ := testGate()
	step := func(offered int, delay time.Duration) int { return gateStep(g, c, offered, delay) }
	quick, slow := time.Millisecond, 96*time.Millisecond
	var finished []int
	for range 40 {
		step(200, quick)
		finished = append(finished, 200)
	}
	step(6, slow) // the pause: 6 calls in the interval, each waited
	finished = append(finished, 6)
	floor := int(pace(finished...) * pauseFloorPct / 100)
	if floor <= 6 {
		t.Fatalf("test set-up: floor %d", floor)
	}
	if n := step(200, quick); n != floor {
		t.Fatalf("after a pause: %d of 200 admitted, want the floor %d (3/4 of the pace)", n, floor)
	}
	c.Advance(3 * g.interval) // a gap: the process was frozen, nothing read
	if n := step(200, quick); n >= 200 {
		t.Fatal("a 300-ms gap lifted the quota")
	}
	c.Advance(holdFor)
	step(6, slow)
	if n := step(200, quick); n != 3 {
		t.Fatalf("a pause while limited: %d admitted, want 3", n)
	}
	c.Advance(silence)
	if n := admitting(g, 500); n != 500 {
		t.Fatalf("after a silence: %d of 500 admitted", n)
	}
}

// A cut to nothing (no pace, nothing admitted in the overloaded interval)
// is climbed back one call at a time.
func TestOverloadGateFromNothing(t *testing.T) {
	g, c, _ := testGate()
	g.Observe(time.Second) // a setup admitted before the gate's first interval, slow
	c.Set(g.start.Add(g.interval))
	if n := gateStep(g, c, 5, time.Millisecond); n != 0 {
		t.Fatalf("after an overloaded interval without admissions: %d admitted, want 0", n)
	}
	if n := gateStep(g, c, 5, time.Millisecond); n != 1 {
		t.Fatalf("after a quiet interval at quota 0: %d admitted, want 1", n)
	}
}

// The socket's sojourn times count the same way, on their own: an
// interval whose smallest sojourn was over the target is overloaded; one
// quick read among slow ones is not; quick INVITE setups do not hide a
// full socket.
func TestOverloadGateSocket(t *testing.T) {
	g, c, _ := testGate()
	step := func(sojourns ...time.Duration) {
		interval(g, c, func(d time.Duration) {
			g.ObserveSocket(d)
			g.Observe(time.Millisecond) // handlers keep up
			g.RefuseNew()
		}, sojourns...)
	}
	shedding := func() bool { q, m := g.Shedding(); return q || m }
	over := g.socketTarget + time.Millisecond
	step(g.target+time.Millisecond, g.target*2) // over the INVITEs' target, under the socket's
	if shedding() {
		t.Fatal("sojourns under the socket's target: shedding")
	}
	step(time.Second, 2*time.Millisecond)
	if shedding() {
		t.Fatal("the socket drained once: shedding")
	}
	step(time.Second, 2*over, over, over)
	if n, want := admitting(g, 4), 4*decreasePct/100; n != want {
		t.Fatalf("every sojourn over the target, 4 admitted: the next interval admitted %d, want %d", n, want)
	}
	if q, _ := g.Shedding(); !q {
		t.Fatal("a full socket is not counted as a queue")
	}
}

// While the live heap is over the limit, new calls are shed whatever the
// delays; the heap is read again at most every heapEvery.
func TestOverloadGateMemory(t *testing.T) {
	g, c, heap := testGate()
	shedding := g.RefuseNew
	heap.Store(defaultHeapLimit + 1)
	if !shedding() {
		t.Fatal("heap over the limit: not shedding")
	}
	heap.Store(defaultHeapLimit / 2)
	if !shedding() {
		t.Fatal("heap read again before heapEvery")
	}
	c.Advance(heapEvery)
	if shedding() {
		t.Fatal("heap back under the limit: still shedding")
	}
	if q, m := g.refusedQueue.Load(), g.refusedMemory.Load(); q != 0 || m != 2 {
		t.Fatalf("refusals counted queue %d, memory %d; want 0, 2", q, m)
	}
}

func TestHeapThreshold(t *testing.T) {
	for _, tc := range []struct {
		limit int64
		want  uint64
	}{
		{150 << 20, 75 << 20}, // outpostd's default cap
		{1 << 30, 1 << 29},
		{math.MaxInt64, defaultHeapLimit}, // no limit
	} {
		if got := heapThreshold(tc.limit); got != tc.want {
			t.Errorf("heapThreshold(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
}

// A flood: every interval overloaded, each admitting what it may, the box
// finishing few of the setups. The quota keeps halving at each hold, down
// from the first interval's admissions: the floor follows the setups
// finished, not those admitted.
func TestOverloadGateFlood(t *testing.T) {
	g, c, _ := testGate()
	slow := time.Second
	want := 1000
	if n := gateStepFinishing(g, c, 1000, slow, 20); n != want {
		t.Fatalf("first flood interval: %d admitted, want %d", n, want)
	}
	for cut := range 4 {
		want = want * decreasePct / 100
		for i := range holdFor / g.interval {
			if n := gateStepFinishing(g, c, 1000, slow, 20); n != want {
				t.Fatalf("cut %d, interval %d: %d admitted, want %d", cut+1, i+1, n, want)
			}
		}
	}
}

// Intervals in which the heap refused calls are not calm, however few the
// quota took: the quota stands until the refusals stop.
func TestOverloadGateMemoryNotCalm(t *testing.T) {
	g, c, heap := testGate()
	gateStep(g, c, 200, time.Second)
	if n := gateStep(g, c, 200, time.Second); n != 100 {
		t.Fatalf("after an overloaded interval: %d admitted, want 100", n)
	}
	heap.Store(defaultHeapLimit + 1)
	for range 2 * calmIntervals {
		if n := gateStep(g, c, 200, time.Millisecond); n != 0 {
			t.Fatalf("heap over the limit: %d admitted", n)
		}
	}
	heap.Store(0)
	c.Advance(heapEvery)
	if n := gateStep(g, c, 200, time.Millisecond); n >= 200 {
		t.Fatalf("the heap's refusals lifted the quota: %d of 200 admitted", n)
	}
}
