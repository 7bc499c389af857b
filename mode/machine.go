package mode

import (
	"maps"
	"slices"
	"time"
)

// fact is a tri-state: unknown facts count as healthy (see the package doc).
type fact int8

const (
	unknown fact = iota
	good
	bad
)

func (f fact) String() string {
	switch f {
	case good:
		return "up"
	case bad:
		return "down"
	}
	return "unknown"
}

func level(up bool) fact {
	if up {
		return good
	}
	return bad
}

// Machine is the pure mode state machine. It is not safe for concurrent
// use; Driver serialises it.
type Machine struct {
	cfg  Config
	mode Mode
	now  time.Time // the latest time seen; never goes back

	since  time.Time // when mode was entered
	reason Reason    // why

	link, carrier fact
	routes        map[string]struct{}
	routesKnown   bool
	targets       map[string]bool // HQ target → up
	allDown       bool            // AllTargetsDown seen, no TargetUp since
	unresolved    map[string]bool // HQ pools whose resolution keeps failing

	armedAt time.Time // start of the running hold; zero = no hold running
}

// New returns a Machine in its initial mode at now: standalone without an
// HQ, otherwise normal (every fact is still unknown, hence healthy).
func New(cfg Config, now time.Time) *Machine {
	m := &Machine{cfg: cfg, now: now, since: now, routes: map[string]struct{}{}, targets: map[string]bool{},
		unresolved: map[string]bool{}}
	if cfg.HQ {
		m.mode, m.reason = Normal, ReasonHQConfigured
	} else {
		m.mode, m.reason = Standalone, ReasonNoHQ
	}
	return m
}

// Mode returns the current mode.
func (m *Machine) Mode() Mode { return m.mode }

// Config returns the current configuration.
func (m *Machine) Config() Config { return m.cfg }

// Next returns the deadline of the running failback hold. The caller
// calls Tick(deadline) (or later) when it passes. ok is false when no
// hold is running.
func (m *Machine) Next() (deadline time.Time, ok bool) {
	if m.armedAt.IsZero() {
		return time.Time{}, false
	}
	return m.armedAt.Add(m.cfg.hold()), true
}

// Tick completes the failback hold if its deadline is not after now.
// The transition carries the deadline as its time: the box has been
// healthy for exactly the hold then. Ticking early or without a hold does
// nothing.
func (m *Machine) Tick(now time.Time) (Transition, bool) {
	m.advance(now)
	return m.failback(time.Time{})
}

