package gateway

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/dialplan"
	"github.com/outpost/outpost/gateway/siptest"
	"github.com/outpost/outpost/siptarget"
)

// fakeHQ is an HQ server: a SIP user agent on one loopback socket that
// calls the box from there and answers the box's INVITEs 486, recording
// the caller (From user) of each.
type fakeHQ struct {
	name   string
	addr   string // "127.0.0.1:port": the trunk's only target
	client *sipgo.Client
	mu     sync.Mutex
	dialed []string // From users of the INVITEs the box sent here
}

func newFakeHQ(t *testing.T, name string) *fakeHQ {
	t.Helper()
	u := siptest.NewUA(t, sipgo.WithUserAgent("hq-"+name))
	h := &fakeHQ{name: name}
	u.Server.OnInvite(func(req *sip.Request, tx sip.ServerTransaction) {
		u.Busy.Add(1)
		defer u.Busy.Add(-1)
		h.mu.Lock()
		h.dialed = append(h.dialed, req.From().Address.User)
		h.mu.Unlock()
		_ = tx.Respond(sip.NewResponseFromRequest(req, sip.StatusBusyHere, "Busy Here", nil))
	})
	u.Server.OnAck(func(*sip.Request, sip.ServerTransaction) {})
	h.addr = u.ListenUDP()
	h.client = u.Client()
	return h
}

// call calls extension 1001 at the box as caller, from the HQ's socket
// (where the box trusts HQ by address), and returns the final status.
func (h *fakeHQ) call(t *testing.T, box, caller string) int {
	t.Helper()
	ap := netip.MustParseAddrPort(h.addr)
	req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", User: "1001", Host: "box"})
	req.SetDestination(strings.TrimPrefix(box, "udp:"))
	req.Laddr = sip.Addr{IP: ap.Addr().AsSlice(), Port: int(ap.Port())}
	from := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: caller, Host: "hq"}}
	from.Params.Add("tag", sip.GenerateTagN(8))
	req.AppendHeader(from)
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: "1001", Host: "box"}})
	req.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: caller, Host: ap.Addr().String(), Port: int(ap.Port())}})
	return siptest.Do(t, h.client, req).StatusCode
}

func (h *fakeHQ) callers() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.dialed...)
}

// Pushes alternate between two HQ trunks, each with another HQ as its only
// target, while both HQs call a user whose voicemail pilot is routed to
// HQ. A call from HQ is trusted by its source under the trunk in force, so
// a call from A can only be taken under A's trunk: its voicemail leg must
// then go to A, never to B (and the reverse). A request that read the
// trust of one push and dialled with another would send it to the wrong
// HQ.
func TestPushesSwapTrunksUnderCalls(t *testing.T) {
	hqs := []*fakeHQ{newFakeHQ(t, "a"), newFakeHQ(t, "b")}
	cfgOf := func(h *fakeHQ) Config {
		cfg := testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"})
		cfg.HQTrunk = &HQConfig{Static: []siptarget.Target{siptarget.MustParse("udp:"+h.addr, "")}}
		cfg.Dialplan = dialplan.Config{Rules: []dialplan.Rule{
			{Name: "vm", Match: `^5000$`, Route: dialplan.RouteHQ},
			{Name: "local", Match: `^1\d{3}$`, Route: dialplan.RouteLocal},
		}}
		cfg.Voicemail = Voicemail{Pilot: "5000", Users: []string{"1001"}}
		return cfg
	}
	s := startServer(t, cfgOf(hqs[0]))
	box := s.Listeners()[0]

	// Both HQs call without pause; each push waits until a call from the
	// HQ it made trusted was taken, so every push lands among calls in
	// flight from both.
	const pushes, maxCalls = 20, 2000
	var trusted [2]atomic.Int32
	ctx, cancel := context.WithCancel(t.Context())
	var callers sync.WaitGroup
	for i, h := range hqs {
		callers.Go(func() {
			for n := 0; n < maxCalls && ctx.Err() == nil; n++ {
				switch code := h.call(t, box, fmt.Sprintf("%s-%d", h.name, n)); code {
				case sip.StatusTemporarilyUnavailable: // trusted, forwarded to HQ's voicemail, which was busy
					trusted[i].Add(1)
				case sip.StatusProxyAuthRequired: // not HQ under the trunk in force: a caller to challenge
				default:
					t.Errorf("call %s-%d: %d", h.name, n, code)
				}
			}
		})
	}
	for i := 1; i <= pushes; i++ {
		h := i % 2
		before := trusted[h].Load()
		if err := s.Reconfigure(ctx, cfgOf(hqs[h])); err != nil {
			t.Errorf("push %d: %v", i, err)
			break
		}
		siptest.Until(t, "a call from HQ "+hqs[h].name+" trusted", func() bool { return trusted[h].Load() > before })
	}
	cancel()
	callers.Wait()

	for i, h := range hqs {
		if trusted[i].Load() == 0 {
			t.Errorf("no call from HQ %s was trusted: the test proved nothing", h.name)
		}
		for _, c := range h.callers() {
			if !strings.HasPrefix(c, h.name+"-") {
				t.Errorf("HQ %s was dialled for %s's call: trusted under one trunk, dialled under another", h.name, c)
			}
		}
		if got := len(h.callers()); got != int(trusted[i].Load()) {
			t.Errorf("HQ %s: %d voicemail legs for %d trusted calls", h.name, got, trusted[i].Load())
		}
	}
}
