package upstream

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The tests in this file run the Agent inside a synctest bubble against
// in-memory HQs (fakeNet): time is fake and exact, so refresh points,
// back-off and pacing are asserted to the nanosecond without waiting.

const (
	hqA = "198.18.1.10:5060"
	hqB = "198.18.1.11:5060"
	hqC = "198.18.1.12:5060"
	box = "198.18.0.2:5060"
)

// start builds an Agent over net and runs it until the test ends.
func start(t *testing.T, net fakeNet, cfg Config) *Agent {
	t.Helper()
	if cfg.ContactHost == "" {
		cfg.ContactHost = box
	}
	if cfg.Domain == "" {
		cfg.Domain = domain
	}
	if cfg.Username == "" {
		cfg.Username, cfg.Password = trunkUser, trunkPass
	}
	a, err := newAgent(net, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := a.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return a
}

// settle lets the bubble run until every goroutine waits for time.
func settle(d time.Duration) {
	synctest.Wait()
	if d > 0 {
		time.Sleep(d)
		synctest.Wait()
	}
}

func entryOf(t *testing.T, a *Agent, user string) Entry {
	t.Helper()
	for _, e := range a.Status() {
		if e.User == user {
			return e
		}
	}
	t.Fatalf("no entry for %s in %+v", user, a.Status())
	return Entry{}
}

// summary renders records as "user code expires authz-nc" for compact
// comparison.
func summary(rs []rec) string {
	var b []string
	for _, r := range rs {
		s := fmt.Sprintf("%s %d e=%d", r.User, r.Code, r.Expires)
		if r.Authz != "" {
			s += " nc=" + strings.TrimLeft(r.NC, "0")
		}
		b = append(b, s)
	}
	return strings.Join(b, "; ")
}

func TestRegisterRefreshRemove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHQ(t, "hq", time.Hour)
		tr := &trunk{targets: []string{"udp:" + hqA}}
		a := start(t, fakeNet{hqA: h}, Config{Trunk: tr, Expires: 120 * time.Second})
		t0 := time.Now()

		a.Set("1001")
		a.Set("1001") // idempotent
		settle(0)
		rs := h.records()
		if got, want := summary(rs), "1001 401 e=120; 1001 200 e=120 nc=1"; got != want {
			t.Fatalf("first registration\n got %s\nwant %s", got, want)
		}
		for _, r := range rs {
			if r.Domain != domain || r.Contact != "sip:1001@"+box {
				t.Fatalf("AOR/contact: %+v", r)
			}
		}
		if rs[1].Authz != trunkUser || rs[1].CallID != rs[0].CallID || rs[1].CSeq != rs[0].CSeq+1 {
			t.Fatalf("authorised retry: %+v after %+v", rs[1], rs[0])
		}
		e := entryOf(t, a, "1001")
		if e.State != StateRegistered || e.Code != 200 || e.Target != "udp:"+hqA ||
			!e.ExpiresAt.Equal(t0.Add(120*time.Second)) || !e.NextAt.Equal(t0.Add(88*time.Second)) {
			t.Fatalf("status %+v", e)
		}

		// Refresh at 120 s − 32 s, authorised at once with nc=2.
		settle(88*time.Second - time.Nanosecond)
		if n := len(h.records()); n != 2 {
			t.Fatalf("%d requests before the refresh point", n)
		}
		settle(time.Nanosecond)
		rs = h.records()
		if got, want := summary(rs[2:]), "1001 200 e=120 nc=2"; got != want {
			t.Fatalf("refresh: got %s, want %s", got, want)
		}
		if rs[2].CallID != rs[0].CallID || rs[2].CSeq != rs[1].CSeq+1 {
			t.Fatalf("refresh must keep Call-ID and grow CSeq: %+v", rs[2])
		}

		a.Remove("1001")
		settle(time.Second) // the pacer spaces it from the refresh
		rs = h.records()
		if got, want := summary(rs[3:]), "1001 200 e=0 nc=3"; got != want || rs[3].Contact != "sip:1001@"+box {
			t.Fatalf("unregister: got %s (%+v), want %s", got, rs[3], want)
		}
		if st := a.Status(); len(st) != 0 {
			t.Fatalf("status after remove: %+v", st)
		}
		if got, want := tr.got(), strings.Repeat("udp:"+hqA+" 200; ", 2)+"udp:"+hqA+" 200"; got != want {
			t.Fatalf("trunk reports %q", got)
		}
	})
}

