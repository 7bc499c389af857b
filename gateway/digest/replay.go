package digest

import (
	"math"
	"sync"
)

// replayWindow is the number of nonce counts below the highest one seen
// that may still arrive (out of order) and be accepted once.
const replayWindow = 64

// window is the anti-replay state of one nonce (RFC 4303 §3.4.3 style):
// top is the highest nc accepted; bit i of seen is set if nc top-i was.
type window struct {
	top  uint32
	seen uint64
}

// accept records nc and reports whether it was fresh.
func (w *window) accept(nc uint32) bool {
	if nc > w.top {
		if d := nc - w.top; d >= replayWindow {
			w.seen = 1
		} else {
			w.seen = w.seen<<d | 1
		}
		w.top = nc
		return true
	}
	d := w.top - nc
	if d >= replayWindow || w.seen&(1<<d) != 0 {
		return false
	}
	w.seen |= 1 << d
	return true
}

type ringItem struct {
	id     nonceID
	issued int64
}

// replayTable maps nonces to their windows. It is bounded: entries are
// kept in a FIFO (first-use order) and the oldest is evicted when the table
// is full; entries whose nonce has expired are dropped from the front.
//
// Forgetting a nonce that is still valid would let its counts be replayed,
// so the table remembers a watermark: the latest issue time of any removed
// entry. A nonce that is not in the table but was issued at or before the
// watermark may have been forgotten and is answered Stale (the client then
// gets a fresh nonce). Nonces are normally used within moments of being
// issued and first use order roughly follows issue order, so this rarely
// affects a nonce that was never seen.
type replayTable struct {
	mu        sync.Mutex
	max       int
	m         map[nonceID]window
	ring      []ringItem // FIFO of ids in m, circular; len(ring) is its capacity
	head, n   int
	watermark int64
}

func (t *replayTable) init(limit int) {
	t.max = limit
	t.m = make(map[nonceID]window)
	t.watermark = math.MinInt64
}

// check records nc for nonce id (issued at issued) and returns OK, Replay,
// or Stale if the nonce may have been forgotten. Expired entries (issued
// before now-ttl) are dropped first.
func (t *replayTable) check(id nonceID, issued, now, ttl int64, nc uint32) Result {
	t.mu.Lock()
	defer t.mu.Unlock()

	cutoff := now - ttl
	for t.n > 0 && t.ring[t.head].issued < cutoff {
		t.pop()
	}

	if w, ok := t.m[id]; ok {
		if !w.accept(nc) {
			return Replay
		}
		t.m[id] = w
		return OK
	}
	if issued <= t.watermark {
		return Stale
	}
	if t.n == t.max {
		t.pop()
	}
	t.push(ringItem{id: id, issued: issued})
	t.m[id] = window{top: nc, seen: 1}
	return OK
}

func (t *replayTable) pop() {
	it := t.ring[t.head]
	delete(t.m, it.id)
	if it.issued > t.watermark {
		t.watermark = it.issued
	}
	t.ring[t.head] = ringItem{}
	t.head++
	if t.head == len(t.ring) {
		t.head = 0
	}
	t.n--
}

func (t *replayTable) push(it ringItem) {
	if t.n == len(t.ring) {
		// Grow (t.n < t.max here): double, capped at max.
		c := min(max(2*len(t.ring), 64), t.max)
		ring := make([]ringItem, c)
		k := copy(ring, t.ring[t.head:])
		copy(ring[k:], t.ring[:t.head])
		t.ring, t.head = ring, 0
	}
	i := t.head + t.n
	if i >= len(t.ring) {
		i -= len(t.ring)
	}
	t.ring[i] = it
	t.n++
}

// len returns the number of entries (for tests).
func (t *replayTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}
