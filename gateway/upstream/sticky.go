package upstream

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/outpost/outpost/gateway/rendezvous"
	"github.com/outpost/outpost/siptarget"
)

// score is the rendezvous (highest-random-weight) score of target for
// the address of record aor (gateway/rendezvous: the first 8 bytes,
// big-endian, of SHA-256(aor || 0x00 || host:port)). host:port is the target's address
// without its transport (IPv6 in brackets), so boxes that reach the pool
// over different transports still agree; aor is "sip:EXT@DOMAIN". The
// score depends on nothing else — no seed, no process state — so every
// box and every restart orders a user's registrars identically.
func score(aor, hostPort string) uint64 { return rendezvous.Score(aor, hostPort) }

// preference orders the pool's candidates for aor: by SRV priority
// (lower first), and within one priority by descending score, ties (a
// 2^-64 event) by name. The first is the user's primary, the rest its
// backups in order. Adding a target to a priority group moves to it only
// the users for whom it scores highest — about 1/(n+1) of them — and
// leaves every other user's order unchanged; removing one moves only its
// users. Duplicates are dropped; def is the transport of names without
// a prefix.
func preference(aor string, cands []Candidate, def siptarget.Transport) []Candidate {
	type ranked struct {
		c     Candidate
		score uint64
	}
	rs := make([]ranked, 0, len(cands))
	seen := make(map[string]bool, len(cands))
	for _, c := range cands {
		if seen[c.Target] {
			continue
		}
		seen[c.Target] = true
		key := c.Target
		if g, err := siptarget.Parse(c.Target, def); err == nil {
			key = g.HostPort()
		}
		rs = append(rs, ranked{c, score(aor, key)})
	}
	slices.SortStableFunc(rs, func(x, y ranked) int {
		switch {
		case x.c.Priority != y.c.Priority:
			return x.c.Priority - y.c.Priority
		case x.score != y.score:
			if x.score > y.score {
				return -1
			}
			return 1
		}
		return strings.Compare(x.c.Target, y.c.Target)
	})
	out := make([]Candidate, len(rs))
	for i, r := range rs {
		out[i] = r.c
	}
	return out
}

// plan is the order of one job's attempts and the user's whole
// preference, by which a binding left elsewhere is judged.
type plan struct {
	attempts []string        // to try, in order
	rank     map[string]int  // every target of the preference: its place
	eligible map[string]bool // healthy now
}

// first is the target a job would try first ("" = none).
func (p plan) first() string {
	if len(p.attempts) == 0 {
		return ""
	}
	return p.attempts[0]
}

// before reports whether target x comes before y in the preference; a
// target outside it comes after every one inside.
func (p plan) before(x, y string) bool {
	rx, okx := p.rank[x]
	ry, oky := p.rank[y]
	return okx && (!oky || rx < ry)
}

// stickyPlan is the plan for aor over a Pool's candidates: its
// preference, of which the eligible targets are tried in order — so a
// user moves to a lower priority group only when every target of its
// group has failed (docs/design.md §1). When none is eligible, the user's own
// first choice is tried alone: docs/design.md §1 tries one blocked target "at
// random", and the hash spreads users over the pool as randomly, without
// making a user hop.
func stickyPlan(aor string, cands []Candidate, def siptarget.Transport) plan {
	pref := preference(aor, cands, def)
	p := plan{rank: make(map[string]int, len(pref)), eligible: make(map[string]bool, len(pref))}
	for i, c := range pref {
		p.rank[c.Target] = i
		if c.Eligible {
			p.eligible[c.Target] = true
			p.attempts = append(p.attempts, c.Target)
		}
	}
	if len(p.attempts) == 0 && len(pref) > 0 {
		p.attempts = []string{pref[0].Target}
	}
	return p
}

// orderedPlan is the plan over a plain Trunk's targets: its order for
// everyone, all of them eligible (the Trunk filtered them).
func orderedPlan(names []string) plan {
	p := plan{attempts: names, rank: make(map[string]int, len(names)), eligible: make(map[string]bool, len(names))}
	for i, n := range names {
		if _, dup := p.rank[n]; !dup {
			p.rank[n] = i
		}
		p.eligible[n] = true
	}
	return p
}

// planFor asks the Trunk for the targets of aor's next job, bounded by
// the attempt timeout (it may resolve DNS).
func planFor(ctx context.Context, s *settings, aor string) (plan, error) {
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if pool, ok := s.trunk.(Pool); ok {
		cands, err := pool.Candidates(tctx)
		if err != nil {
			return plan{}, fmt.Errorf("HQ targets: %w", err)
		}
		return stickyPlan(aor, cands, s.transport), nil
	}
	names, err := s.trunk.Targets(tctx)
	if err != nil {
		return plan{}, fmt.Errorf("HQ targets: %w", err)
	}
	return orderedPlan(names), nil
}

// aorOf is the address of record registered for user: the hash key.
func aorOf(user, domain string) string { return "sip:" + user + "@" + domain }
