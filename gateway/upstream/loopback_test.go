package upstream

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/siptest"
)

// These tests run the Agent over real UDP on loopback, through sipgo,
// against in-process sipgo servers standing in for HQ registrars.

// startHQ runs h as a sipgo registrar on loopback and returns its address.
func startHQ(t *testing.T, h *hq) string {
	t.Helper()
	u := siptest.NewUA(t, sipgo.WithUserAgent("hq-"+h.name))
	u.Server.OnRegister(func(req *sip.Request, tx sip.ServerTransaction) {
		if err := tx.Respond(h.handle(req)); err != nil {
			t.Logf("hq %s: respond: %v", h.name, err)
		}
	})
	return u.ListenUDP()
}

// startBox runs an Agent on a sipgo UA with one loopback listener, whose
// address becomes ContactHost and LocalAddr.
func startBox(t *testing.T, cfg Config) (*Agent, string) {
	t.Helper()
	a, addr, _ := startBoxStop(t, cfg)
	return a, addr
}

// startBoxStop is startBox that also returns a function stopping the
// Agent (a restart of the box: a new Agent, new Call-IDs).
func startBoxStop(t *testing.T, cfg Config) (*Agent, string, func()) {
	t.Helper()
	u := siptest.NewUA(t, sipgo.WithUserAgent("outpost"))
	addr := u.ListenUDP()
	cfg.ContactHost, cfg.LocalAddr, cfg.Domain = addr, addr, domain
	if cfg.Username == "" {
		cfg.Username, cfg.Password = trunkUser, trunkPass
	}
	a, err := New(u.UserAgent, cfg, siptest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := a.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	stop := func() { cancel(); wg.Wait() }
	t.Cleanup(stop) // before the UA closes (cleanups run last-in first-out)
	return a, addr, stop
}

// next waits (bounded) for the next record of h matching ok.
func next(t *testing.T, h *hq, what string, ok func(rec) bool) rec {
	t.Helper()
	timeout := time.After(siptest.Wait)
	for {
		select {
		case r := <-h.ch:
			if ok(r) {
				return r
			}
		case <-timeout:
			t.Fatalf("hq %s: no %s; saw %s", h.name, what, summary(h.records()))
		}
	}
}

// settled waits (bounded) until the Agent has filed the result of every
// job: HQ records its answer before the box reads it.
func settled(t *testing.T, a *Agent, ok func(Entry) bool) []Entry {
	t.Helper()
	var st []Entry
	siptest.Until(t, "the agent's status to settle", func() bool {
		st = a.Status()
		for _, e := range st {
			if !ok(e) {
				return false
			}
		}
		return true
	})
	return st
}

func TestLoopbackRegisterFailoverRefreshRemove(t *testing.T) {
	busy := newHQ(t, "busy", time.Hour)
	busy.status = 503
	good := newHQ(t, "good", time.Hour)
	busyAddr, goodAddr := startHQ(t, busy), startHQ(t, good)
	tr := &trunk{targets: []string{"udp:" + busyAddr, "udp:" + goodAddr}}
	a, boxAddr := startBox(t, Config{Trunk: tr, Expires: 2 * time.Second, Timeout: 2 * time.Second})

	a.Set("1001")
	first := next(t, good, "registration", func(r rec) bool { return r.Code == 200 })
	rs := good.records()
	if got := summary(rs); got != "1001 401 e=2; 1001 200 e=2 nc=1" {
		t.Fatalf("good HQ saw %s", got)
	}
	if first.Contact != "sip:1001@"+boxAddr || first.Domain != domain || first.Authz != trunkUser {
		t.Fatalf("registration %+v, want contact sip:1001@%s, AOR domain %s, digest user %s", first, boxAddr, domain, trunkUser)
	}
	if first.Source != boxAddr {
		t.Fatalf("REGISTER came from %s, not the box's listener %s", first.Source, boxAddr)
	}
	if got := summary(busy.records()); got != "1001 503 e=2" {
		t.Fatalf("busy HQ saw %s", got)
	}
	st := settled(t, a, func(e Entry) bool { return e.State != StateRegistering })
	if e := st[0]; e.State != StateRegistered || e.Target != "udp:"+goodAddr || e.Code != 200 {
		t.Fatalf("status %+v", e)
	}

	// Granted 2 s: refreshed after 1 s, pre-emptively authorised.
	refresh := next(t, good, "refresh", func(r rec) bool { return r.Expires > 0 && r.Code == 200 })
	if refresh.NC != "00000002" || refresh.CallID != first.CallID || refresh.CSeq <= first.CSeq {
		t.Fatalf("refresh %+v after %+v", refresh, first)
	}

	a.Remove("1001")
	gone := next(t, good, "unregister", func(r rec) bool { return r.Expires == 0 })
	if gone.Code != 200 || gone.Contact != "sip:1001@"+boxAddr || gone.User != "1001" {
		t.Fatalf("unregister %+v", gone)
	}
	if !strings.HasPrefix(tr.got(), fmt.Sprintf("udp:%s 503; udp:%s 200", busyAddr, goodAddr)) {
		t.Fatalf("trunk reports %q", tr.got())
	}
}

func TestLoopbackPauseResume(t *testing.T) {
	const users = 20
	h := newHQ(t, "hq", time.Hour)
	hqAddr := startHQ(t, h)
	a, _ := startBox(t, Config{Trunk: Static{"udp:" + hqAddr}, ReplayRate: 200})
	for i := range users {
		a.Set(fmt.Sprintf("%d", 1000+i))
	}
	registered := map[string]bool{}
	for len(registered) < users {
		r := next(t, h, "registration", func(r rec) bool { return r.Code == 200 })
		registered[r.User] = true
	}
	settled(t, a, func(e Entry) bool { return e.State == StateRegistered })

	a.Pause()
	paused := len(h.records())
	a.Set("2000")
	a.Remove("1000")
	if n := len(h.records()); n != paused {
		t.Fatalf("paused agent sent %s", summary(h.records()[paused:]))
	}
	a.Resume()

	replayed := map[string]bool{}
	for len(replayed) < users+1 {
		r := next(t, h, "replay", func(r rec) bool { return r.Code == 200 })
		replayed[r.User+fmt.Sprintf(" e=%d", min(r.Expires, 1))] = true
	}
	if !replayed["1000 e=0"] || !replayed["2000 e=1"] || !replayed["1019 e=1"] {
		t.Fatalf("replay: %v", replayed)
	}
	st := settled(t, a, func(e Entry) bool { return e.State != StateRegistering })
	if len(st) != users {
		t.Fatalf("after replay: %d users", len(st))
	}
	for _, e := range st {
		if e.State != StateRegistered || e.User == "1000" {
			t.Fatalf("after replay: %+v", e)
		}
	}
}
