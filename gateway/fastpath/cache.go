package fastpath

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"sync"
	"time"
)

// retransWindow is how long an answer is kept for retransmissions: Timer J
// (64*T1) over UDP.
const retransWindow = 32 * time.Second

// cacheRing is the bytes the retransmission cache keeps answers in (keys
// and answers, ~0.6 KiB a REGISTER): 8 MiB is the last ~16,000 answers,
// 32 s of 250 registrations a second. Beyond that an answer is overwritten
// early: a retransmission then gets a fresh answer instead of the cached
// one, which for REGISTER means a new challenge, never a wrong binding.
const cacheRing = 8 << 20

// maxCacheEntries bounds each generation's index: about as many entries
// as the ring holds; beyond it the older generation goes early.
const maxCacheEntries = 16384

// answerCache holds the answers sent in the last retransWindow, by the key
// of their request (branch, source, CSeq), so that a retransmission gets
// the same bytes (RFC 3261 §17.2.2).
//
// Every entry is written into one ring of bytes, and two generations of
// maps index it by a hash of the key. Nothing in the cache holds a
// pointer, so the garbage collector never scans it and caching an answer
// allocates nothing: with a map of strings to byte slices (a key string and
// a copy of the answer per request, and tens of thousands of entries to
// mark in every cycle) the cache was a tenth of a registration's
// allocations and most of the live heap under load. An entry is
// [key length, answer length (4 bytes each), key, answer]; a hit compares
// the key, so a hash collision is a miss, never another request's answer.
type answerCache struct {
	mu       sync.Mutex
	ring     []byte
	pos      uint64            // where the next entry goes, counted from the ring's first byte ever written
	cur, old map[uint64]uint64 // hash of the key → position of its entry
	rotated  time.Time
	seed     maphash.Seed
	// epoch counts forget calls: an answer made before one (put with an
	// older epoch) is not cached.
	epoch uint64
}

const entryHeader = 8

func newAnswerCache() *answerCache {
	return &answerCache{cur: map[uint64]uint64{}, old: map[uint64]uint64{}, rotated: time.Now(), seed: maphash.MakeSeed()}
}

// get writes the cached answer for key to dst, if there is one, and
// returns the cache's epoch (for put).
func (c *answerCache) get(dst *bytes.Buffer, key []byte) (bool, uint64) {
	h := maphash.Bytes(c.seed, key)
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.cur[h]
	if !ok {
		p, ok = c.old[h]
	}
	if !ok {
		return false, c.epoch
	}
	e := c.entry(p)
	if e == nil {
		return false, c.epoch
	}
	kl := binary.LittleEndian.Uint32(e)
	if string(e[entryHeader:entryHeader+kl]) != string(key) {
		return false, c.epoch // another key with the same hash
	}
	dst.Write(e[entryHeader+kl:])
	return true, c.epoch
}

// entry returns the entry at position p, nil when the ring has since been
// written over it.
func (c *answerCache) entry(p uint64) []byte {
	if c.ring == nil || c.pos-p > uint64(len(c.ring)) {
		return nil
	}
	at := p % uint64(len(c.ring))
	n := uint64(entryHeader) + uint64(binary.LittleEndian.Uint32(c.ring[at:])) + uint64(binary.LittleEndian.Uint32(c.ring[at+4:]))
	return c.ring[at : at+n]
}

// forget drops every cached answer.
func (c *answerCache) forget(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.cur)
	clear(c.old)
	c.rotated = now
	c.epoch++
}

// put caches answer for key, unless a forget came after get returned epoch.
func (c *answerCache) put(key, answer []byte, epoch uint64, now time.Time) {
	n := uint64(entryHeader + len(key) + len(answer))
	if n > cacheRing/4 {
		return // (a REGISTER's answer is a few hundred bytes; this is no answer the box makes)
	}
	h := maphash.Bytes(c.seed, key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch {
		return // made before ForgetAnswers: may carry what no longer holds
	}
	if c.ring == nil {
		c.ring = newRing(cacheRing) // pages are touched as answers arrive, not here
	}
	if now.Sub(c.rotated) >= retransWindow || len(c.cur) >= maxCacheEntries {
		c.old, c.cur, c.rotated = c.cur, c.old, now
		clear(c.cur) // what was two generations old
	}
	at := c.pos % cacheRing
	if at+n > cacheRing {
		c.pos += cacheRing - at // an entry never wraps: start again at the ring's beginning
		at = 0
	}
	e := c.ring[at : at+n]
	binary.LittleEndian.PutUint32(e, uint32(len(key)))
	binary.LittleEndian.PutUint32(e[4:], uint32(len(answer)))
	copy(e[entryHeader:], key)
	copy(e[entryHeader+len(key):], answer)
	c.cur[h] = c.pos
	c.pos += n
}
