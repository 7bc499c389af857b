package b2bua

import (
	"context"
	"sync"
	"testing"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/mode"
)

// fallbackRouter routes in normal mode and offers the survivable route as
// the per-call HQ fallback (as the gateway's router does with
// hq.call_fallback on).
type fallbackRouter struct {
	planRouter
	off bool // hq.call_fallback false
}

func (r fallbackRouter) HQFallback(n string) (dialplan.Decision, bool) {
	if r.off {
		return dialplan.Decision{}, false
	}
	d, ok := r.p.Outbound(n, mode.Survivable)
	return d, ok && d.Route != dialplan.RouteHQ
}

// staticTrunk is an HQ pool of fixed targets that records the reports.
type staticTrunk struct {
	targets []string
	mu      sync.Mutex
	reports []int
}

func (s *staticTrunk) Targets(context.Context) ([]string, error) { return s.targets, nil }
func (s *staticTrunk) Report(_ string, status int, _ error) {
	s.mu.Lock()
	s.reports = append(s.reports, status)
	s.mu.Unlock()
}

// TestHQPerCallFallback: every HQ target refusing a call by the retry rule
// (503) sends it at once to the PSTN with the pstn_prefix translation, and
// the CDR says so; a definite answer (486) is the caller's answer; with
// the fallback off the caller gets HQ's 503.
func TestHQPerCallFallback(t *testing.T) {
	plan, err := dialplan.Compile(dialplan.Config{HQPSTNPrefix: "+7843555", Rules: []dialplan.Rule{
		{Name: "hq", Match: `^2\d{3}$`, Route: dialplan.RouteHQ},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		hq    int  // HQ's answer
		off   bool // call_fallback false
		want  int  // the caller's final status
		viaGW bool // the PSTN gateway got the call
	}{
		{name: "503 falls back", hq: 503, want: 200, viaGW: true},
		{name: "486 is the answer", hq: 486, want: 486},
		{name: "fallback off", hq: 503, off: true, want: 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hq := newPhone(t, "hq", reject(tc.hq))
			gw := newPhone(t, "gw", answerNow)
			cdrs := make(chan CDR, 1)
			trunk := &staticTrunk{targets: []string{"udp:" + hq.addr}}
			e := newEnvRouter(t, Config{PSTNGateways: pstn("udp:" + gw.addr), HQ: trunk, OnEnd: func(c CDR) { cdrs <- c }},
				fallbackRouter{planRouter: planRouter{p: plan}, off: tc.off})
			a := newPhone(t, "1001", nil)
			ctx := testCtx(t)
			oc := a.dial(ctx, e.box, "2001", nil)
			if oc.final != tc.want {
				t.Fatalf("A got %d (%v), want %d", oc.final, oc.err, tc.want)
			}
			recv(t, hq.invites, "INVITE at HQ")
			if !tc.viaGW {
				if len(gw.invites) != 0 {
					t.Error("the PSTN gateway got the call")
				}
				e.noCalls()
				c := recv(t, cdrs, "CDR")
				if c.FallbackFrom != "" || c.Route != dialplan.RouteHQ {
					t.Errorf("CDR %+v: want route hq, no fallback", c)
				}
				return
			}
			inv := recv(t, gw.invites, "INVITE at the PSTN gateway")
			if inv.Recipient.User != "+78435552001" {
				t.Errorf("PSTN gateway Request-URI user %q, want pstn_prefix + extension", inv.Recipient.User)
			}
			if err := oc.sess.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			recv(t, gw.answered, "gateway confirmed")
			if err := oc.sess.Bye(ctx); err != nil {
				t.Fatal(err)
			}
			recv(t, gw.byes, "BYE at the gateway")
			e.noCalls()
			c := recv(t, cdrs, "CDR")
			if c.Route != dialplan.RoutePSTN || c.Target != "+78435552001" || c.FallbackFrom != dialplan.RouteHQ ||
				c.FallbackReason != "udp:"+hq.addr+": 503" || c.Disposition != Answered {
				t.Errorf("CDR %+v: want route pstn to +78435552001, fallback from hq after its 503, answered", c)
			}
			trunk.mu.Lock()
			defer trunk.mu.Unlock()
			if len(trunk.reports) != 1 || trunk.reports[0] != 503 {
				t.Errorf("trunk reports %v, want HQ's 503 only", trunk.reports)
			}
		})
	}
}
