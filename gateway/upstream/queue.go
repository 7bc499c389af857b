package upstream

import (
	"container/heap"
	"time"
)

// queue is the timer wheel of the Agent: every idle entry sits in one
// min-heap ordered by when it is due (first registration, refresh,
// retry, replay), ties in insertion order. One dispatcher goroutine waits
// for the earliest; there is no timer or goroutine per user.
type queue struct {
	items []*entry
	seq   uint64
}

func (q *queue) Len() int { return len(q.items) }
func (q *queue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if !a.due.Equal(b.due) {
		return a.due.Before(b.due)
	}
	return a.seq < b.seq
}
func (q *queue) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].index, q.items[j].index = i, j
}
func (q *queue) Push(x any) {
	e := x.(*entry)
	e.index = len(q.items)
	q.items = append(q.items, e)
}
func (q *queue) Pop() any {
	n := len(q.items) - 1
	e := q.items[n]
	q.items[n] = nil
	q.items = q.items[:n]
	e.index = -1
	return e
}

// schedule (re)queues e to be due at due.
func (q *queue) schedule(e *entry, due time.Time) {
	q.seq++
	e.due, e.seq = due, q.seq
	if e.index >= 0 {
		heap.Fix(q, e.index)
		return
	}
	heap.Push(q, e)
}

// remove takes e out of the queue if it is queued.
func (q *queue) remove(e *entry) {
	if e.index >= 0 {
		heap.Remove(q, e.index)
	}
}

// peek returns the earliest entry, or nil.
func (q *queue) peek() *entry {
	if len(q.items) == 0 {
		return nil
	}
	return q.items[0]
}

// pop removes and returns the earliest entry.
func (q *queue) pop() *entry { return heap.Pop(q).(*entry) }

// pacer spaces dispatches at least interval apart: a token bucket of
// depth one, so that an idle period earns no burst. Resume's replay of a
// thousand users therefore reaches HQ at ReplayRate, not at once.
type pacer struct {
	interval time.Duration
	next     time.Time // no dispatch before
}

// take consumes the slot at now (the caller checked that now is not
// before next).
func (p *pacer) take(now time.Time) { p.next = now.Add(p.interval) }
