package digest

import (
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	steps := []struct {
		nc   uint32
		want bool
	}{
		{1, true}, {1, false}, {3, true}, {2, true}, {2, false}, {3, false},
		{100, true}, {37, true}, {36, false}, // 100-63 = 37 is the oldest still in the window
		{37, false}, {99, true}, {4, false},
		{164, true}, {100, false}, {101, true}, {101, false}, // 164-64 = 100 slid out
		{0xffffffff, true}, {0xffffffff, false}, {0xffffffff - 63, true}, {0xffffffff - 64, false},
	}
	var w window
	first := true
	for i, s := range steps {
		var got bool
		if first {
			w, got, first = window{top: s.nc, seen: 1}, true, false
		} else {
			got = w.accept(s.nc)
		}
		if got != s.want {
			t.Fatalf("step %d: accept(%d) = %v, want %v (top=%d seen=%064b)", i, s.nc, got, s.want, w.top, w.seen)
		}
	}
}

func TestWindowExhaustive(t *testing.T) {
	// Against a reference model: accept iff unseen and > max-64.
	seen := map[uint32]bool{}
	var top uint32
	var w window
	x := uint32(12345)
	for i := range 20000 {
		x = x*1664525 + 1013904223
		nc := top + 1 + uint32(int32(x>>16)%80) - 70 // mostly around top, some ahead
		if nc == 0 || nc > 1<<30 {
			continue
		}
		want := !seen[nc] && (top < replayWindow || nc > top-replayWindow)
		var got bool
		if len(seen) == 0 {
			w, got = window{top: nc, seen: 1}, true
			want = true
		} else {
			got = w.accept(nc)
		}
		if got != want {
			t.Fatalf("iteration %d: accept(%d) = %v, want %v (top %d)", i, nc, got, want, top)
		}
		if got {
			seen[nc] = true
			top = max(top, nc)
		}
	}
}

func id(n byte) (x nonceID) { x[0] = n; return x }

func TestReplayTableEviction(t *testing.T) {
	var tab replayTable
	tab.init(3)
	const ttl = int64(time.Minute)
	now := int64(10 * time.Minute)
	for n := byte(1); n <= 3; n++ {
		if r := tab.check(id(n), now+int64(n), now, ttl, 1); r != OK {
			t.Fatalf("insert %d: %v", n, r)
		}
	}
	// Full: inserting a 4th evicts nonce 1 (the oldest).
	if r := tab.check(id(4), now+4, now, ttl, 1); r != OK {
		t.Fatalf("insert 4: %v", r)
	}
	if tab.len() != 3 {
		t.Fatalf("len = %d, want 3", tab.len())
	}
	// Nonce 1 is still valid but forgotten: its count must not be accepted
	// again. Stale sends the client to a fresh nonce.
	if r := tab.check(id(1), now+1, now, ttl, 1); r != Stale {
		t.Errorf("evicted nonce, replayed nc: %v, want Stale", r)
	}
	if r := tab.check(id(1), now+1, now, ttl, 2); r != Stale {
		t.Errorf("evicted nonce, new nc: %v, want Stale", r)
	}
	// Nonces 2..4 still tracked.
	for n := byte(2); n <= 4; n++ {
		if r := tab.check(id(n), now+int64(n), now, ttl, 1); r != Replay {
			t.Errorf("nonce %d nc=1 again: %v, want Replay", n, r)
		}
		if r := tab.check(id(n), now+int64(n), now, ttl, 2); r != OK {
			t.Errorf("nonce %d nc=2: %v, want OK", n, r)
		}
	}
	// A nonce issued after everything evicted so far is welcome.
	if r := tab.check(id(9), now+9, now, ttl, 1); r != OK {
		t.Errorf("new nonce: %v", r)
	}
}

func TestReplayTableExpiry(t *testing.T) {
	var tab replayTable
	tab.init(100)
	const ttl = int64(time.Minute)
	t0 := int64(10 * time.Minute)
	for n := byte(1); n <= 10; n++ {
		tab.check(id(n), t0+int64(n)*int64(time.Second), t0+int64(n)*int64(time.Second), ttl, 1)
	}
	if tab.len() != 10 {
		t.Fatalf("len = %d", tab.len())
	}
	// 65 s later the nonces issued at t0+1..4 s have expired; the one
	// issued at t0+5 s is exactly TTL old and still valid.
	now := t0 + 65*int64(time.Second)
	tab.check(id(20), now, now, ttl, 1)
	if got := tab.len(); got != 7 {
		t.Errorf("after expiry len = %d, want 7", got)
	}
	// Much later, everything but the newest is gone.
	now += 10 * int64(time.Minute)
	tab.check(id(21), now, now, ttl, 1)
	if got := tab.len(); got != 1 {
		t.Errorf("after long idle len = %d, want 1", got)
	}
	// A clock stepped back does not resurrect an expired nonce's counts.
	if r := tab.check(id(7), t0+7*int64(time.Second), t0, ttl, 1); r != Stale {
		t.Errorf("expired-and-dropped nonce after clock step back: %v, want Stale", r)
	}
}

func TestReplayTableGrowth(t *testing.T) {
	var tab replayTable
	tab.init(1000)
	const ttl = int64(time.Hour)
	for i := range 1500 {
		var x nonceID
		x[0], x[1] = byte(i), byte(i>>8)
		if r := tab.check(x, int64(i+1), 0, ttl, 1); r != OK {
			t.Fatalf("insert %d: %v", i, r)
		}
	}
	if tab.len() != 1000 || len(tab.m) != 1000 || len(tab.ring) != 1000 {
		t.Fatalf("len=%d map=%d ring=%d, want 1000", tab.len(), len(tab.m), len(tab.ring))
	}
	// FIFO order survived the growth: entries 500..1499 remain.
	for i := 500; i < 1500; i++ {
		var x nonceID
		x[0], x[1] = byte(i), byte(i>>8)
		if _, ok := tab.m[x]; !ok {
			t.Fatalf("entry %d missing", i)
		}
	}
}

// TestVerifyEvictedNonce drives eviction through the public API.
func TestVerifyEvictedNonce(t *testing.T) {
	lookup := lookupFor(testRealm)
	a := newAuth(t, Config{MaxNonces: 2})
	c1 := challengeFor(t, a, MD5, false)
	expect(t, "nonce 1", verify(t, a, clientAuth(t, c1, "user0001", "secret1", 1), lookup), OK)
	for range 2 {
		c := challengeFor(t, a, MD5, false)
		expect(t, "filler", verify(t, a, clientAuth(t, c, "user0001", "secret1", 1), lookup), OK)
	}
	expect(t, "evicted nonce replay", verify(t, a, clientAuth(t, c1, "user0001", "secret1", 1), lookup), Stale)
	expect(t, "evicted nonce next nc", verify(t, a, clientAuth(t, c1, "user0001", "secret1", 2), lookup), Stale)
}
