package main

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"time"
)

// The collector's pace while the box is busy (issue 16, item 1).
//
// A quiet box runs at GOGC=100 (Go's default): a collection each time the
// heap has doubled since the last one. It was 200 (tripled) until item 3's
// steady state, 1000 bindings and 100 calls up, sat at its 40 MB line; at
// 100 it is 3 MB lower (35.8 against 38.8 MB, bench/mem_bench.sh), for
// collector work a quiet box does not notice. Under a call load the live
// heap is mostly calls in progress and transactions kept for
// retransmissions (45 MiB at 1,000 calls/s held 1 s, bench/RESULTS.md), so
// its goal sits near the memory limit (memlimit.go) anyway, and the
// collector marked that heap more than once a second: a quarter of the CPU
// a call under half a CPU. While the box allocates fast (a call or
// registration load, a flood), GOGC goes up to gcBusyPercent and the
// memory limit paces the collector instead: it runs when the heap nears
// the limit, which the box may use since admission (gateway/overload.go)
// keeps the live heap under half of it. When the box has been quiet for
// gcHoldWindows, GOGC is back to 100, so a quiet branch's heap (and item
// 3's 40 MB with 1000 bindings and 100 calls) is paced as before, and the
// trimmer (memtrim.go) returns the busy period's pages.
//
// Only when outpostd chose both knobs: GOGC in the environment wins, and
// without a memory limit nothing would bound a heap paced by GOGC=800.
const (
	gcQuietPercent = 100
	gcBusyPercent  = 800
	gcPaceWindow   = time.Second
	// gcBusyBytes allocated in a window is busy: about 350 calls or 3,000
	// registrations a second, far above a branch's traffic.
	gcBusyBytes = 16 << 20
	// gcHoldWindows quiet windows end a busy period: GOGC stays up
	// through the lulls of a load, as the pages stay (memtrim.go says
	// why): back at 100, the heap's goal would shrink at once and the
	// runtime's scavenger start returning them.
	gcHoldWindows = 20
)

// gcPacer decides, window by window, the GOGC in force.
type gcPacer struct {
	busy bool
	hold int // quiet windows left before the busy period ends
}

// window takes the bytes allocated during one window and returns the
// GOGC percent for the next, and whether it changed.
func (p *gcPacer) window(allocated uint64) (percent int, changed bool) {
	if allocated >= gcBusyBytes {
		p.hold = gcHoldWindows
	} else if p.hold > 0 {
		p.hold--
	}
	busy := p.hold > 0
	changed, p.busy = busy != p.busy, busy
	if busy {
		return gcBusyPercent, changed
	}
	return gcQuietPercent, changed
}

// pacesGC reports whether outpostd paces the collector: GOGC is not set
// in the environment and a memory limit is in force.
func pacesGC() bool {
	return os.Getenv("GOGC") == "" && debug.SetMemoryLimit(-1) != math.MaxInt64
}

// paceGC runs the pacer until ctx ends, and leaves GOGC at its quiet value.
func paceGC(ctx context.Context) {
	defer debug.SetGCPercent(gcQuietPercent)
	var p gcPacer
	perWindow(ctx, gcPaceWindow, func(allocated uint64) {
		if percent, changed := p.window(allocated); changed {
			debug.SetGCPercent(percent)
		}
	})
}
