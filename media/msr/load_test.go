package msr

import (
	"os"
	"testing"
	"time"
)

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("%s unreadable: checking the real file needs Linux's /proc: %v", path, err)
	}
	return b
}

func TestProcStatLoad(t *testing.T) {
	stats := []string{
		"cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 50 0 50 350 50 0 0 0 0 0\nintr 1\n",
		// +150 busy, +50 idle: 75 %
		"cpu  200 0 150 750 100 0 0 0 0 0\n",
		// nothing moved
		"cpu  200 0 150 750 100 0 0 0 0 0\n",
	}
	i := 0
	l := newCPULoad(func() ([]byte, error) { s := stats[i]; i++; return []byte(s), nil })
	if got := l.Load(); got != 20 { // since boot: 200 busy of 1000
		t.Errorf("first = %d, want 20", got)
	}
	if got := l.Load(); got != 75 {
		t.Errorf("second = %d, want 75", got)
	}
	if got := l.Load(); got != 0 {
		t.Errorf("idle interval = %d, want 0", got)
	}
	if _, _, err := parseProcStat([]byte("intr 1\n")); err == nil {
		t.Error("no cpu line accepted")
	}
	if _, _, err := parseProcStat([]byte("cpu  a b c d\n")); err == nil {
		t.Error("garbage accepted")
	}
	// The real file parses.
	if _, _, err := parseProcStat(mustRead(t, "/proc/stat")); err != nil {
		t.Errorf("/proc/stat: %v", err)
	}
}

// TestBoxLoad drives NewLoad's state with a fake relay counter and clock:
// the load is the larger of CPU and packet rate against the capacity.
func TestBoxLoad(t *testing.T) {
	var pkts uint64 = 1000 // packets before the agent started: not counted
	now := time.Unix(1000, 0)
	cpu := 10
	capacity := 50000
	b := newBoxLoad(func() int { return cpu }, func() uint64 { return pkts }, func() int { return capacity }, func() time.Time { return now })
	step := func(d time.Duration, n uint64) int {
		now = now.Add(d)
		pkts += n
		return b.Load()
	}
	if got := step(10*time.Second, 0); got != 10 { // idle relay: CPU
		t.Errorf("idle = %d, want 10 (CPU)", got)
	}
	if got := step(10*time.Second, 250000); got != 50 { // 25 000 pps of 50 000
		t.Errorf("25 kpps = %d, want 50", got)
	}
	cpu = 80
	if got := step(10*time.Second, 250000); got != 80 { // CPU higher
		t.Errorf("CPU 80 at 25 kpps = %d, want 80", got)
	}
	cpu = 5
	if got := step(time.Second, 200000); got != 100 { // 200 kpps: clamped
		t.Errorf("200 kpps = %d, want 100", got)
	}
	if got := step(time.Minute, 1); got != 5 { // a trickle: 1 %, below the CPU
		t.Errorf("trickle = %d, want 5", got)
	}
	cpu = 0
	if got := step(time.Minute, 1); got != 1 { // rounded up
		t.Errorf("trickle, idle CPU = %d, want 1", got)
	}
	pkts = 0 // counter reset
	if got := step(time.Second, 0); got != 0 {
		t.Errorf("after reset = %d, want 0", got)
	}
	if got := step(0, 100); got != 0 { // no time elapsed
		t.Errorf("zero interval = %d, want 0", got)
	}
	capacity = 10000 // reconfigured: read at each call
	if got := step(10*time.Second, 50000); got != 50 {
		t.Errorf("5 kpps of 10 000 = %d, want 50", got)
	}
	capacity = 0 // default
	if got := step(10*time.Second, 250000); got != 50 {
		t.Errorf("25 kpps, default capacity = %d, want 50", got)
	}
	// No counter = CPU only.
	cpu = 42
	if b := newBoxLoad(func() int { return cpu }, nil, nil, time.Now); b.Load() != 42 || b.capacityPPS() != DefaultCapacityPPS {
		t.Errorf("no counter: load %d capacity %v", b.Load(), b.capacityPPS())
	}
}