func TestPauseSendsNothingResumeReplays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHQ(t, "hq", time.Hour)
		a := start(t, fakeNet{hqA: h}, Config{Trunk: Static{hqA}, Expires: time.Hour})
		for _, u := range []string{"1003", "1001", "1002"} {
			a.Set(u)
		}
		settle(time.Second)
		n := len(h.records())
		if n != 6 {
			t.Fatalf("%d requests for three registrations: %s", n, summary(h.records()))
		}

		a.Pause()
		a.Set("2000")
		a.Remove("1001")
		// Past every refresh point (3600 − 360 s), not past expiry.
		settle(3300 * time.Second)
		if rs := h.records(); len(rs) != n {
			t.Fatalf("paused agent sent %s", summary(rs[n:]))
		}
		if e := entryOf(t, a, "1001"); e.State != StateUnregistering || !e.NextAt.IsZero() {
			t.Fatalf("1001 while paused: %+v", e)
		}
		if e := entryOf(t, a, "2000"); e.State != StatePending {
			t.Fatalf("2000 while paused: %+v", e)
		}

		a.Resume()
		settle(time.Second)
		if got, want := summary(h.records()[n:]),
			"1001 200 e=0 nc=2; 1002 200 e=3600 nc=2; 1003 200 e=3600 nc=2; 2000 401 e=3600; 2000 200 e=3600 nc=1"; got != want {
			t.Fatalf("replay\n got %s\nwant %s", got, want)
		}
		var users []string
		for _, e := range a.Status() {
			users = append(users, e.User+":"+string(e.State))
		}
		if got := strings.Join(users, " "); got != "1002:registered 1003:registered 2000:registered" {
			t.Fatalf("status after resume: %s", got)
		}
	})
}

// Users removed while paused whose binding expired at HQ meanwhile are
// forgotten without a request.
func TestResumeForgetsExpiredRemovals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHQ(t, "hq", time.Hour)
		a := start(t, fakeNet{hqA: h}, Config{Trunk: Static{hqA}, Expires: 100 * time.Second})
		a.Set("1001")
		settle(0)
		a.Pause()
		a.Remove("1001")
		settle(200 * time.Second)
		a.Resume()
		settle(time.Second)
		if got := summary(h.records()); got != "1001 401 e=100; 1001 200 e=100 nc=1" {
			t.Fatalf("requests: %s", got)
		}
		if st := a.Status(); len(st) != 0 {
			t.Fatalf("status %+v", st)
		}
	})
}

func TestPauseAbandonsRequestInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHQ(t, "hq", time.Hour)
		h.silent = true
		tr := &trunk{targets: []string{hqA}}
		a := start(t, fakeNet{hqA: h}, Config{Trunk: tr, Timeout: time.Minute})
		a.Set("1001")
		settle(time.Second) // in flight, unanswered
		if e := entryOf(t, a, "1001"); e.State != StateRegistering {
			t.Fatalf("before pause: %+v", e)
		}
		a.Pause()
		settle(0)
		if e := entryOf(t, a, "1001"); e.State != StatePending || e.Code != 0 || e.Error != "" {
			t.Fatalf("after pause: %+v", e)
		}
		if got := tr.got(); got != "" {
			t.Fatalf("an abandoned request is no evidence about the target, got reports %q", got)
		}
		h.set(func(h *hq) { h.silent = false })
		a.Resume()
		settle(0)
		if e := entryOf(t, a, "1001"); e.State != StateRegistered {
			t.Fatalf("after resume: %+v", e)
		}
	})
}

func TestResumePacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const users, rate = 30, 10 // 100 ms apart
		h := newHQ(t, "hq", time.Hour)
		a := start(t, fakeNet{hqA: h}, Config{Trunk: Static{hqA}, ReplayRate: rate, Workers: 4})
		var all []string
		for i := range users {
			u := fmt.Sprintf("%d", 1000+i)
			all = append(all, u)
			a.Set(u)
		}
		settle(10 * time.Second)
		n := len(h.records())
		if n != 2*users {
			t.Fatalf("%d requests for %d first registrations", n, users)
		}
		a.Pause()
		settle(time.Minute)
		a.Resume()
		resumed := time.Now()
		settle(10 * time.Second)

		rs := h.records()[n:]
		if len(rs) != users {
			t.Fatalf("replay sent %d requests, want %d: %s", len(rs), users, summary(rs))
		}
		interval := time.Second / rate
		for i, r := range rs {
			if r.User != all[i] || r.Code != 200 {
				t.Fatalf("replay #%d: %+v, want %s answered 200", i, r, all[i])
			}
			// Fake time is exact: job i leaves i intervals after Resume.
			if got, want := r.At.Sub(resumed), time.Duration(i)*interval; got != want {
				t.Fatalf("replay #%d at +%v, want +%v", i, got, want)
			}
		}
	})
}

func TestFailover(t *testing.T) {
	tests := []struct {
		name      string
		a         func(h *hq)
		wantA     string // requests seen by target A
		wantB     string
		reports   string
		state     State
		code      int
		nextAfter time.Duration // NextAt − now
	}{
		{
			name:    "503 moves on",
			a:       func(h *hq) { h.status = 503 },
			wantA:   "1001 503 e=3600",
			wantB:   "1001 401 e=3600; 1001 200 e=3600 nc=1",
			reports: "udp:A 503; udp:B 200",
			state:   StateRegistered, code: 200, nextAfter: 3240 * time.Second,
		},
		{
			name:    "408 moves on",
			a:       func(h *hq) { h.status = 408 },
			wantA:   "1001 408 e=3600",
			wantB:   "1001 401 e=3600; 1001 200 e=3600 nc=1",
			reports: "udp:A 408; udp:B 200",
			state:   StateRegistered, code: 200, nextAfter: 3240 * time.Second,
		},
		{
			name:    "no answer moves on after Timeout",
			a:       func(h *hq) { h.silent = true },
			wantA:   "1001 0 e=0",
			wantB:   "1001 401 e=3600; 1001 200 e=3600 nc=1",
			reports: "udp:A 0 err; udp:B 200",
			state:   StateRegistered, code: 200, nextAfter: 3240 * time.Second,
		},
		{
			name:    "403 is final",
			a:       func(h *hq) { h.status = 403 },
			wantA:   "1001 403 e=3600",
			reports: "udp:A 403",
			state:   StateFailed, code: 403, nextAfter: 30 * time.Second,
		},
		{
			name:    "500 is final",
			a:       func(h *hq) { h.status = 500 },
			wantA:   "1001 500 e=3600",
			reports: "udp:A 500",
			state:   StateFailed, code: 500, nextAfter: 30 * time.Second,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := newHQ(t, "A", time.Hour), newHQ(t, "B", time.Hour)
				tc.a(a)
				tr := &trunk{targets: []string{"udp:" + hqA, "udp:" + hqB}}
				ag := start(t, fakeNet{hqA: a, hqB: b}, Config{Trunk: tr, Timeout: 5 * time.Second})
				ag.Set("1001")
				settle(5 * time.Second)
				done := time.Now()
				if got := summary(a.records()); got != tc.wantA {
					t.Errorf("A saw %q, want %q", got, tc.wantA)
				}
				if got := summary(b.records()); got != tc.wantB {
					t.Errorf("B saw %q, want %q", got, tc.wantB)
				}
				rep := strings.NewReplacer(hqA, "A", hqB, "B").Replace(tr.got())
				if rep != tc.reports {
					t.Errorf("reports %q, want %q", rep, tc.reports)
				}
				e := entryOf(t, ag, "1001")
				// The job finished at most 5 s (the timeout) before done.
				if e.State != tc.state || e.Code != tc.code || e.NextAt.Sub(done) > tc.nextAfter || e.NextAt.Sub(done) < tc.nextAfter-5*time.Second {
					t.Errorf("status %+v (next in %v), want %s %d next in %v", e, e.NextAt.Sub(done), tc.state, tc.code, tc.nextAfter)
				}
			})
		})
	}
}

func TestRetryAfterAndBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHQ(t, "hq", time.Hour)
		h.status, h.retryAfter = 503, 100
		a := start(t, fakeNet{hqA: h}, Config{Trunk: Static{hqA}, RetryInterval: 10 * time.Second})
		t0 := time.Now()
		a.Set("1001")
		settle(0)
		// 503 with Retry-After 100 beats the 10 s interval.
		if e := entryOf(t, a, "1001"); e.State != StateFailed || !e.NextAt.Equal(t0.Add(100*time.Second)) {
			t.Fatalf("after 503: %+v", e)
		}
		h.set(func(h *hq) { h.status, h.retryAfter = 500, 0 })
		var gaps []time.Duration
		last := t0.Add(100 * time.Second)
		for range 6 {
			settle(time.Until(last))
			e := entryOf(t, a, "1001")
			gaps = append(gaps, e.NextAt.Sub(last))
			last = e.NextAt
		}
		want := []time.Duration{20, 40, 80, 160, 160, 160}
		for i := range want {
			want[i] *= time.Second
		}
		if !slices.Equal(gaps, want) {
			t.Fatalf("back-off %v, want %v", gaps, want)
		}
		h.set(func(h *hq) { h.status = 0 })
		settle(time.Until(last))
		if e := entryOf(t, a, "1001"); e.State != StateRegistered {
			t.Fatalf("after recovery: %+v", e)
		}
	})
}

func TestIntervalTooBrief(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHQ(t, "hq", time.Hour)
		h.minExpires = 600
		a := start(t, fakeNet{hqA: h}, Config{Trunk: Static{hqA}, Expires: 60 * time.Second})
		t0 := time.Now()
		a.Set("1001")
		settle(0)
		if got, want := summary(h.records()), "1001 401 e=60; 1001 423 e=60 nc=1; 1001 200 e=600 nc=2"; got != want {
			t.Fatalf("got %s\nwant %s", got, want)
		}
		if e := entryOf(t, a, "1001"); !e.ExpiresAt.Equal(t0.Add(600 * time.Second)) {
			t.Fatalf("status %+v", e)
		}
		settle(600 * time.Second)
		if got := summary(h.records()[3:]); got != "1001 200 e=600 nc=3" {
			t.Fatalf("refresh keeps the raised expiry: %s", got)
		}
	})
}

func TestStaleNonce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHQ(t, "hq", 60*time.Second) // nonces live 60 s; refresh at 88 s
		a := start(t, fakeNet{hqA: h}, Config{Trunk: Static{hqA}, Expires: 120 * time.Second})
		a.Set("1001")
		settle(88 * time.Second)
		if got, want := summary(h.records()), "1001 401 e=120; 1001 200 e=120 nc=1; 1001 401 e=120 nc=2; 1001 200 e=120 nc=1"; got != want {
			t.Fatalf("got %s\nwant %s", got, want)
		}
		if e := entryOf(t, a, "1001"); e.State != StateRegistered {
			t.Fatalf("status %+v", e)
		}
	})
}

func TestWrongPassword(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHQ(t, "hq", time.Hour)
		a := start(t, fakeNet{hqA: h}, Config{Trunk: Static{hqA}, Username: trunkUser, Password: "wrong"})
		a.Set("1001")
		settle(29 * time.Second)
		if got, want := summary(h.records()), "1001 401 e=3600; 1001 401 e=3600 nc=1"; got != want {
			t.Fatalf("got %s, want %s (one answer, then give up)", got, want)
		}
		if e := entryOf(t, a, "1001"); e.State != StateFailed || e.Code != 401 {
			t.Fatalf("status %+v", e)
		}
		// Fixing the password re-registers at once.
		cfg := Config{Trunk: Static{hqA}, ContactHost: box, Domain: domain, Username: trunkUser, Password: trunkPass}
		if err := a.Reconfigure(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
		settle(0)
		if e := entryOf(t, a, "1001"); e.State != StateRegistered {
			t.Fatalf("after new password: %+v (%s)", e, summary(h.records()))
		}
	})
}

