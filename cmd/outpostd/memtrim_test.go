package main

import "testing"

// A quiet box never trims; after a burst the trimmer trims once it has
// been quiet for trimFirst windows and again at trimAgain, then stops; a
// burst in between starts over.
func TestMemTrimmer(t *testing.T) {
	const busy, quiet = trimBusyBytes, trimBusyBytes / 10
	m := memTrimmer{quiet: -1}
	var got []int
	windows := []uint64{quiet, quiet, busy, busy, // 0-3
		quiet, quiet, quiet, quiet, quiet, quiet, quiet, quiet, quiet, quiet, quiet, // 4-14: trims at 7 and 12
		busy, quiet, quiet, busy, quiet, quiet, quiet, quiet} // 15-22: 16-17 too short; trims at 22
	for i, a := range windows {
		if m.window(a) {
			got = append(got, i)
		}
	}
	want := []int{3 + trimFirst, 3 + trimAgain, 18 + trimFirst}
	if len(got) != len(want) {
		t.Fatalf("trimmed at windows %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("trimmed at windows %v, want %v", got, want)
		}
	}
}
