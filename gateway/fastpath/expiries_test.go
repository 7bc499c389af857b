package fastpath

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// The FIFO hands transactions out in the order they came, only once due,
// and a queue that stays short (one in, one out) does not grow its
// backing array however many pass through it.
func TestExpiriesOrderAndSpace(t *testing.T) {
	var got []string
	e := &expiries{due: func(tx *serverTx) { got = append(got, tx.key) }}
	t.Cleanup(func() { e.timer.Stop() })

	for i := range 5 {
		e.add(&serverTx{key: strconv.Itoa(i)}, time.Hour+time.Duration(i)*time.Second)
	}
	// Taken after the adds: each add reads the clock itself, and a busy
	// machine may stall between them (entry 2 is then due a little later).
	added := time.Now()
	e.expireAt(added.Add(time.Hour + 2*time.Second))
	if want := "[0 1 2]"; fmt.Sprint(got) != want {
		t.Fatalf("due after 1h2s: %v, want %s", got, want)
	}
	e.expireAt(added.Add(time.Hour + 2*time.Second))
	if len(got) != 3 {
		t.Fatalf("expired again: %v", got)
	}
	e.expireAt(added.Add(2 * time.Hour))
	if want := "[0 1 2 3 4]"; fmt.Sprint(got) != want {
		t.Fatalf("due after 2h: %v, want %s", got, want)
	}

	got = got[:0]
	for i := range 10000 {
		e.add(&serverTx{key: strconv.Itoa(i)}, time.Hour)
		e.add(&serverTx{key: strconv.Itoa(i)}, time.Hour)
		e.expireAt(time.Now().Add(2 * time.Hour))
	}
	if len(got) != 20000 {
		t.Fatalf("%d came due, want 20000", len(got))
	}
	if c := cap(e.queue); c > 8 {
		t.Errorf("queue's array grew to %d entries with at most 2 queued", c)
	}
	if e.head != 0 || len(e.queue) != 0 {
		t.Errorf("empty queue: head %d, len %d", e.head, len(e.queue))
	}
}

// A queue drained from the head while it fills keeps its array within
// twice the most it ever held.
func TestExpiriesCompacts(t *testing.T) {
	n := 0
	e := &expiries{due: func(*serverTx) { n++ }}
	t.Cleanup(func() { e.timer.Stop() })
	for i := range 100000 {
		e.add(&serverTx{}, time.Hour)
		if i >= 1000 {
			// the oldest is due: the queue holds 1000 at most
			e.expireAt(e.queue[e.head].until)
		}
	}
	if queued := len(e.queue) - e.head; n+queued != 100000 || queued > 1000 {
		t.Fatalf("%d came due and %d are queued, want 100000 in all, at most 1000 queued", n, queued)
	}
	if c := cap(e.queue); c > 4*1000 {
		t.Errorf("queue's array grew to %d entries with at most 1001 queued", c)
	}
}
