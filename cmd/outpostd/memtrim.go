package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Memory back to the system after a burst (issue 16, item 3: after a 10 s
// INVITE flood RSS must be back under 60 MB within 60 s).
//
// Why the runtime alone does not: the collector runs when the heap reaches
// its goal (GOGC=100 quiet: twice the live heap), and a box that goes quiet
// after a flood allocates too little to reach it, so the garbage of the
// flood (and sipgo's finished transactions, freed after 2 s) stays mapped
// until the forced collection two minutes later, and the scavenger then
// returns it gradually. Measured: 80 MiB still resident 90 s after a 2 s
// flood (bench/mem_bench.sh).
//
// The rule: every trimWindow, the bytes allocated during it say whether the
// box was busy (at least trimBusyBytes, 4 MiB/s: a flood or a load test,
// not a branch's normal traffic). Once the box has been quiet for
// trimFirst windows after a busy one, and again at trimAgain (past the
// flood's callers' retransmissions, which go on for Timer B, 32 s, and
// are refused), debug.FreeOSMemory collects and returns every free page.
// A quiet box never pays for it; a busy one is never interrupted by it.
//
// Why wait 20 s and not trim at the first quiet window (5 s), as it did
// first: a burst is often followed by another (the next wave of a busy
// hour, the next step of a load test), and the pages returned in between
// are faulted in again at its start, when the box is at its busiest: the
// heap's growth back to its limit took 32,000 page faults in the first
// 3 s of a 1,000 calls/s step, a third of that step's CPU under a
// 0.5-CPU quota on the benchmark machine (11 µs a fault in its VM;
// bench/RESULTS.md, issue 16 item 1). The flood of item 3 still has its
// memory back within 60 s of its end.
const (
	trimWindow    = 5 * time.Second
	trimBusyBytes = 20 << 20 // per window
	trimFirst     = 4        // quiet windows: 20 s
	trimAgain     = 9        // quiet windows: 45 s
)

// memTrimmer decides, window by window, when to return memory.
type memTrimmer struct {
	quiet int // quiet windows since the last busy one; -1 = nothing to trim
}

// window takes the bytes allocated during one window and reports whether
// to trim now.
func (m *memTrimmer) window(allocated uint64) bool {
	if allocated >= trimBusyBytes {
		m.quiet = 0
		return false
	}
	if m.quiet < 0 {
		return false
	}
	m.quiet++
	trim := m.quiet == trimFirst || m.quiet == trimAgain
	if m.quiet >= trimAgain {
		m.quiet = -1
	}
	return trim
}

// trimMemory runs the trimmer until ctx ends.
func trimMemory(ctx context.Context) {
	m := memTrimmer{quiet: -1}
	perWindow(ctx, trimWindow, func(allocated uint64) {
		if m.window(allocated) {
			debug.FreeOSMemory()
		}
	})
}

// perWindow calls f with the bytes allocated on the heap during each
// window of d, until ctx ends.
func perWindow(ctx context.Context, d time.Duration, f func(allocated uint64)) {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocs := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	t := time.NewTicker(d)
	defer t.Stop()
	last := allocs()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := allocs()
			f(now - last)
			last = now
		}
	}
}
