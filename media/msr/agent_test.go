package msr

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/outpost/outpost/netcfg"
)

func testConfig(servers ...string) Config {
	return Config{
		Enabled:          true,
		Name:             "msr-kazan",
		Servers:          servers,
		ServiceInterface: "wan0",
		Interfaces:       []string{"wan*", "lan*", "eth*"},
		RegisterInterval: time.Hour,
		RetryInterval:    time.Hour,
		ControlPort:      -1,
		Debounce:         5 * time.Millisecond,
		Timeout:          5 * time.Second,
	}
}

func newAgent(t testing.TB, cfg Config, n *netState, opts ...Option) *Agent {
	t.Helper()
	opts = append([]Option{WithLoad(func() int { return 42 })}, opts...)
	a, err := New(cfg, n.ch, netState0(n), nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// netState0 hands the agent the current state as its initial one and
// marks it delivered, as an appliance does with Watcher.State().
func netState0(n *netState) netcfg.State {
	st := n.state()
	n.last = st.Clone()
	return st
}

// collect reads records until every iface in want has an accepted
// REGISTER, returning those and everything else seen.
func collect(t *testing.T, r *registrar, want ...string) (got map[string]record, other []record) {
	t.Helper()
	got = map[string]record{}
	for len(got) < len(want) {
		rec := r.await("a REGISTER", func(record) bool { return true })
		if rec.answer == 200 && rec.expires() > 0 && slices.Contains(want, rec.iface()) {
			if _, dup := got[rec.iface()]; !dup {
				got[rec.iface()] = rec
				continue
			}
		}
		other = append(other, rec)
	}
	return got, other
}

func TestRegisterEveryInterface(t *testing.T) {
	reg := newRegistrar(t, nil, "127.0.0.1")
	reg.set(func(r *registrar) { r.challenge = true })
	n := baseNet(t)
	a := newAgent(t, testConfig(reg.server(0)), n)
	run(t, a)

	got, other := collect(t, reg, "wan0", "lan0", "eth0.100")
	local := a.Service().Local
	ctl := a.Control().Listen
	if !local.IsValid() || local.Addr() != netip.MustParseAddr("127.0.0.1") || !ctl.IsValid() {
		t.Fatalf("service socket %v, control listener %v", local, ctl)
	}
	p := DefaultHeaderPrefix
	for iface, addr := range map[string]string{"wan0": "127.0.0.1", "lan0": "198.18.1.1", "eth0.100": "198.18.100.1"} {
		rec := got[iface]
		if !rec.authed {
			t.Errorf("%s: accepted without credentials", iface)
		}
		aor := "sip:" + iface + ";1@msr-kazan"
		display := iface + "(" + addr + ")"
		checks := []struct{ what, got, want string }{
			{"Request-URI", rec.req.Recipient.String(), "sip:msr-kazan"},
			{"From", rec.req.From().Address.String(), aor},
			{"From display", rec.req.From().DisplayName, display},
			{"To", rec.req.To().Address.String(), aor},
			{"To display", rec.req.To().DisplayName, display},
			{"Contact", rec.req.Contact().Address.String(), "sip:" + iface + ";1@" + local.String()},
			{"source", rec.src, local.String()},
			{"Via sent-by", sentBy(rec), local.String()},
			{"Expires", rec.hdr("Expires"), "7200"},
			{p + "Iface-Name", rec.hdr(p + "Iface-Name"), iface},
			{p + "Iface-Addr", rec.hdr(p + "Iface-Addr"), addr},
			{p + "Acc-Id", rec.hdr(p + "Acc-Id"), "1"},
			{p + "Name", rec.hdr(p + "Name"), "msr-kazan"},
			{p + "Load", rec.hdr(p + "Load"), "42"},
		}
		if iface == "wan0" {
			checks = append(checks,
				struct{ what, got, want string }{p + "CC-Addr", rec.hdr(p + "CC-Addr"), "127.0.0.1"},
				struct{ what, got, want string }{p + "CC-Port", rec.hdr(p + "CC-Port"), strconv.Itoa(int(ctl.Port()))})
		} else if rec.req.GetHeader(p+"CC-Addr") != nil || rec.req.GetHeader(p+"CC-Port") != nil {
			t.Errorf("%s: control-channel fields on a non-service UA", iface)
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s: %s = %q, want %q", iface, c.what, c.got, c.want)
			}
		}
	}
	// Everything else seen was the challenged first attempt of those UAs,
	// on the same Call-ID with the CSeq before.
	if len(other) != 3 {
		t.Errorf("%d other REGISTERs, want the 3 challenged ones: %v", len(other), other)
	}
	for _, o := range other {
		acc, ok := got[o.iface()]
		if o.answer != 401 || !ok || o.req.CallID().Value() != acc.req.CallID().Value() || o.req.CSeq().SeqNo+1 != acc.req.CSeq().SeqNo {
			t.Errorf("unexpected REGISTER %v", o)
		}
	}
	st := waitStatus(t, a, "three registered", func(s []UAStatus) bool {
		return len(s) == 3 && s[0].Registered && s[1].Registered && s[2].Registered
	})
	if st[0].Interface != "wan0" || !st[0].Service || st[1].Interface != "eth0.100" || st[2].Interface != "lan0" {
		t.Errorf("status order %+v", st)
	}
	for _, s := range st {
		if s.Server != reg.server(0) || s.Target != reg.addrs[0] || s.LastStatus != 200 || s.Expires.IsZero() || s.NextRefresh.IsZero() {
			t.Errorf("status %+v", s)
		}
	}
	if got := a.Service().Announced; !slices.Equal(got, []string{"wan0", "eth0.100", "lan0"}) {
		t.Errorf("announced %v", got)
	}
	res := a.Resources()
	if len(res) != 3 || res[0].MSR != "msr-kazan" || res[0].Control != ctl || res[2].Addr != netip.MustParseAddr("198.18.1.1") || res[2].Load != 42 {
		t.Errorf("Resources = %+v", res)
	}
}

func TestFollowsInterfaceEvents(t *testing.T) {
	reg := newRegistrar(t, nil, "127.0.0.1")
	n := baseNet(t)
	a := newAgent(t, testConfig(reg.server(0)), n)
	run(t, a)
	got, _ := collect(t, reg, "wan0", "lan0", "eth0.100")

	// An interface appears (a VLAN, announced like any link).
	n.vlan(idxLAN1, "eth0.200", 200, idxETH).addr(idxLAN1, "198.18.200.1/24").push()
	added := reg.await("REGISTER of the new VLAN", registered("eth0.200"))
	if added.hdr(DefaultHeaderPrefix+"Iface-Addr") != "198.18.200.1" {
		t.Errorf("new VLAN announced as %v", added)
	}

	// It vanishes: unREGISTER on the same registration.
	n.delLink(idxLAN1).push()
	gone := reg.await("unREGISTER of the removed VLAN", unregistered("eth0.200"))
	if gone.req.CallID().Value() != added.req.CallID().Value() || gone.req.Contact().Address.String() != added.req.Contact().Address.String() {
		t.Errorf("unREGISTER %v does not match REGISTER %v", gone, added)
	}

	// An address changes: re-registered with the new one.
	n.delAddr(idxLAN, "198.18.1.1/24").addr(idxLAN, "198.18.1.7/24").push()
	moved := reg.await("REGISTER with lan0's new address", registered("lan0"))
	if moved.hdr(DefaultHeaderPrefix+"Iface-Addr") != "198.18.1.7" || moved.req.From().DisplayName != "lan0(198.18.1.7)" ||
		moved.req.CallID().Value() != got["lan0"].req.CallID().Value() {
		t.Errorf("after the address change: %v", moved)
	}

	// The last IPv4 address goes: the global IPv6 one is announced.
	n.delAddr(idxLAN, "198.18.1.7/24").push()
	v6 := reg.await("REGISTER with lan0's IPv6 address", registered("lan0"))
	if v6.hdr(DefaultHeaderPrefix+"Iface-Addr") != "2001:2:0:1::1" {
		t.Errorf("IPv6 media address: %v", v6)
	}

	// Down: unREGISTER. Up again: a new registration.
	n.setUp(idxLAN, false).push()
	down := reg.await("unREGISTER of lan0 taken down", unregistered("lan0"))
	if down.req.CallID().Value() != got["lan0"].req.CallID().Value() {
		t.Errorf("unREGISTER on another Call-ID: %v", down)
	}
	n.setUp(idxLAN, true).push()
	reg.await("REGISTER of lan0 up again", registered("lan0"))

	// Loses its only addresses: unREGISTER.
	n.delAddr(idxVLAN, "198.18.100.1/24").push()
	reg.await("unREGISTER of eth0.100 without address", unregistered("eth0.100"))
	waitStatus(t, a, "two UAs left", func(s []UAStatus) bool { return len(s) == 2 })
}

// A burst of changes costs one pass and the final state wins.
func TestBurstCoalesces(t *testing.T) {
	reg := newRegistrar(t, nil, "127.0.0.1")
	n := baseNet(t)
	cfg := testConfig(reg.server(0))
	cfg.Debounce = 500 * time.Millisecond
	a := newAgent(t, cfg, n)
	run(t, a)
	collect(t, reg, "wan0", "lan0", "eth0.100")

	prev := "198.18.1.1/24"
	for i := 2; i <= 6; i++ {
		next := "198.18.1." + strconv.Itoa(i) + "/24"
		n.delAddr(idxLAN, prev).addr(idxLAN, next).push()
		prev = next
	}
	// The five batches are queued within microseconds of each other,
	// well inside the 500 ms cool-down: one REGISTER, with the last one.
	rec := reg.await("REGISTER after the burst", registered("lan0"))
	if a := rec.hdr(DefaultHeaderPrefix + "Iface-Addr"); a != "198.18.1.6" {
		t.Errorf("first REGISTER after the burst announces %s, want the final 198.18.1.6", a)
	}
}

func TestServiceAddressChange(t *testing.T) {
	reg := newRegistrar(t, nil, "127.0.0.5")
	n := baseNet(t)
	a := newAgent(t, testConfig(reg.server(0)), n)
	run(t, a)
	got, _ := collect(t, reg, "wan0", "lan0", "eth0.100")
	oldLocal, oldCtl := a.Service().Local, a.Control().Listen

	n.delAddr(idxWAN, "127.0.0.1/8").addr(idxWAN, "127.0.0.2/8").push()
	want := map[string]bool{"wan0": true, "lan0": true, "eth0.100": true}
	unreg := map[string]bool{}
	for len(want) > 0 {
		rec := reg.await("REGISTER from the new service address", func(r record) bool { return r.answer == 200 })
		src, _ := netip.ParseAddrPort(rec.src)
		if src.Addr() != netip.MustParseAddr("127.0.0.2") {
			t.Fatalf("sent from %s after the service address moved: %v", rec.src, rec)
		}
		contact := rec.req.Contact().Address
		switch {
		case rec.expires() == 0:
			// The old contact is dropped first.
			if contact.Host != "127.0.0.1" || contact.Port != int(oldLocal.Port()) || !want[rec.iface()] {
				t.Errorf("unREGISTER %v (old local %v)", rec, oldLocal)
			}
			unreg[rec.iface()] = true
		default:
			if !unreg[rec.iface()] || contact.Host != "127.0.0.2" || rec.req.CallID().Value() != got[rec.iface()].req.CallID().Value() {
				t.Errorf("REGISTER %v (old contact dropped first: %v)", rec, unreg[rec.iface()])
			}
			if rec.iface() == "wan0" && rec.hdr(DefaultHeaderPrefix+"CC-Addr") != "127.0.0.2" {
				t.Errorf("CC-Addr %q", rec.hdr(DefaultHeaderPrefix+"CC-Addr"))
			}
			delete(want, rec.iface())
		}
	}
	if l := a.Control().Listen; l.Addr() != netip.MustParseAddr("127.0.0.2") || l == oldCtl {
		t.Errorf("control listener %v after the move (was %v)", l, oldCtl)
	}
	// The old listener is closed.
	if c, err := net.Dial("tcp", oldCtl.String()); err == nil {
		c.Close()
		t.Errorf("old control listener %v still accepts", oldCtl)
	}

	// Service interface down: nothing can be sent, registrations forgotten.
	n.setUp(idxWAN, false).push()
	waitStatus(t, a, "no UA without a service interface", func(s []UAStatus) bool {
		return len(s) == 0 && a.Service().Problem != ""
	})
	if p := a.Service().Problem; p == "" || a.Control().Listen.IsValid() {
		t.Errorf("problem %q, control %v", p, a.Control().Listen)
	}
	n.setUp(idxWAN, true).push()
	collect(t, reg, "wan0", "lan0", "eth0.100")
}

// fakeResolver answers from a table.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func TestRegistersAtEveryResolvedAddress(t *testing.T) {
	reg := newRegistrar(t, nil, "127.0.0.3", "127.0.0.4")
	port := strconv.Itoa(int(reg.addrs[0].Port()))
	n := baseNet(t)
	res := fakeResolver{"registrar.test": {netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4"), netip.MustParseAddr("2001:2::9")}}
	a := newAgent(t, testConfig("registrar.test:"+port), n, WithResolver(res))
	run(t, a)
	seen := map[string]bool{}
	for len(seen) < 6 {
		rec := reg.await("REGISTER", func(r record) bool { return r.answer == 200 && r.expires() > 0 })
		seen[rec.iface()+"@"+rec.local.String()] = true
	}
	for _, iface := range []string{"wan0", "lan0", "eth0.100"} {
		for _, ad := range reg.addrs {
			if !seen[iface+"@"+ad.String()] {
				t.Errorf("no REGISTER of %s at %v: %v", iface, ad, seen)
			}
		}
	}
	st := waitStatus(t, a, "six registrations", func(s []UAStatus) bool {
		ok := 0
		for _, x := range s {
			if x.Registered {
				ok++
			}
		}
		return ok == 6
	})
	for _, s := range st {
		if s.Server != "registrar.test:"+port {
			t.Errorf("server name %q", s.Server)
		}
	}
	svc := a.Service()
	if len(svc.Servers) != 1 || len(svc.Servers[0].Addrs) != 3 {
		t.Errorf("servers %+v", svc.Servers)
	}
	if svc.Problem != "" {
		t.Errorf("problem %q", svc.Problem)
	}
}

func TestUnansweredRetried(t *testing.T) {
	reg := newRegistrar(t, nil, "127.0.0.1")
	reg.set(func(r *registrar) { r.drop = 2 })
	n := newNetState(t)
	n.link(idxWAN, "wan0", "veth", true).addr(idxWAN, "127.0.0.1/8")
	cfg := testConfig(reg.server(0))
	// Refresh in an hour: any second REGISTER within the test is a retry.
	// The timeout is below T1 (500 ms), so sipgo sends no retransmission.
	cfg.RetryInterval = 100 * time.Millisecond
	cfg.Timeout = 300 * time.Millisecond
	a := newAgent(t, cfg, n)
	run(t, a)
	first := reg.await("first REGISTER", func(record) bool { return true })
	second := reg.await("second REGISTER", func(record) bool { return true })
	third := reg.await("third REGISTER", func(record) bool { return true })
	if first.answer != 0 || second.answer != 0 || third.answer != 200 {
		t.Errorf("answers %d %d %d, want dropped, dropped, 200", first.answer, second.answer, third.answer)
	}
	for _, r := range []record{second, third} {
		if r.req.CallID().Value() != first.req.CallID().Value() {
			t.Errorf("retry on another Call-ID")
		}
	}
	if !(first.req.CSeq().SeqNo < second.req.CSeq().SeqNo && second.req.CSeq().SeqNo < third.req.CSeq().SeqNo) {
		t.Errorf("CSeq %d %d %d not increasing: retries are new transactions", first.req.CSeq().SeqNo, second.req.CSeq().SeqNo, third.req.CSeq().SeqNo)
	}
	if b1, b2 := first.req.Via().Params, second.req.Via().Params; b1.String() == b2.String() {
		t.Errorf("same Via branch on a retry")
	}
	waitStatus(t, a, "registered after retries", func(s []UAStatus) bool { return len(s) == 1 && s[0].Registered })
}

func TestRefreshEveryInterval(t *testing.T) {
	reg := newRegistrar(t, nil, "127.0.0.1")
	n := newNetState(t)
	n.link(idxWAN, "wan0", "veth", true).addr(idxWAN, "127.0.0.1/8")
	cfg := testConfig(reg.server(0))
	cfg.RegisterInterval = 200 * time.Millisecond // retries would take an hour
	a := newAgent(t, cfg, n)
	run(t, a)
	r1 := reg.await("REGISTER", registered("wan0"))
	r2 := reg.await("refresh", registered("wan0"))
	if r2.req.CallID().Value() != r1.req.CallID().Value() || r2.req.CSeq().SeqNo <= r1.req.CSeq().SeqNo {
		t.Errorf("refresh %v after %v", r2, r1)
	}
	if r1.expires() != 1 { // 2 × 200 ms, rounded up to whole seconds
		t.Errorf("Expires %d, want 1", r1.expires())
	}
}

func TestWrongPassword(t *testing.T) {
	reg := newRegistrar(t, nil, "127.0.0.1")
	reg.set(func(r *registrar) { r.challenge, r.password = true, "other" })
	n := newNetState(t)
	n.link(idxWAN, "wan0", "veth", true).addr(idxWAN, "127.0.0.1/8")
	a := newAgent(t, testConfig(reg.server(0)), n)
	run(t, a)
	r1 := reg.await("REGISTER", func(record) bool { return true })
	r2 := reg.await("REGISTER with credentials", func(record) bool { return true })
	if r1.answer != 401 || r2.answer != 401 || r2.req.GetHeader("Authorization") == nil {
		t.Errorf("%v / %v", r1, r2)
	}
	st := waitStatus(t, a, "401 reported", func(s []UAStatus) bool { return len(s) == 1 && s[0].LastStatus == 401 })
	if st[0].Registered || st[0].LastError == "" {
		t.Errorf("status %+v", st[0])
	}
}

func TestReconfigure(t *testing.T) {
	reg := newRegistrar(t, nil, "127.0.0.1")
	n := newNetState(t)
	n.link(idxWAN, "wan0", "veth", true).addr(idxWAN, "127.0.0.1/8")
	n.link(idxLAN, "lan0", "veth", true).addr(idxLAN, "198.18.1.1/24")
	cfg := testConfig(reg.server(0))
	a := newAgent(t, cfg, n)
	run(t, a)
	collect(t, reg, "wan0", "lan0")
	ctx := t.Context()

	// A new name is a new AOR: the old one is dropped, the new registered.
	cfg.Name = "msr-kazan2"
	if err := a.Reconfigure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 4 {
		rec := reg.await("REGISTER after the rename", func(r record) bool { return r.answer == 200 })
		name := rec.hdr(DefaultHeaderPrefix + "Name")
		switch {
		case rec.expires() == 0 && name == "msr-kazan" && rec.req.To().Address.Host == "msr-kazan":
			seen["un "+rec.iface()] = true
		case rec.expires() > 0 && name == "msr-kazan2" && rec.req.To().Address.String() == "sip:"+rec.iface()+";1@msr-kazan2":
			seen["re "+rec.iface()] = true
		default:
			t.Errorf("unexpected %v", rec)
		}
	}

	// A control port that cannot be bound: refused, the previous kept.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	before := a.Control().Listen
	bad := cfg
	bad.ControlPort = busy.Addr().(*net.TCPAddr).Port
	if err := a.Reconfigure(ctx, bad); err == nil {
		t.Error("Reconfigure to a taken control port succeeded")
	}
	if a.Control().Listen != before {
		t.Errorf("control listener %v, want the previous %v", a.Control().Listen, before)
	}
	if err := a.Reconfigure(ctx, Config{Enabled: true}); err == nil {
		t.Error("invalid configuration accepted")
	}

	// Disabled: everything unregistered, the listener closed.
	off := cfg
	off.Enabled = false
	if err := a.Reconfigure(ctx, off); err != nil {
		t.Fatal(err)
	}
	reg.await("unREGISTER of wan0", unregistered("wan0"))
	waitStatus(t, a, "nothing registered when disabled", func(s []UAStatus) bool { return len(s) == 0 })
	if a.Control().Listen.IsValid() || a.Service().Problem != "disabled" {
		t.Errorf("disabled: control %v, problem %q", a.Control().Listen, a.Service().Problem)
	}
}

// Stopping the agent unREGISTERs every UA.
func TestShutdownUnregisters(t *testing.T) {
	reg := newRegistrar(t, nil, "127.0.0.1")
	n := baseNet(t)
	a := newAgent(t, testConfig(reg.server(0)), n)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	collect(t, reg, "wan0", "lan0", "eth0.100")
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	un := map[string]bool{}
	for len(un) < 3 {
		rec := reg.await("unREGISTER at shutdown", func(r record) bool { return r.expires() == 0 })
		un[rec.iface()] = true
	}
	if len(a.Status()) != 0 {
		t.Errorf("status after Run: %+v", a.Status())
	}
	if err := a.Run(ctx); err != nil { // a second Run on a done context returns at once
		t.Errorf("second Run: %v", err)
	}
}

func TestRunTwice(t *testing.T) {
	n := newNetState(t)
	a := newAgent(t, Config{}, n)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = a.Run(ctx)
	}()
	waitRunning(t, a)
	if err := a.Run(ctx); !errors.Is(err, ErrRunning) {
		t.Errorf("second concurrent Run = %v", err)
	}
	cancel()
	wg.Wait()
}

// waitRunning waits for the first reconcile of a disabled agent.
func waitRunning(t *testing.T, a *Agent) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for a.Service().Problem != "disabled" {
		select {
		case <-a.poke:
		case <-deadline.C:
			t.Fatal("agent not running")
		}
	}
}

