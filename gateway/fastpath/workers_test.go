package fastpath

import (
	"runtime/metrics"
	"sync"
	"testing"
)

// A handler that blocks does not hold up the next; handlers run one after
// another reuse one goroutine; Wait ends the waiting ones.
func TestWorkers(t *testing.T) {
	w := newWorkers()

	release, blocked := make(chan struct{}), make(chan struct{})
	w.Go(func() { close(blocked); <-release })
	<-blocked
	done := make(chan struct{})
	w.Go(func() { close(done) })
	<-done // with the first still blocked
	close(release)

	created := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(created)
	before := created[0].Value.Uint64()
	for range 1000 {
		var wg sync.WaitGroup
		wg.Add(1)
		w.Go(wg.Done)
		wg.Wait()
	}
	metrics.Read(created)
	// the worker that ran fn may not be waiting yet when the next comes: a
	// few are made, not one per handler
	if n := created[0].Value.Uint64() - before; n > 100 {
		t.Errorf("1000 handlers in turn made %d goroutines", n)
	}

	w.Wait()
	if n := w.idle.Load(); n != 0 {
		t.Errorf("after Wait %d workers wait", n)
	}
}
