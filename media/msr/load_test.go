package msr

import (
	"os"
	"testing"
)

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("%s: %v", path, err)
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
