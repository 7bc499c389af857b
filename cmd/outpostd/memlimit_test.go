package main

import (
	"strings"
	"testing"
)

func TestMemTotal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"MemTotal:       24683384 kB\nMemFree:        22999044 kB\n", 24683384 * 1024},
		{"MemFree: 1 kB\n", 0},
		{"MemTotal: lots kB\n", 0},
	} {
		if got := memTotal(strings.NewReader(tc.in)); got != tc.want {
			t.Errorf("memTotal(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestMemLimit(t *testing.T) {
	for _, tc := range []struct{ total, want int64 }{
		{256 << 20, 128 << 20}, // a small box: half of it
		{24 << 30, memLimitCap},
		{0, memLimitCap},
	} {
		if got := memLimit(tc.total); got != tc.want {
			t.Errorf("memLimit(%d) = %d, want %d", tc.total, got, tc.want)
		}
	}
}
