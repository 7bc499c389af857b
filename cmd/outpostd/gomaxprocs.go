package main

import (
	"os"
	"runtime"
)

// fitGOMAXPROCS runs the scheduler on one thread when the box (or the
// container) grants less than one CPU. Go never goes below two threads on
// its own, and with a fractional quota two threads spend the whole quota in
// the first half of each period and then stall together: measured at a
// 0.5-CPU cap, the registrar's median latency went from 4 ms to 208 ms at
// 11,000 registrations/s (bench/RESULTS.md). GOMAXPROCS in the environment
// still wins. It returns the value in effect.
func fitGOMAXPROCS(limit float64) int {
	if os.Getenv("GOMAXPROCS") == "" && limit > 0 && limit <= 1 {
		runtime.GOMAXPROCS(1)
	}
	return runtime.GOMAXPROCS(0)
}
