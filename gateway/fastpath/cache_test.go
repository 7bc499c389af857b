package fastpath

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"testing"
	"time"
)

func cached(c *answerCache, key string) (string, bool) {
	var b bytes.Buffer
	ok, _ := c.get(&b, []byte(key))
	return b.String(), ok
}

// The cache answers what was put for the same key, until the ring is
// written over it, a forget, or two windows have passed.
func TestAnswerCache(t *testing.T) {
	c := newAnswerCache()
	now := time.Now()
	_, epoch := c.get(new(bytes.Buffer), []byte("k1"))
	c.put([]byte("k1"), []byte("SIP/2.0 200 OK one"), epoch, now)
	c.put([]byte("k2"), []byte("SIP/2.0 401 two"), epoch, now)
	if got, ok := cached(c, "k1"); !ok || got != "SIP/2.0 200 OK one" {
		t.Fatalf("k1: %q %t", got, ok)
	}
	if got, ok := cached(c, "k2"); !ok || got != "SIP/2.0 401 two" {
		t.Fatalf("k2: %q %t", got, ok)
	}
	if _, ok := cached(c, "k3"); ok {
		t.Fatal("k3 was never put")
	}

	// A key whose hash finds another key's entry is a miss.
	c.mu.Lock()
	c.cur[maphash.Bytes(c.seed, []byte("k3"))] = c.cur[maphash.Bytes(c.seed, []byte("k1"))]
	c.mu.Unlock()
	if got, ok := cached(c, "k3"); ok {
		t.Fatalf("k3 answered with k1's entry: %q", got)
	}

	// Kept over one window, gone after two.
	c.put([]byte("k4"), []byte("four"), epoch, now.Add(retransWindow))
	if _, ok := cached(c, "k1"); !ok {
		t.Fatal("k1 gone after one window")
	}
	c.put([]byte("k5"), []byte("five"), epoch, now.Add(2*retransWindow))
	if _, ok := cached(c, "k1"); ok {
		t.Fatal("k1 kept two windows")
	}
	if _, ok := cached(c, "k4"); !ok {
		t.Fatal("k4 gone after one window")
	}

	// Forget drops everything, and an answer made before it is not kept.
	c.forget(now)
	if _, ok := cached(c, "k5"); ok {
		t.Fatal("k5 kept after forget")
	}
	c.put([]byte("k6"), []byte("six"), epoch, now)
	if _, ok := cached(c, "k6"); ok {
		t.Fatal("an answer made before forget was cached")
	}
}

// Once the ring has gone round, the oldest answers are misses and the
// newest are whole: no answer is ever cut or mixed with another.
func TestAnswerCacheRingWraps(t *testing.T) {
	c := newAnswerCache()
	now := time.Now()
	answer := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 900+i%300) }
	const n = 3 * cacheRing / 1000
	for i := range n {
		c.put([]byte(fmt.Sprint("key", i)), answer(i), 0, now)
	}
	hits := 0
	for i := range n {
		got, ok := cached(c, fmt.Sprint("key", i))
		if !ok {
			if hits > 0 {
				t.Fatalf("key%d missing after a newer one was found", i)
			}
			continue
		}
		hits++
		if got != string(answer(i)) {
			t.Fatalf("key%d: answer of %d bytes, want %d", i, len(got), len(answer(i)))
		}
	}
	if hits == 0 || hits >= n {
		t.Fatalf("%d of %d answers found: the ring kept none or all", hits, n)
	}
	if _, ok := cached(c, fmt.Sprint("key", n-1)); !ok {
		t.Fatal("the newest answer is gone")
	}
}