// An IPv6 service address: bracketed hosts in Via and Contact, v6
// targets only.
func TestIPv6Service(t *testing.T) {
	reg := newRegistrar(t, nil, "::1")
	n := newNetState(t)
	n.link(idxWAN, "wan0", "veth", true).addr(idxWAN, "::1/128")
	n.link(idxLAN, "lan0", "veth", true).addr(idxLAN, "198.18.1.1/24")
	a := newAgent(t, testConfig(reg.server(0), "127.0.0.1:5060"), n)
	run(t, a)
	got, _ := collect(t, reg, "wan0", "lan0")
	local := a.Service().Local
	for _, r := range got {
		if r.src != local.String() || sentBy(r) != local.String() ||
			r.req.Contact().Address.String() != "sip:"+r.iface()+";1@"+local.String() {
			t.Errorf("%v (local %v, via %q)", r, local, sentBy(r))
		}
	}
	if got["wan0"].hdr(DefaultHeaderPrefix+"CC-Addr") != "::1" {
		t.Errorf("CC-Addr %q", got["wan0"].hdr(DefaultHeaderPrefix+"CC-Addr"))
	}
	// The IPv4 server is not tried from a v6 socket.
	st := waitStatus(t, a, "two registered", func(s []UAStatus) bool { return len(s) == 2 && s[0].Registered && s[1].Registered })
	for _, s := range st {
		if !s.Target.Addr().Is6() {
			t.Errorf("v4 target from a v6 socket: %+v", s)
		}
	}
}

// sentBy is the top Via's sent-by as on the wire (sipgo's SentBy does
// not bracket IPv6 hosts).
func sentBy(r record) string {
	v := r.req.Via()
	return net.JoinHostPort(v.Host, strconv.Itoa(v.Port))
}