func TestReconfigureNewContact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHQ(t, "hq", time.Hour)
		cfg := Config{Trunk: Static{hqA}, ContactHost: box, Domain: domain, Username: trunkUser, Password: trunkPass}
		a := start(t, fakeNet{hqA: h}, cfg)
		a.Set("1001")
		settle(0)
		n := len(h.records())

		cfg.ContactHost = "198.18.0.77:5060" // the WAN address changed
		if err := a.Reconfigure(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
		settle(time.Second)
		rs := h.records()[n:]
		var got []string
		for _, r := range rs {
			got = append(got, fmt.Sprintf("%s e=%d %d", r.Contact, r.Expires, r.Code))
		}
		want := []string{"sip:1001@198.18.0.77:5060 e=3600 200", "sip:1001@198.18.0.2:5060 e=0 200"}
		if !slices.Equal(got, want) {
			t.Fatalf("got %q\nwant %q (new binding first, then the old one withdrawn)", got, want)
		}

		// Only the trunk changes: nothing is sent.
		cfg.Trunk = Static{hqB, hqA}
		if err := a.Reconfigure(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
		settle(time.Minute)
		if m := len(h.records()); m != n+2 {
			t.Fatalf("a trunk change re-registered: %s", summary(h.records()[n+2:]))
		}

		// An invalid config is refused and changes nothing.
		bad := cfg
		bad.ContactHost = "nope"
		if err := a.Reconfigure(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "gateway/upstream: contact host") {
			t.Fatalf("bad config: %v", err)
		}
	})
}

func TestSyncAndRemoveUnsent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHQ(t, "hq", time.Hour)
		cfg := Config{Trunk: Static{hqA}, ContactHost: box, Domain: domain, Username: trunkUser, Password: trunkPass}
		a, err := newAgent(fakeNet{hqA: h}, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Before Run: recorded, not sent; a user removed before its first
		// REGISTER costs nothing.
		a.Set("1009")
		a.Remove("1009")
		a.Sync([]string{"1001", "1002"})
		if got := len(a.Status()); got != 2 {
			t.Fatalf("status %+v", a.Status())
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { _ = a.Run(ctx) })
		defer func() { cancel(); wg.Wait() }()
		settle(time.Second)
		n := len(h.records())
		if n != 4 {
			t.Fatalf("requests %s", summary(h.records()))
		}
		a.Sync([]string{"1002", "1003"})
		settle(time.Second)
		if got, want := summary(h.records()[n:]), "1001 200 e=0 nc=2; 1003 401 e=3600; 1003 200 e=3600 nc=1"; got != want {
			t.Fatalf("sync\n got %s\nwant %s", got, want)
		}
		if err := a.Run(ctx); err != ErrRunning {
			t.Fatalf("second Run: %v", err)
		}
	})
}

func TestConfigValidation(t *testing.T) {
	good := Config{Trunk: Static{hqA}, ContactHost: box, Domain: domain}
	tests := []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"no trunk", func(c *Config) { c.Trunk = nil }, "no trunk"},
		{"no domain", func(c *Config) { c.Domain = "" }, "domain"},
		{"domain with user", func(c *Config) { c.Domain = "a@b" }, "domain"},
		{"contact without port", func(c *Config) { c.ContactHost = "198.18.0.2" }, "contact host"},
		{"contact port 0", func(c *Config) { c.ContactHost = "198.18.0.2:0" }, "contact host"},
		{"local addr not an IP", func(c *Config) { c.LocalAddr = "box:5060" }, "local addr"},
		{"transport", func(c *Config) { c.Transport = "sctp" }, "transport"},
	}
	if _, err := newAgent(fakeNet{}, good, nil); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			_, err := newAgent(fakeNet{}, c, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "gateway/upstream: ") {
				t.Fatalf("error %v, want one about %q", err, tc.want)
			}
		})
	}
	if _, err := New(nil, good, nil); err == nil {
		t.Fatal("New without a user agent")
	}
}

func TestRefreshIn(t *testing.T) {
	for _, tc := range []struct{ granted, want time.Duration }{
		{3600 * time.Second, 3240 * time.Second}, // a tenth early
		{300 * time.Second, 268 * time.Second},   // at least 32 s early
		{60 * time.Second, 30 * time.Second},     // at most half early
		{2 * time.Second, time.Second},
	} {
		if got := refreshIn(tc.granted); got != tc.want {
			t.Errorf("refreshIn(%v) = %v, want %v", tc.granted, got, tc.want)
		}
	}
}
