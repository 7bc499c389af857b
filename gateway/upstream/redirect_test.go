package upstream

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/gateway/siptest"
)

// A Director (A) sends the user to its home pool (B) with 302: the user
// registers at B, its refreshes go to B, and when B fails (503) it is
// back to the normal order (A, which now accepts it).
func TestRedirectSticksUntilFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newHQ(t, "A", time.Hour), newHQ(t, "B", time.Hour)
		a.redirect = "<sip:" + hqB + ">"
		tr := &trunk{targets: []string{"udp:" + hqA}}
		ag := start(t, fakeNet{hqA: a, hqB: b}, Config{Trunk: tr, Expires: 120 * time.Second})
		ag.Set("1001")
		settle(0)
		if got := summary(a.records()); got != "1001 302 e=120" {
			t.Fatalf("A saw %s", got)
		}
		if got := summary(b.records()); got != "1001 401 e=120; 1001 200 e=120 nc=1" {
			t.Fatalf("B saw %s", got)
		}
		e := entryOf(t, ag, "1001")
		if e.State != StateRegistered || e.Target != "udp:"+hqB || !e.Redirected {
			t.Fatalf("status %+v", e)
		}
		// The redirect is no verdict on A's health; B is not the trunk's.
		if got := tr.got(); got != "udp:"+hqA+" 302" {
			t.Fatalf("reports %q", got)
		}

		settle(2 * 88 * time.Second) // two refreshes, both at B
		if got := summary(a.records()); got != "1001 302 e=120" {
			t.Fatalf("A saw refreshes: %s", got)
		}
		if got := summary(b.records()[2:]); got != "1001 200 e=120 nc=2; 1001 200 e=120 nc=3" {
			t.Fatalf("refreshes at B: %s", got)
		}

		b.set(func(h *hq) { h.status = 503 })
		a.set(func(h *hq) { h.redirect = "" })
		settle(88 * time.Second)
		if got := summary(b.records()[4:]); got != "1001 503 e=120" {
			t.Fatalf("B after failing: %s", got)
		}
		if got := summary(a.records()[1:]); got != "1001 401 e=120; 1001 200 e=120 nc=1" {
			t.Fatalf("A after B failed: %s", got)
		}
		if e := entryOf(t, ag, "1001"); e.State != StateRegistered || e.Target != "udp:"+hqA || e.Redirected {
			t.Fatalf("status %+v", e)
		}
	})
}

func TestRedirectLoopsAndHops(t *testing.T) {
	for _, tc := range []struct {
		name    string
		chain   map[string]string // HQ → where it redirects
		wantErr string
		sent    int // REGISTERs sent in the first job
	}{
		{"loop A→B→A", map[string]string{hqA: hqB, hqB: hqA}, "redirect loop", 2},
		{"self", map[string]string{hqA: hqA}, "redirect loop", 1},
		{"six hops", map[string]string{hqA: "198.18.9.1:5060", "198.18.9.1:5060": "198.18.9.2:5060",
			"198.18.9.2:5060": "198.18.9.3:5060", "198.18.9.3:5060": "198.18.9.4:5060",
			"198.18.9.4:5060": "198.18.9.5:5060", "198.18.9.5:5060": "198.18.9.6:5060",
			"198.18.9.6:5060": hqB}, "more than 5 redirects", 6},
		{"five hops are fine", map[string]string{hqA: "198.18.9.1:5060", "198.18.9.1:5060": "198.18.9.2:5060",
			"198.18.9.2:5060": "198.18.9.3:5060", "198.18.9.3:5060": "198.18.9.4:5060",
			"198.18.9.4:5060": hqB}, "", 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := fakeNet{hqB: newHQ(t, "B", time.Hour)}
				for from, to := range tc.chain {
					h := newHQ(t, from, time.Hour)
					h.redirect = "<sip:" + to + ">;q=0.5"
					net[from] = h
				}
				ag := start(t, net, Config{Trunk: Static{hqA}})
				ag.Set("1001")
				settle(0)
				sent := 0
				for _, h := range net {
					sent += len(h.records())
				}
				e := entryOf(t, ag, "1001")
				if tc.wantErr == "" {
					if e.State != StateRegistered || e.Target != "udp:"+hqB || sent != tc.sent {
						t.Fatalf("status %+v after %d REGISTERs", e, sent)
					}
					return
				}
				if e.State != StateFailed || !strings.Contains(e.Error, tc.wantErr) || sent != tc.sent {
					t.Fatalf("status %+v after %d REGISTERs, want failed with %q after %d", e, sent, tc.wantErr, tc.sent)
				}
			})
		})
	}
}

func TestMovedTo(t *testing.T) {
	res := sip.NewResponseFromRequest(sip.NewRequest(sip.REGISTER, sip.Uri{Scheme: "sip", Host: domain}), 302, "Moved", nil)
	for _, c := range []string{
		"<sip:pool2.hq.example;transport=tcp>;q=0.5",
		"<sips:198.18.1.20>;q=0.9",
		"<sip:[2001:db8::5]:5070>",
		"<tel:+78435551000>",
		"<sip:198.18.1.21:5062;transport=sctp>",
	} {
		res.AppendHeader(sip.NewHeader("Contact", c))
	}
	back, err := siptest.RoundTrip(res)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range movedTo(back, "udp") {
		got = append(got, m.name+" "+m.transport+" "+m.dest)
	}
	want := "udp:[2001:db8::5]:5070 UDP [2001:db8::5]:5070; tls:198.18.1.20:5061 TLS 198.18.1.20:5061; tcp:pool2.hq.example:5060 TCP pool2.hq.example:5060"
	if strings.Join(got, "; ") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(got, "; "), want)
	}
}