// failback enters normal if the running hold has completed by m.now. The
// transition is stamped with the deadline, or notBefore if later (a hold
// shortened by a config change completes when the change arrives, not in
// the past).
func (m *Machine) failback(notBefore time.Time) (Transition, bool) {
	deadline, ok := m.Next()
	if !ok || m.now.Before(deadline) {
		return Transition{}, false
	}
	// A running hold implies survivable and healthy: every fact going bad
	// disarms it (evaluate).
	m.armedAt = time.Time{}
	return m.enter(Normal, ReasonRecovered, "held "+m.cfg.hold().String(), latest(deadline, notBefore)), true
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Apply feeds one event and returns the transitions it caused, in order:
// first a failback whose hold completed before ev.At (as Tick would), then
// the effect of ev itself. Events of an unknown Kind are ignored.
func (m *Machine) Apply(ev Event) []Transition {
	var out []Transition
	if t, ok := m.Tick(ev.At); ok {
		out = append(out, t)
	}
	at := m.now
	switch ev.Kind {
	case LinkUp, LinkDown:
		m.link = level(ev.Kind == LinkUp)
	case CarrierUp, CarrierDown:
		m.carrier = level(ev.Kind == CarrierUp)
	case RouteAdded:
		m.routesKnown = true
		m.routes[ev.Route] = struct{}{}
	case RouteRemoved:
		m.routesKnown = true
		delete(m.routes, ev.Route)
	case TargetUp:
		m.allDown = false
		if ev.Target != "" {
			m.targets[ev.Target] = true
		}
	case TargetDown:
		if ev.Target == "" {
			return out // a per-target verdict needs its target
		}
		m.targets[ev.Target] = false
	case TargetGone:
		delete(m.targets, ev.Target)
	case PoolUnresolved:
		if ev.Target == "" {
			return out
		}
		m.unresolved[ev.Target] = true
	case PoolResolved:
		delete(m.unresolved, ev.Target)
	case AllTargetsDown:
		m.allDown = true
		for t := range m.targets {
			m.targets[t] = false
		}
	case WANReset:
		m.link, m.carrier = unknown, unknown
		clear(m.routes)
		m.routesKnown = false
	case Configured:
		return append(out, m.configure(ev.Config, at)...)
	default:
		return out
	}
	if t, ok := m.evaluate(at, ev.String()); ok {
		out = append(out, t)
	}
	return out
}

// configure applies a new Config.
func (m *Machine) configure(cfg Config, at time.Time) []Transition {
	m.cfg = cfg // a running hold keeps its start and takes the new length
	if !cfg.HQ {
		// The targets belonged to the HQ that is gone.
		clear(m.targets)
		clear(m.unresolved)
		m.allDown = false
	}
	var out []Transition
	if t, ok := m.evaluate(at, Event{Kind: Configured, Config: cfg}.String()); ok {
		out = append(out, t)
	}
	// A shorter hold may already be complete.
	if t, ok := m.failback(at); ok {
		out = append(out, t)
	}
	return out
}

// evaluate moves between modes after a fact changed at the given time.
func (m *Machine) evaluate(at time.Time, detail string) (Transition, bool) {
	if !m.cfg.HQ {
		m.armedAt = time.Time{}
		if m.mode == Standalone {
			return Transition{}, false
		}
		return m.enter(Standalone, ReasonNoHQ, detail, at), true
	}
	why, sick := m.unhealthy()
	switch m.mode {
	case Standalone: // HQ has just been configured
		if sick {
			return m.enter(Survivable, why, detail, at), true
		}
		return m.enter(Normal, ReasonHQConfigured, detail, at), true
	case Normal:
		if sick {
			return m.enter(Survivable, why, detail, at), true
		}
	case Survivable:
		switch {
		case sick:
			m.armedAt = time.Time{} // relapse: the next recovery holds afresh
		case m.armedAt.IsZero():
			m.armedAt = at
		}
	}
	return Transition{}, false
}

// unhealthy reports the first fact that keeps the box survivable.
func (m *Machine) unhealthy() (Reason, bool) {
	switch {
	case m.link == bad:
		return ReasonLinkDown, true
	case m.carrier == bad:
		return ReasonCarrierDown, true
	case m.routesKnown && len(m.routes) == 0:
		return ReasonRouteGone, true
	case m.hqDown():
		return ReasonHQDown, true
	}
	return "", false
}

// hqDown: AllTargetsDown without a TargetUp since, or no known target up
// while something says HQ is down: a known target down, or a pool that
// could not be resolved (a box booted into a silent WAN never learns a
// target, and that is an outage). With no target known and no pool
// unresolved nothing has been judged yet: not an outage (targets start up).
func (m *Machine) hqDown() bool {
	if m.allDown {
		return true
	}
	if len(m.targets) == 0 && len(m.unresolved) == 0 {
		return false
	}
	for _, up := range m.targets {
		if up {
			return false
		}
	}
	return true
}

func (m *Machine) enter(to Mode, why Reason, detail string, at time.Time) Transition {
	t := Transition{From: m.mode, To: to, Reason: why, Detail: detail, At: at}
	m.mode, m.since, m.reason = to, at, why
	if to != Survivable {
		m.armedAt = time.Time{}
	}
	return t
}

// advance moves the Machine's clock forward (never back).
func (m *Machine) advance(t time.Time) {
	if t.After(m.now) {
		m.now = t
	}
}

// Status is a snapshot of the Machine for `outpostctl status`.
type Status struct {
	Mode   Mode      `json:"mode"`
	Since  time.Time `json:"since"`
	Reason Reason    `json:"reason"`
	// Healthy is false while a fact keeps the box survivable; Cause names it.
	Healthy bool   `json:"healthy"`
	Cause   Reason `json:"cause,omitempty"`
	// HoldUntil is the failback deadline while a hold runs.
	HoldUntil time.Time     `json:"hold_until,omitzero"`
	Hold      time.Duration `json:"hold_ns"`
	HQ        bool          `json:"hq_configured"`
	// Link and Carrier are "up", "down" or "unknown".
	Link    string `json:"wan_link"`
	Carrier string `json:"wan_carrier"`
	// Routes are the known default routes via the WAN; RoutesKnown is
	// false until the first route event.
	Routes      []string        `json:"wan_default_routes"`
	RoutesKnown bool            `json:"wan_routes_known"`
	Targets     map[string]bool `json:"hq_targets"` // target → up
	AllDown     bool            `json:"hq_all_down"`
	// Unresolved are the HQ pools that have no target because their
	// resolution keeps failing.
	Unresolved []string `json:"hq_unresolved,omitempty"`
}

// Status returns a snapshot of the current state.
func (m *Machine) Status() Status {
	cause, sick := m.unhealthy()
	s := Status{
		Mode: m.mode, Since: m.since, Reason: m.reason,
		Healthy: !sick, Cause: cause, Hold: m.cfg.hold(), HQ: m.cfg.HQ,
		Link: m.link.String(), Carrier: m.carrier.String(),
		Routes: slices.Sorted(maps.Keys(m.routes)), RoutesKnown: m.routesKnown,
		Targets: maps.Clone(m.targets), AllDown: m.allDown,
		Unresolved: slices.Sorted(maps.Keys(m.unresolved)),
	}
	s.HoldUntil, _ = m.Next()
	return s
}
