package main

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// A busy window raises GOGC for the next one, a quiet window brings it
// back; a change is reported only when the percent changes.
func TestGCPacer(t *testing.T) {
	const busy, quiet = gcBusyBytes, gcBusyBytes - 1
	var p gcPacer
	type step struct {
		percent int
		changed bool
	}
	want := []step{{gcQuietPercent, false}, {gcBusyPercent, true}, {gcBusyPercent, false},
		{gcQuietPercent, true}, {gcQuietPercent, false}, {gcBusyPercent, true}}
	for i, a := range []uint64{quiet, busy, busy, quiet, 0, busy} {
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
