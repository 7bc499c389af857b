package main

import "testing"

// A quiet box never trims; after a burst the trimmer trims on the first
// quiet window and once more trimAgain windows later, then stops; a burst
// in between starts over.
func TestMemTrimmer(t *testing.T) {
	const busy, quiet = trimBusyBytes, trimBusyBytes / 10
	m := memTrimmer{quiet: -1}
	var got []int
	windows := []uint64{quiet, quiet, busy, busy, quiet, quiet, quiet, quiet, quiet, quiet, quiet, quiet, quiet, quiet,
		busy, quiet, quiet, busy, quiet}
	for i, a := range windows {
		if m.window(a) {
			got = append(got, i)
		}
	}
	want := []int{4, 11, 15, 18}
	if len(got) != len(want) {
		t.Fatalf("trimmed at windows %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("trimmed at windows %v, want %v", got, want)
		}
	}
}
