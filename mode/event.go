package mode

import (
	"fmt"
	"time"
)

// Mode is the box's operating mode: one type for the machine that decides
// it, the dial plan that routes by it and the management API that shows
// it. The zero Mode is treated as Normal by the dial plan.
type Mode string

const (
	Normal     Mode = "normal"
	Survivable Mode = "survivable"
	Standalone Mode = "standalone"
)

// Kind says what an Event reports.
type Kind int

const (
	// LinkUp and LinkDown: the WAN interface is administratively up or
	// down. A WAN interface that vanished is LinkDown.
	LinkUp Kind = iota + 1
	LinkDown
	// CarrierUp and CarrierDown: the WAN interface has or lost carrier
	// (operational state).
	CarrierUp
	CarrierDown
	// RouteAdded and RouteRemoved: a default route via the WAN appeared
	// or disappeared; Event.Route names it so that several (IPv4 and IPv6)
	// are counted. Removing a route that is not known still records that
	// the route set is known: seed "no default route" with RouteRemoved.
	RouteAdded
	RouteRemoved
	// TargetUp and TargetDown: the health prober's verdict on one HQ
	// target (Event.Target). TargetUp with an empty Target means "some HQ
	// target is up again" for callers that only have the aggregate.
	TargetUp
	TargetDown
	// TargetGone: the target is no longer an HQ target (config or DNS
	// changed); its verdict is forgotten.
	TargetGone
	// AllTargetsDown: every HQ target is down (the aggregate form). HQ
	// counts as down until the next TargetUp.
	AllTargetsDown
	// Configured: Event.Config is the new configuration.
	Configured
	// WANReset forgets the link, carrier and route facts (all unknown
	// again, hence healthy): send it when wan.interface names another
	// interface, then seed the new one's state.
	WANReset
	// PoolUnresolved: the HQ pool Event.Target (e.g. "primary hq.example.com")
	// has no target at all because its resolution failed as often in a row
	// as down_after probes (DNS unreachable, or no answer ever): a pool
	// that was never found counts as down, not as "nothing to probe".
	PoolUnresolved
	// PoolResolved: the pool Event.Target has targets again (they follow as
	// TargetUp/TargetDown), or is no longer configured.
	PoolResolved
)

var kindNames = [...]string{
	LinkUp: "LinkUp", LinkDown: "LinkDown", CarrierUp: "CarrierUp", CarrierDown: "CarrierDown",
	RouteAdded: "RouteAdded", RouteRemoved: "RouteRemoved",
	TargetUp: "TargetUp", TargetDown: "TargetDown", TargetGone: "TargetGone",
	AllTargetsDown: "AllTargetsDown", Configured: "Configured", WANReset: "WANReset",
	PoolUnresolved: "PoolUnresolved", PoolResolved: "PoolResolved",
}

func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Event is one input of the Machine.
type Event struct {
	Kind Kind
	// At is when it happened. The Machine never goes back in time: an At
	// before the latest one seen (or zero) is taken as that latest time.
	At time.Time
	// Route identifies a default route for RouteAdded/RouteRemoved, e.g.
	// "0.0.0.0/0 via 198.18.0.1". Any stable string works.
	Route string
	// Target is the HQ target ("udp:198.18.1.10:5060") for TargetUp,
	// TargetDown and TargetGone, and the pool for PoolUnresolved and
	// PoolResolved.
	Target string
	// Config is the new configuration for Configured.
	Config Config
}

func (e Event) String() string {
	switch e.Kind {
	case RouteAdded, RouteRemoved:
		return fmt.Sprintf("%v %q", e.Kind, e.Route)
	case TargetUp, TargetDown, TargetGone, PoolUnresolved, PoolResolved:
		return fmt.Sprintf("%v %s", e.Kind, e.Target)
	case Configured:
		return fmt.Sprintf("%v hq=%t hold=%v", e.Kind, e.Config.HQ, e.Config.hold())
	}
	return e.Kind.String()
}

// DefaultHold is the failback hold when Config.Hold is zero (the
// document's hq.hold_s default).
const DefaultHold = 10 * time.Second

// Config is the part of the document the mode depends on.
type Config struct {
	// HQ is true when an HQ is configured (hq.domain or hq.targets);
	// false makes the box standalone.
	HQ bool
	// Hold is how long WAN and HQ must stay healthy before survivable
	// returns to normal; zero or negative means DefaultHold.
	Hold time.Duration
}

func (c Config) hold() time.Duration {
	if c.Hold <= 0 {
		return DefaultHold
	}
	return c.Hold
}

// Reason says why a transition happened.
type Reason string

const (
	ReasonStart        Reason = "start"                  // the first mode (Driver history only)
	ReasonLinkDown     Reason = "WAN link down"          // LinkDown
	ReasonCarrierDown  Reason = "WAN carrier lost"       // CarrierDown
	ReasonRouteGone    Reason = "WAN default route gone" // last RouteRemoved
	ReasonHQDown       Reason = "all HQ targets down"    // TargetDown of the last up target, AllTargetsDown, PoolUnresolved
	ReasonRecovered    Reason = "WAN and HQ healthy for the hold time"
	ReasonNoHQ         Reason = "no HQ configured" // → standalone
	ReasonHQConfigured Reason = "HQ configured"    // standalone → normal
)

// Transition is one change of mode.
type Transition struct {
	From   Mode      `json:"from,omitempty"` // empty for ReasonStart
	To     Mode      `json:"to"`
	Reason Reason    `json:"reason"`
	Detail string    `json:"detail,omitempty"` // the event or fact behind it
	At     time.Time `json:"at"`
}

func (t Transition) String() string {
	s := fmt.Sprintf("%s → %s: %s", t.From, t.To, t.Reason)
	if t.Detail != "" {
		s += " (" + t.Detail + ")"
	}
	return s
}
