package mode

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// step is one input (an event, or a Tick when tick is set) and the
// transitions it must produce, written "from→to:reason@seconds".
type step struct {
	ev   Event
	tick time.Time
	want []string
	mode Mode // expected mode after the step; "" = don't check
}

func ev(k Kind, s float64) Event { return Event{Kind: k, At: at(s)} }
func route(k Kind, s float64, r string) Event {
	return Event{Kind: k, At: at(s), Route: r}
}
func target(k Kind, s float64, name string) Event {
	return Event{Kind: k, At: at(s), Target: name}
}
func configured(s float64, hq bool, hold time.Duration) Event {
	return Event{Kind: Configured, At: at(s), Config: Config{HQ: hq, Hold: hold}}
}
func tick(s float64) step { return step{tick: at(s)} }

func short(t Transition) string {
	return fmt.Sprintf("%s→%s:%s@%g", t.From, t.To, t.Reason, t.At.Sub(t0).Seconds())
}

func TestMachine(t *testing.T) {
	hq := Config{HQ: true, Hold: 10 * time.Second}
	const (
		ta = "udp:198.18.1.10:5060"
		tb = "udp:198.18.1.11:5060"
	)
	tests := []struct {
		name  string
		cfg   Config
		start Mode
		steps []step
	}{
		{
			name: "no HQ is standalone whatever the WAN does", cfg: Config{}, start: Standalone,
			steps: []step{
				{ev: ev(CarrierDown, 1), mode: Standalone},
				{ev: ev(LinkDown, 2), mode: Standalone},
				{ev: route(RouteRemoved, 3, "v4"), mode: Standalone},
				{ev: ev(AllTargetsDown, 4), mode: Standalone},
				tick(100),
				{ev: ev(LinkUp, 101), mode: Standalone},
			},
		},
		{
			name: "carrier loss goes survivable at once", cfg: hq, start: Normal,
			steps: []step{
				{ev: ev(CarrierUp, 0.5), mode: Normal},
				{ev: ev(CarrierDown, 1), want: []string{"normal→survivable:WAN carrier lost@1"}},
			},
		},
		{
			name: "link down goes survivable", cfg: hq, start: Normal,
			steps: []step{{ev: ev(LinkDown, 2), want: []string{"normal→survivable:WAN link down@2"}}},
		},
		{
			name: "link down reason wins over carrier", cfg: hq, start: Normal,
			steps: []step{
				{ev: ev(CarrierDown, 1), want: []string{"normal→survivable:WAN carrier lost@1"}},
				{ev: ev(LinkDown, 1), mode: Survivable}, // already survivable: no transition
			},
		},
		{
			name: "last default route removed goes survivable; one of two is not enough", cfg: hq, start: Normal,
			steps: []step{
				{ev: route(RouteAdded, 0, "v4"), mode: Normal},
				{ev: route(RouteAdded, 0, "v6"), mode: Normal},
				{ev: route(RouteRemoved, 1, "v6"), mode: Normal},
				{ev: route(RouteRemoved, 2, "v4"), want: []string{"normal→survivable:WAN default route gone@2"}},
			},
		},
		{
			name: "seeding no default route", cfg: hq, start: Normal,
			steps: []step{{ev: route(RouteRemoved, 0, ""), want: []string{"normal→survivable:WAN default route gone@0"}}},
		},
		{
			name: "every HQ target down goes survivable; one is not enough", cfg: hq, start: Normal,
			steps: []step{
				{ev: target(TargetUp, 0, ta), mode: Normal},
				{ev: target(TargetUp, 0, tb), mode: Normal},
				{ev: target(TargetDown, 3, ta), mode: Normal},
				{ev: target(TargetDown, 4, tb), want: []string{"normal→survivable:all HQ targets down@4"}},
			},
		},
		{
			name: "target gone leaves only down targets", cfg: hq, start: Normal,
			steps: []step{
				{ev: target(TargetDown, 1, ta), want: []string{"normal→survivable:all HQ targets down@1"}},
				{ev: target(TargetGone, 2, ta), mode: Survivable}, // no known target: healthy, hold starts
				{ev: target(TargetUp, 3, tb), mode: Survivable},
				tick(11.9),
				{tick: at(12), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@12"}},
			},
		},
		{
			// A box that boots while the WAN is silent never learns a
			// target: the pool that cannot be resolved is the outage.
			name: "boot with an unresolvable pool goes survivable; resolving it starts the hold", cfg: hq, start: Normal,
			steps: []step{
				{ev: target(PoolUnresolved, 0.6, "primary hq.test"), want: []string{"normal→survivable:all HQ targets down@0.6"}},
				{ev: target(PoolResolved, 20, "primary hq.test"), mode: Survivable},
				{ev: target(TargetUp, 20, ta), mode: Survivable},
				{tick: at(30), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@30"}},
			},
		},
		{
			name: "a backup pool that is up keeps the box normal; both down go survivable", cfg: hq, start: Normal,
			steps: []step{
				{ev: target(TargetUp, 0, tb), mode: Normal}, // the backup's target, new (up)
				{ev: target(PoolUnresolved, 1, "primary hq.test"), mode: Normal},
				{ev: target(TargetDown, 2, tb), want: []string{"normal→survivable:all HQ targets down@2"}},
				{ev: target(TargetUp, 3, tb), mode: Survivable}, // the backup alone is enough
				{tick: at(13), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@13"}},
			},
		},
		{
			name: "primary targets down, backup unresolved", cfg: hq, start: Normal,
			steps: []step{
				{ev: target(TargetDown, 1, ta), want: []string{"normal→survivable:all HQ targets down@1"}},
				{ev: target(PoolUnresolved, 2, "backup hq2.test"), mode: Survivable},
				{ev: target(TargetUp, 3, ta), mode: Survivable},
				{tick: at(13), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@13"}},
				{ev: configured(14, false, 0), want: []string{"normal→standalone:no HQ configured@14"}},
				{ev: configured(15, true, 0), want: []string{"standalone→normal:HQ configured@15"}}, // the pool was forgotten
			},
		},
		{
			name: "aggregate AllTargetsDown, recovery by TargetUp without a name", cfg: hq, start: Normal,
			steps: []step{
				{ev: ev(AllTargetsDown, 5), want: []string{"normal→survivable:all HQ targets down@5"}},
				{ev: ev(TargetUp, 6), mode: Survivable},
				{tick: at(16), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@16"}},
			},
		},
		{
			name: "AllTargetsDown marks known targets down", cfg: hq, start: Normal,
			steps: []step{
				{ev: target(TargetUp, 0, ta), mode: Normal},
				{ev: ev(AllTargetsDown, 1), want: []string{"normal→survivable:all HQ targets down@1"}},
				{ev: target(TargetUp, 2, tb), mode: Survivable}, // tb up: HQ healthy, ta still down
				{tick: at(12), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@12"}},
				{ev: target(TargetDown, 13, tb), want: []string{"normal→survivable:all HQ targets down@13"}},
			},
		},
		{
			name: "TargetDown without a target is ignored", cfg: hq, start: Normal,
			steps: []step{{ev: ev(TargetDown, 1), mode: Normal}},
		},
		{
			name: "failback needs every fact healthy, then the full hold", cfg: hq, start: Normal,
			steps: []step{
				{ev: ev(CarrierDown, 1), want: []string{"normal→survivable:WAN carrier lost@1"}},
				{ev: route(RouteRemoved, 1, "v4"), mode: Survivable},
				{ev: target(TargetDown, 2, ta), mode: Survivable},
				{ev: ev(CarrierUp, 3), mode: Survivable},            // route still gone
				tick(20),                                            // no hold running
				{ev: route(RouteAdded, 21, "v4"), mode: Survivable}, // HQ still down
				tick(40),
				{ev: target(TargetUp, 41, ta), mode: Survivable}, // all healthy: hold 41..51
				tick(50.999),
				{tick: at(51), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@51"}, mode: Normal},
				tick(60), // nothing more
			},
		},
		{
			name: "relapse during the hold restarts it", cfg: hq, start: Normal,
			steps: []step{
				{ev: ev(LinkDown, 0), want: []string{"normal→survivable:WAN link down@0"}},
				{ev: ev(LinkUp, 1), mode: Survivable}, // hold 1..11
				{ev: ev(CarrierDown, 9), mode: Survivable},
				{ev: ev(CarrierUp, 10), mode: Survivable}, // hold 10..20
				tick(11),
				tick(19.5),
				{ev: target(TargetDown, 19.6, ta), mode: Survivable},
				{ev: target(TargetUp, 19.7, ta), mode: Survivable}, // hold 19.7..29.7
				tick(29.6),
				{tick: at(29.7), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@29.7"}},
			},
		},
		{
			name: "flapping link never fails back", cfg: hq, start: Normal,
			steps: []step{
				{ev: ev(CarrierDown, 0), want: []string{"normal→survivable:WAN carrier lost@0"}},
				{ev: ev(CarrierUp, 5), mode: Survivable},
				{ev: ev(CarrierDown, 14), mode: Survivable},
				{ev: ev(CarrierUp, 15), mode: Survivable},
				{ev: ev(CarrierDown, 24), mode: Survivable},
				{ev: ev(CarrierUp, 25), mode: Survivable},
				{ev: ev(CarrierDown, 34), mode: Survivable},
				tick(100),
				{ev: ev(CarrierUp, 100), mode: Survivable},
				{tick: at(110), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@110"}},
			},
		},
		{
			name: "repeating a healthy fact does not restart the hold", cfg: hq, start: Normal,
			steps: []step{
				{ev: ev(CarrierDown, 0), want: []string{"normal→survivable:WAN carrier lost@0"}},
				{ev: ev(CarrierUp, 1), mode: Survivable},
				{ev: ev(CarrierUp, 5), mode: Survivable},
				{ev: route(RouteAdded, 6, "v4"), mode: Survivable},
				{tick: at(11), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@11"}},
			},
		},
		{
			name: "an event after the deadline first completes the hold, then applies", cfg: hq, start: Normal,
			steps: []step{
				{ev: ev(CarrierDown, 0), want: []string{"normal→survivable:WAN carrier lost@0"}},
				{ev: ev(CarrierUp, 1), mode: Survivable},
				{ev: ev(LinkDown, 30), want: []string{
					"survivable→normal:WAN and HQ healthy for the hold time@11",
					"normal→survivable:WAN link down@30",
				}},
			},
		},
		{
			name: "late event is taken at the latest time seen", cfg: hq, start: Normal,
			steps: []step{
				{ev: ev(CarrierDown, 10), want: []string{"normal→survivable:WAN carrier lost@10"}},
				{ev: ev(CarrierUp, 5), mode: Survivable}, // stamped 5, taken as 10: hold 10..20
				tick(19),
				{tick: at(20), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@20"}},
			},
		},
		{
			name: "HQ removed goes standalone from normal", cfg: hq, start: Normal,
			steps: []step{
				{ev: configured(3, false, 0), want: []string{"normal→standalone:no HQ configured@3"}},
				{ev: ev(CarrierDown, 4), mode: Standalone},
			},
		},
		{
			name: "HQ removed during a hold goes standalone and cancels it", cfg: hq, start: Normal,
			steps: []step{
				{ev: ev(CarrierDown, 0), want: []string{"normal→survivable:WAN carrier lost@0"}},
				{ev: ev(CarrierUp, 1), mode: Survivable},
				{ev: configured(2, false, 0), want: []string{"survivable→standalone:no HQ configured@2"}},
				tick(100),
				{ev: ev(LinkUp, 100), mode: Standalone},
			},
		},
		{
			name: "HQ configured on a healthy WAN goes normal at once", cfg: Config{}, start: Standalone,
			steps: []step{
				{ev: ev(CarrierUp, 1), mode: Standalone},
				{ev: configured(2, true, 0), want: []string{"standalone→normal:HQ configured@2"}},
			},
		},
		{
			name: "HQ configured on a dead WAN goes survivable, then holds", cfg: Config{}, start: Standalone,
			steps: []step{
				{ev: ev(CarrierDown, 1), mode: Standalone},
				{ev: configured(2, true, 5*time.Second), want: []string{"standalone→survivable:WAN carrier lost@2"}},
				{ev: ev(CarrierUp, 3), mode: Survivable},
				{tick: at(8), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@8"}},
			},
		},
		{
			name: "HQ targets of the old HQ are forgotten when it goes", cfg: hq, start: Normal,
			steps: []step{
				{ev: target(TargetDown, 1, ta), want: []string{"normal→survivable:all HQ targets down@1"}},
				{ev: configured(2, false, 0), want: []string{"survivable→standalone:no HQ configured@2"}},
				{ev: configured(3, true, 0), want: []string{"standalone→normal:HQ configured@3"}},
			},
		},
		{
			name: "hold change applies to the running hold", cfg: hq, start: Normal,
			steps: []step{
				{ev: ev(CarrierDown, 0), want: []string{"normal→survivable:WAN carrier lost@0"}},
				{ev: ev(CarrierUp, 1), mode: Survivable}, // hold 1..11
				{ev: configured(2, true, 30*time.Second), mode: Survivable},
				tick(11),
				tick(30.9),
				{tick: at(31), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@31"}},
			},
		},
		{
			name: "shorter hold that already elapsed fails back on the config event", cfg: hq, start: Normal,
			steps: []step{
				{ev: ev(CarrierDown, 0), want: []string{"normal→survivable:WAN carrier lost@0"}},
				{ev: ev(CarrierUp, 1), mode: Survivable},
				{ev: configured(5, true, 2*time.Second), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@5"}},
			},
		},
		{
			name: "zero hold means the default", cfg: Config{HQ: true}, start: Normal,
			steps: []step{
				{ev: ev(CarrierDown, 0), want: []string{"normal→survivable:WAN carrier lost@0"}},
				{ev: ev(CarrierUp, 1), mode: Survivable},
				tick(10.9),
				{tick: at(11), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@11"}},
			},
		},
		{
			name: "WANReset forgets the old interface's facts", cfg: hq, start: Normal,
			steps: []step{
				{ev: route(RouteAdded, 0, "v4"), mode: Normal},
				{ev: ev(CarrierDown, 1), want: []string{"normal→survivable:WAN carrier lost@1"}},
				{ev: ev(WANReset, 2), mode: Survivable},            // unknown = healthy: hold 2..12
				{ev: route(RouteRemoved, 3, ""), mode: Survivable}, // seed: the new WAN has no default route
				{ev: ev(CarrierUp, 3), mode: Survivable},
				{ev: route(RouteAdded, 4, "v4 new"), mode: Survivable}, // hold 4..14
				tick(13.9),
				{tick: at(14), want: []string{"survivable→normal:WAN and HQ healthy for the hold time@14"}},
			},
		},
		{
			name: "unknown event kinds are ignored", cfg: hq, start: Normal,
			steps: []step{{ev: Event{Kind: Kind(99), At: at(1)}, mode: Normal}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(tc.cfg, t0)
			if m.Mode() != tc.start {
				t.Fatalf("start mode %s, want %s", m.Mode(), tc.start)
			}
			for i, s := range tc.steps {
				var got []string
				if !s.tick.IsZero() {
					if tr, ok := m.Tick(s.tick); ok {
						got = append(got, short(tr))
					}
				} else {
					for _, tr := range m.Apply(s.ev) {
						got = append(got, short(tr))
					}
				}
				if strings.Join(got, "; ") != strings.Join(s.want, "; ") {
					t.Fatalf("step %d (%v): transitions\n got %q\nwant %q", i, describe(s), got, s.want)
				}
				if s.mode != "" && m.Mode() != s.mode {
					t.Fatalf("step %d (%v): mode %s, want %s", i, describe(s), m.Mode(), s.mode)
				}
				if d, ok := m.Next(); ok && m.Mode() != Survivable {
					t.Fatalf("step %d: hold deadline %v armed in mode %s", i, d, m.Mode())
				}
			}
		})
	}
}

func describe(s step) string {
	if !s.tick.IsZero() {
		return fmt.Sprintf("Tick(%g)", s.tick.Sub(t0).Seconds())
	}
	return s.ev.String()
}

func TestNextAndStatus(t *testing.T) {
	m := New(Config{HQ: true, Hold: 4 * time.Second}, t0)
	if _, ok := m.Next(); ok {
		t.Fatal("hold armed at start")
	}
	m.Apply(ev(CarrierDown, 1))
	st := m.Status()
	if st.Mode != Survivable || st.Healthy || st.Cause != ReasonCarrierDown || st.Carrier != "down" || st.Link != "unknown" {
		t.Fatalf("status after carrier loss: %+v", st)
	}
	m.Apply(ev(CarrierUp, 2))
	d, ok := m.Next()
	if !ok || !d.Equal(at(6)) {
		t.Fatalf("Next() = %v, %t; want %v", d, ok, at(6))
	}
	st = m.Status()
	if !st.Healthy || !st.HoldUntil.Equal(at(6)) || st.Since != at(1) || st.Reason != ReasonCarrierDown {
		t.Fatalf("status during hold: %+v", st)
	}
	m.Apply(route(RouteAdded, 3, "0.0.0.0/0 via 198.18.0.1"))
	m.Apply(target(TargetUp, 3, "udp:198.18.1.10:5060"))
	st = m.Status()
	if len(st.Routes) != 1 || !st.RoutesKnown || !st.Targets["udp:198.18.1.10:5060"] {
		t.Fatalf("facts: %+v", st)
	}
	if _, ok := m.Tick(at(6)); !ok {
		t.Fatal("no failback at the deadline")
	}
	if _, ok := m.Next(); ok {
		t.Fatal("hold still armed after failback")
	}
	if st = m.Status(); st.Mode != Normal || !st.HoldUntil.IsZero() || st.Since != at(6) {
		t.Fatalf("status after failback: %+v", st)
	}
}
