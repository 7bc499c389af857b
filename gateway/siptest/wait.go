package siptest

import (
	"testing"
	"time"
)

// Recv waits (bounded by Wait) for a value from ch; what names it in the
// failure.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Wait):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// Until polls cond (every millisecond, bounded by Wait) until it holds:
// for state that has no event to wait on (a status table, sipgo's
// connection pool).
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
