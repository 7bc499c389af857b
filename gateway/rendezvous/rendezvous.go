// Package rendezvous is rendezvous (highest-random-weight, HRW) hashing:
// every party that knows the same key and the same set of nodes computes
// the same order of the nodes, with no shared state and no coordination.
// It is pure: no seed, no process state, no clock.
//
// Adding a node moves to it only the keys for which it scores highest
// (about 1/(n+1) of them) and leaves every other key's order of the old
// nodes unchanged; removing a node moves only its keys, each to its
// next node. The upstream registration agent (gateway/upstream) orders a
// user's HQ registrars with it, and the registrar pool (gateway/pool)
// orders a user's members.
//
// It does not know what keys and nodes are: callers choose (an address
// of record, a host:port, a member's name). Changing Score changes every
// user's order on every box, so it is pinned by a table test.
package rendezvous

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strings"
)

// Score is the weight of node for key: the first 8 bytes, big-endian, of
// SHA-256(key || 0x00 || node). The NUL keeps ("a", "bc") and ("ab", "c")
// apart.
func Score(key, node string) uint64 {
	h := sha256.Sum256([]byte(key + "\x00" + node))
	return binary.BigEndian.Uint64(h[:8])
}

// Order returns nodes sorted for key by descending Score, ties (a 2^-64
// event) by name; duplicates are dropped. The first is the key's primary,
// the rest its backups in order. The result is a new slice.
func Order(key string, nodes []string) []string {
	type ranked struct {
		node  string
		score uint64
	}
	rs := make([]ranked, 0, len(nodes))
	for i, n := range nodes {
		if slices.Index(nodes, n) < i {
			continue
		}
		rs = append(rs, ranked{n, Score(key, n)})
	}
	slices.SortFunc(rs, func(x, y ranked) int {
		switch {
		case x.score > y.score:
			return -1
		case x.score < y.score:
			return 1
		}
		return strings.Compare(x.node, y.node)
	})
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.node
	}
	return out
}
