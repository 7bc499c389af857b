// Package mode decides the box's operating mode (docs/design.md §1): normal,
// survivable or standalone.
//
// # Design: events in, transitions out
//
// Machine is a pure state machine. It holds the facts it has been told —
// the WAN link's administrative state and carrier, the default routes via
// the WAN, the HQ targets' probe verdicts, the config — and turns each
// Event into zero or more Transitions. It has no clock, no goroutine and
// no lock: the hold before failback is an explicit deadline the caller
// reads with Next and honours with Tick(now). Every decision is therefore
// a table test: feed events with timestamps, compare the transitions.
//
// Driver runs a Machine with the real clock for the appliance: one timer
// for the hold deadline, a bounded history of transitions, counters per
// mode and non-blocking subscriptions for the routing layer. It is the
// only place where time passes by itself.
//
// # The rule
//
//   - standalone: no HQ configured (Config.HQ false). Nothing else matters.
//   - normal → survivable at once when the WAN link goes down, loses
//     carrier, its last default route disappears, or HQ is down (every
//     known target down, unresolved pools included). The Reason names the
//     first of these that holds.
//   - survivable → normal only after everything has been healthy for
//     Config.Hold without interruption. A relapse during the hold (any
//     fact going bad again) disarms it; the next recovery starts a full
//     hold again, so a flapping WAN keeps the box survivable instead of
//     flapping the routing.
//
// Unknown facts count as healthy, as in gateway/health where a target
// nobody has judged yet starts up: a freshly booted box routes normally
// until evidence says otherwise, and a box without a watched WAN
// interface (no wan.interface) is judged by the HQ probes alone. The
// caller seeds the WAN facts from its first netlink snapshot — including
// the absent ones: LinkDown for a missing interface, RouteRemoved for "no
// default route" — and sends WANReset before seeding another interface.
// Repeating a fact is harmless (events are applied as levels, not
// toggles).
//
// HQ is down when no known target is up and something says so: a target
// down by its probes, or a pool (the primary HQ pool or hq.backup) that
// could not be resolved at all (PoolUnresolved: its resolution failed as
// often in a row as down_after probes, e.g. a box that boots while the WAN
// is silent). With two pools the box therefore goes survivable only when
// both are down. Nothing known at all (a fresh boot before any verdict) is
// not an outage.
//
// HQ health is what the health prober decided (down_after failed probes in
// a row take a target down, up_after good ones bring it up): the Machine
// does not count probes, so the hysteresis lives in one place. Traffic
// blocks (health.Observe) are deliberately not an input: a blocked target
// has no event when its block expires, and a single failed call should
// not flip the whole box.
//
// # What it does not do
//
// It talks to no kernel and no SIP peer, does not route calls and does not
// pause upstream registration: the appliance converts netcfg and
// health events into Events, and reacts to Transitions (dial plan mode,
// upstream Pause/Resume). It imports nothing of this module.
package mode