// A user removed while redirected is withdrawn where it is registered,
// and the redirect target is not reported to the Trunk.
func TestRedirectedRemove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newHQ(t, "A", time.Hour), newHQ(t, "B", time.Hour)
		a.redirect = "<sip:" + hqB + ">"
		tr := &trunk{targets: []string{"udp:" + hqA}}
		ag := start(t, fakeNet{hqA: a, hqB: b}, Config{Trunk: tr})
		ag.Set("1001")
		settle(0)
		ag.Remove("1001")
		settle(time.Second)
		if got := summary(b.records()); got != "1001 401 e=3600; 1001 200 e=3600 nc=1; 1001 200 e=0 nc=2" {
			t.Fatalf("B saw %s", got)
		}
		if got := summary(a.records()); got != "1001 302 e=3600" {
			t.Fatalf("A saw %s", got)
		}
		if got := tr.got(); got != "udp:"+hqA+" 302" {
			t.Fatalf("reports %q", got)
		}
		if st := ag.Status(); len(st) != 0 {
			t.Fatalf("status %+v", st)
		}
	})
}

// A Director's 302 names the user's home (B) and its backup (C, a lower
// q): the user registers at B, and when B fails a refresh (503) the
// refresh goes to C at once, not back to the Director.
func TestRedirectBackupContact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, c := newHQ(t, "A", time.Hour), newHQ(t, "B", time.Hour), newHQ(t, "C", time.Hour)
		a.redirect = "<sip:" + hqB + ">;q=1.0, <sip:" + hqC + ">;q=0.5"
		tr := &trunk{targets: []string{"udp:" + hqA}}
		ag := start(t, fakeNet{hqA: a, hqB: b, hqC: c}, Config{Trunk: tr, Expires: 120 * time.Second})
		ag.Set("1001")
		settle(0)
		if e := entryOf(t, ag, "1001"); e.State != StateRegistered || e.Target != "udp:"+hqB || !e.Redirected {
			t.Fatalf("status after the 302: %+v", e)
		}
		if got := summary(c.records()); got != "" {
			t.Fatalf("the backup saw %s before the home failed", got)
		}
		b.set(func(h *hq) { h.status = 503 })
		settle(88 * time.Second)
		if got := summary(c.records()); got != "1001 401 e=120; 1001 200 e=120 nc=1" {
			t.Fatalf("the backup after the home's 503: %s", got)
		}
		if got := summary(a.records()); got != "1001 302 e=120" {
			t.Fatalf("the Director was asked again: %s", got)
		}
		if e := entryOf(t, ag, "1001"); e.State != StateRegistered || e.Target != "udp:"+hqC || !e.Redirected {
			t.Fatalf("status after the home failed: %+v", e)
		}
	})
}

// The same 302 while the home is already failing: the first REGISTER
// goes on to the backup Contact in the same job.
func TestRedirectBackupContactAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, c := newHQ(t, "A", time.Hour), newHQ(t, "B", time.Hour), newHQ(t, "C", time.Hour)
		a.redirect = "<sip:" + hqB + ">;q=1.0, <sip:" + hqC + ">;q=0.5"
		b.status = 503
		ag := start(t, fakeNet{hqA: a, hqB: b, hqC: c}, Config{Trunk: &trunk{targets: []string{"udp:" + hqA}}, Expires: 120 * time.Second})
		ag.Set("1001")
		settle(0)
		if got := summary(b.records()); got != "1001 503 e=120" {
			t.Fatalf("the home saw %s", got)
		}
		if e := entryOf(t, ag, "1001"); e.State != StateRegistered || e.Target != "udp:"+hqC || !e.Redirected {
			t.Fatalf("status: %+v", e)
		}
	})
}

// tlsTrunk is a trunk that opens TLS connections to registrars a 3xx
// names by host: each host:port it knows leads to an address in the net.
type tlsTrunk struct {
	trunk
	to    map[string]string // "host:port" → "ip:port"
	asked []string
}

func (s *tlsTrunk) ConnectRedirect(_ context.Context, hostport string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, hostport)
	if d, ok := s.to[hostport]; ok {
		return d, nil
	}
	return "", errors.New("tls: handshake refused")
}

// A Director's 302 to a sips: pool by name: the REGISTER and its refresh
// go over the connection the trunk opened for that name (its default
// TLS port), to the address it reached; the user stays at the pool's
// name.
func TestRedirectToTLSPoolByName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newHQ(t, "A", time.Hour), newHQ(t, "B", time.Hour)
		a.redirect = "<sips:pool2.hq.example>"
		tr := &tlsTrunk{trunk: trunk{targets: []string{"udp:" + hqA}}, to: map[string]string{"pool2.hq.example:5061": hqB}}
		ag := start(t, fakeNet{hqA: a, hqB: b}, Config{Trunk: tr, Expires: 120 * time.Second})
		ag.Set("1001")
		settle(0)
		if got := summary(b.records()); got != "1001 401 e=120; 1001 200 e=120 nc=1" {
			t.Fatalf("the pool saw %s", got)
		}
		e := entryOf(t, ag, "1001")
		if e.State != StateRegistered || e.Target != "tls:pool2.hq.example:5061" || !e.Redirected {
			t.Fatalf("status %+v", e)
		}
		settle(88 * time.Second)
		if got := summary(b.records()[2:]); got != "1001 200 e=120 nc=2" {
			t.Fatalf("refresh at the pool: %s", got)
		}
		tr.mu.Lock()
		asked := strings.Join(tr.asked, " ")
		tr.mu.Unlock()
		if asked != "pool2.hq.example:5061 pool2.hq.example:5061" {
			t.Errorf("TLS connections asked for %q, want the pool's name twice", asked)
		}
	})
}
