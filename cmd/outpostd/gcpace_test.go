package main

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// A busy window raises GOGC for the next ones; it comes back down after
// gcHoldWindows quiet windows in a row, and a busy window among them
// starts the count again. A change is reported only when the percent
// changes.
func TestGCPacer(t *testing.T) {
	const busy, quiet = gcBusyBytes, gcBusyBytes - 1
	var p gcPacer
	type step struct {
		percent int
		changed bool
	}
	windows := []uint64{quiet, busy, busy}
	want := []step{{gcQuietPercent, false}, {gcBusyPercent, true}, {gcBusyPercent, false}}
	for range gcHoldWindows - 1 { // a lull shorter than the hold
		windows, want = append(windows, 0), append(want, step{gcBusyPercent, false})
	}
	windows, want = append(windows, busy), append(want, step{gcBusyPercent, false})
	for range gcHoldWindows - 1 {
		windows, want = append(windows, quiet), append(want, step{gcBusyPercent, false})
	}
	windows, want = append(windows, quiet, quiet, busy), append(want, step{gcQuietPercent, true}, step{gcQuietPercent, false}, step{gcBusyPercent, true})
	for i, a := range windows {
		percent, changed := p.window(a)
		if (step{percent, changed}) != want[i] {
			t.Fatalf("window %d (%d bytes): percent %d changed %v, want %+v", i, a, percent, changed, want[i])
		}
	}
}

// The pacer acts only when outpostd set both knobs itself.
func TestPacesGC(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv("GOGC", "")
	debug.SetMemoryLimit(150 << 20)
	if !pacesGC() {
		t.Error("GOGC unset and a memory limit: not paced")
	}
	debug.SetMemoryLimit(math.MaxInt64)
	if pacesGC() {
		t.Error("no memory limit: paced")
	}
	debug.SetMemoryLimit(150 << 20)
	t.Setenv("GOGC", "100")
	if pacesGC() {
		t.Error("GOGC in the environment: paced")
	}
}

// Under an allocation load paceGC raises GOGC, and it leaves it at its
// quiet value when stopped.
func TestPaceGCFollowsAllocation(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(gcQuietPercent))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); paceGC(ctx) }()
	var sink [][]byte
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for range 64 {
			sink = append(sink[:0], make([]byte, 64<<10)) // 4 MiB a round
		}
		if gogc() == gcBusyPercent {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = sink
	got := gogc()
	cancel()
	<-done
	if got != gcBusyPercent {
		t.Fatalf("GOGC %d under an allocation load, want %d", got, gcBusyPercent)
	}
	if after := gogc(); after != gcQuietPercent {
		t.Fatalf("GOGC %d after the pacer stopped, want %d", after, gcQuietPercent)
	}
}

// gogc reads the GOGC in force.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
