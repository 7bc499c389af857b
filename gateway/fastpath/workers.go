package fastpath

import (
	"sync"
	"sync/atomic"
)

// maxIdleWorkers is how many handler goroutines wait for work at most;
// a burst's extra ones end.
const maxIdleWorkers = 64

// workers runs the path's handlers, each on a goroutine of its own as
// before, but a goroutine whose handler returned waits (up to
// maxIdleWorkers of them) for the next handler instead of ending.
//
// Why: a new goroutine starts with a small stack, and an INVITE's handler
// (the gateway's admission, the B2BUA's dial, sipgo's dialog and client
// transaction) grows it several times over, each growth a copy of the
// whole stack; in BenchmarkCall that copying was about 7 % of the box's
// CPU. A kept goroutine keeps its stack (the collector halves an idle
// one at most once per cycle).
type workers struct {
	wg   sync.WaitGroup
	next chan func() // unbuffered: a send succeeds only to a waiting worker
	quit chan struct{}
	idle atomic.Int32
}

func newWorkers() *workers {
	return &workers{next: make(chan func()), quit: make(chan struct{})}
}

// Go runs fn on a waiting worker, or on a new one.
func (w *workers) Go(fn func()) {
	select {
	case w.next <- fn:
	default:
		w.wg.Go(func() { w.run(fn) })
	}
}

func (w *workers) run(fn func()) {
	for {
		fn()
		if w.idle.Add(1) > maxIdleWorkers {
			w.idle.Add(-1)
			return
		}
		select {
		case fn = <-w.next:
			w.idle.Add(-1)
		case <-w.quit:
			w.idle.Add(-1)
			return
		}
	}
}

// Wait ends the waiting workers and waits for the busy ones; no Go may
// follow.
func (w *workers) Wait() {
	close(w.quit)
	w.wg.Wait()
}
