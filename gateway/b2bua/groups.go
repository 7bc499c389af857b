package b2bua

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/outpost/outpost/gateway/dialplan"
)

// Group is a hunt (response) group: an extension that rings its members.
// Each member rings at most once per call: all at once (simultaneous), or
// one after another for RingTime each, in list order (sequential), from
// the member after the one the previous call started with (round robin),
// or from the member idle longest since a group call it answered
// (longest idle). A member in a call, in do-not-disturb or with no phone
// registered when its turn comes is skipped. When nobody answered within
// TotalTime, or every member was tried, the call goes to Overflow. Group
// calls do not follow the members' own forwards.
type Group struct {
	Extension string
	Members   []string
	Strategy  string // GroupSimultaneous, ...
	RingTime  time.Duration
	// TotalTime bounds the ringing before the overflow; 0 = no bound
	// beyond the members' ring times.
	TotalTime time.Duration
	// Overflow is a number dialled as a user would ("" = none: the caller
	// gets 480, or 486 when every member was busy), or GroupVoicemail for
	// the voicemail pilot (Router.Voicemail of the group's extension).
	Overflow string
	// Queue is how long a call nobody answered waits answered, on music
	// on hold, for a free member before the overflow (queue.go); 0 = no
	// queue.
	Queue time.Duration
}

// Group strategies and the voicemail overflow.
const (
	GroupSimultaneous = "simultaneous"
	GroupSequential   = "sequential"
	GroupRoundRobin   = "round_robin"
	GroupLongestIdle  = "longest_idle"
	GroupVoicemail    = "voicemail"
)

// groupState is what the B2BUA remembers of a group between calls.
type groupState struct {
	mu   sync.Mutex
	next int                  // round robin: the member the next call starts with
	idle map[string]time.Time // longest idle: when each member's last answered group call ended
}

func (b *B2BUA) groupState(ext string) *groupState {
	b.mu.Lock()
	defer b.mu.Unlock()
	gs := b.groups[ext]
	if gs == nil {
		gs = &groupState{idle: map[string]time.Time{}}
		b.groups[ext] = gs
	}
	return gs
}

// order is the members in the order a new call rings them.
func (g *Group) order(gs *groupState) []string {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	ms := slices.Clone(g.Members)
	switch g.Strategy {
	case GroupRoundRobin:
		start := gs.next % len(ms)
		gs.next = start + 1
		ms = append(ms[start:], ms[:start]...)
	case GroupLongestIdle:
		slices.SortStableFunc(ms, func(a, b string) int { return gs.idle[a].Compare(gs.idle[b]) })
	}
	return ms
}

// answeredEnded records the end of a group call member answered.
func (gs *groupState) answeredEnded(member string, at time.Time) {
	gs.mu.Lock()
	gs.idle[member] = at
	gs.mu.Unlock()
}

// inCall reports whether ext is a party of a call other than c, or is
// being rung by one.
func (b *B2BUA) inCall(ext string, c *call) bool {
	b.mu.Lock()
	calls := make([]*call, 0, len(b.calls))
	for _, x := range b.calls {
		if x != c {
			calls = append(calls, x)
		}
	}
	b.mu.Unlock()
	for _, x := range calls {
		x.mu.Lock()
		busy := x.info.From == ext || x.info.Route == dialplan.RouteLocal && x.info.Target == ext
		x.mu.Unlock()
		if busy {
			return true
		}
	}
	return false
}

// ringGroup rings group g for c. It reports whether the call's answer
// was settled here (answered, cancelled, or refused); when not, c.d was
// diverted to the overflow and the caller rings it next.
func (c *call) ringGroup(g *Group) bool {
	c.mu.Lock()
	c.cdr.Group = g.Extension
	c.mu.Unlock()
	var deadline time.Time
	if g.TotalTime > 0 {
		deadline = time.Now().Add(g.TotalTime)
	}
	var res dialResult
	allBusy := true
	members := g.order(c.b.groupState(g.Extension))
	for len(members) > 0 && c.ring.Err() == nil {
		var round []string
		if g.Strategy == GroupSimultaneous {
			round, members = members, nil
		} else {
			round, members = members[:1], members[1:]
		}
		var ts []target
		var ringing []string
		for _, m := range round {
			if c.b.inCall(m, c) || c.set.services(m).DND {
				continue // busy
			}
			mts, _ := c.b.targets(c.ring, c.set, dialplan.Decision{Route: dialplan.RouteLocal, Target: m})
			if len(mts) == 0 {
				allBusy = false // unavailable
			} else {
				ringing = append(ringing, m)
			}
			ts = append(ts, mts...)
		}
		if len(ts) == 0 {
			continue
		}
		spec, err := c.specOf(dialplan.Decision{Number: c.d.Number, Route: dialplan.RouteLocal, Target: g.Extension, Rule: c.d.Rule}, ts)
		if err != nil {
			break
		}
		spec.timeout, spec.cause = g.RingTime, errNoAnswer
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			spec.timeout = min(spec.timeout, left)
		}
		c.mu.Lock()
		c.rung = ringing
		c.mu.Unlock()
		res = c.b.dial(c.ring, c.set, spec)
		c.mu.Lock()
		c.rung = nil
		c.mu.Unlock()
		c.notePeer(res)
		if res.cause == errPickedUp && c.answerPickup() {
			return true
		}
		if res.answered || res.cause == errCallerGone || res.cause == errCallerBye {
			c.finish(res, nil)
			return true
		}
		if res.best == nil || res.best.status != 486 && res.best.status != 600 {
			allBusy = false
		}
	}
	if c.ring.Err() != nil {
		c.finish(dialResult{cause: context.Cause(c.ring)}, nil)
		return true
	}
	if g.Queue > 0 && c.queue(g) {
		return true
	}
	reason := "no-answer"
	if allBusy {
		reason = "user-busy"
	}
	switch g.Overflow {
	case "":
	case GroupVoicemail:
		if vm, ok := c.router.Voicemail(g.Extension); ok && c.forward(vm, reason, true) {
			return true
		}
	default:
		switch c.divert(g.Overflow, reason) {
		case diverted:
			return false
		case refused:
			return true
		}
	}
	if allBusy {
		c.respondA(486, "Busy Here")
		c.end(Busy, BySystem)
	} else {
		c.respondA(480, "Temporarily Unavailable")
		c.end(NoAnswer, BySystem)
	}
	return true
}

// group is the group ext names in s, if any.
func (s *Settings) group(ext string) (*Group, bool) {
	g, ok := s.groups[ext]
	return g, ok
}

// groupsOf indexes cfg's groups by extension; strategy defaults to
// simultaneous, the ring time to 15 s.
func groupsOf(gs []Group) map[string]*Group {
	out := make(map[string]*Group, len(gs))
	for _, g := range gs {
		g.Strategy = cmp.Or(g.Strategy, GroupSimultaneous)
		if g.RingTime <= 0 {
			g.RingTime = defaultGroupRing
		}
		out[g.Extension] = &g
	}
	return out
}

const defaultGroupRing = 15 * time.Second
