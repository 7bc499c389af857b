package appliance

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/outpost/outpost/gateway"
	"github.com/outpost/outpost/mode"
	"github.com/outpost/outpost/netcfg"
)

func TestWANEvents(t *testing.T) {
	at := time.Unix(1, 0)
	wan := netcfg.Link{Index: 2, Name: "wan0", Up: true, Carrier: true}
	lan := netcfg.Link{Index: 3, Name: "lan0", Up: true, Carrier: true}
	def := netcfg.Route{LinkName: "wan0", Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: netip.MustParseAddr("198.18.1.1")}
	kinds := func(evs []mode.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Kind.String()+" "+e.Route)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		batch []netcfg.Event
		wan   string
		want  []string
	}{
		{"no wan configured", []netcfg.Event{{Kind: netcfg.LinkDown, Link: wan}}, "", nil},
		{"other links ignored", []netcfg.Event{{Kind: netcfg.LinkDown, Link: lan}, {Kind: netcfg.CarrierDown, Link: lan}}, "wan0", nil},
		{"late join seeds levels", []netcfg.Event{{Kind: netcfg.LinkAdded, Link: wan}, {Kind: netcfg.DefaultRouteAdded, Link: wan, Route: def}}, "wan0",
			[]string{"LinkUp ", "CarrierUp ", "RouteAdded 0.0.0.0/0 via 198.18.1.1"}},
		{"cable pulled", []netcfg.Event{{Kind: netcfg.DefaultRouteRemoved, Link: wan, Route: def}, {Kind: netcfg.CarrierDown, Link: wan}}, "wan0",
			[]string{"RouteRemoved 0.0.0.0/0 via 198.18.1.1", "CarrierDown "}},
		{"admin down", []netcfg.Event{{Kind: netcfg.LinkDown, Link: wan}}, "wan0", []string{"LinkDown "}},
		{"removed", []netcfg.Event{{Kind: netcfg.LinkRemoved, Link: wan}}, "wan0", []string{"LinkDown "}},
		{"renamed away", []netcfg.Event{{Kind: netcfg.LinkChanged, Prev: wan, Link: netcfg.Link{Index: 2, Name: "old0", Up: true}}}, "wan0", []string{"LinkDown "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := wanEvents(tc.batch, tc.wan, at)
			if got := kinds(evs); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for _, e := range evs {
				if !e.At.Equal(at) {
					t.Fatalf("event %v not stamped with the batch time", e)
				}
			}
		})
	}
}

// TestHQTargetEvent: prober verdicts become mode events; a pool that
// cannot be resolved is an outage (PoolUnresolved), not "nothing known".
func TestHQTargetEvent(t *testing.T) {
	at := time.Unix(1, 0)
	for _, tc := range []struct {
		in   gateway.HQTargetEvent
		want mode.Event
	}{
		{gateway.HQTargetEvent{Target: "udp:198.18.1.10:5060", Up: true, At: at}, mode.Event{Kind: mode.TargetUp, Target: "udp:198.18.1.10:5060", At: at}},
		{gateway.HQTargetEvent{Target: "udp:198.18.1.10:5060", At: at}, mode.Event{Kind: mode.TargetDown, Target: "udp:198.18.1.10:5060", At: at}},
		{gateway.HQTargetEvent{Target: "udp:198.18.1.10:5060", Gone: true, At: at}, mode.Event{Kind: mode.TargetGone, Target: "udp:198.18.1.10:5060", At: at}},
		{gateway.HQTargetEvent{Pool: "primary hq.test", Unresolved: true, At: at}, mode.Event{Kind: mode.PoolUnresolved, Target: "primary hq.test", At: at}},
		{gateway.HQTargetEvent{Pool: "backup hq2.test", Resolved: true, At: at}, mode.Event{Kind: mode.PoolResolved, Target: "backup hq2.test", At: at}},
	} {
		if got := hqTargetEvent(tc.in); got.Kind != tc.want.Kind || got.Target != tc.want.Target || !got.At.Equal(at) {
			t.Errorf("hqTargetEvent(%+v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
