package resolve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/outpost/outpost/siptarget"
)

const srvUDP = "_sip._udp.hq.test."

func newResolver(t *testing.T, cfg Config) *Resolver {
	t.Helper()
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(1, 2))
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func resolve(t *testing.T, r *Resolver) []Target {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ts, err := r.Resolve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func addrs(ts []Target) []string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.Addr.String()
	}
	return s
}

func TestSRVPriorityOrder(t *testing.T) {
	d := startDNS(t)
	d.add(
		srvUDP+" 60 IN SRV 20 10 5070 c.hq.test.",
		srvUDP+" 60 IN SRV 10 50 5060 a.hq.test.",
		srvUDP+" 60 IN SRV 30 0 5080 d.hq.test.",
		srvUDP+" 60 IN SRV 10 50 5062 b.hq.test.",
		srvUDP+" 60 IN SRV 5 1 5090 e.hq.test.",
		"a.hq.test. 60 IN A 192.0.2.1",
		"a.hq.test. 60 IN AAAA 2001:db8::1",
		"a.hq.test. 60 IN A 192.0.2.11",
		"b.hq.test. 60 IN A 192.0.2.2",
		"c.hq.test. 60 IN AAAA 2001:db8::3",
		"d.hq.test. 60 IN A 192.0.2.4",
		"e.hq.test. 60 IN A 192.0.2.5",
	)
	for seed := range uint64(20) {
		r := newResolver(t, Config{Domain: "hq.test", Servers: []string{d.addr}, Rand: rand.New(rand.NewPCG(seed, 7))})
		ts := resolve(t, r)
		if len(ts) != 7 {
			t.Fatalf("got %d targets: %v", len(ts), addrs(ts))
		}
		for i, tg := range ts {
			if tg.Transport != "udp" {
				t.Fatalf("transport %q", tg.Transport)
			}
			if i > 0 && tg.Priority < ts[i-1].Priority {
				t.Fatalf("priority order broken: %+v", ts)
			}
		}
		if ts[0].Host != "e.hq.test" || ts[0].Addr.String() != "192.0.2.5:5090" || ts[0].Weight != 1 {
			t.Fatalf("first target %+v", ts[0])
		}
		// a (3 addresses: A, A, AAAA) and b in either order at priority 10.
		group := addrs(ts[1:5])
		wantA := []string{"192.0.2.1:5060", "192.0.2.11:5060", "[2001:db8::1]:5060"}
		var gotA []string
		for _, a := range group {
			if strings.HasSuffix(a, ":5060") {
				gotA = append(gotA, a)
			}
		}
		if fmt.Sprint(gotA) != fmt.Sprint(wantA) {
			t.Fatalf("a.hq.test not expanded A then AAAA contiguously: %v", group)
		}
		if group[0] != "192.0.2.2:5062" && group[3] != "192.0.2.2:5062" {
			t.Fatalf("b.hq.test should come before or after a's addresses: %v", group)
		}
		if ts[5].Addr.String() != "[2001:db8::3]:5070" || ts[6].Addr.String() != "192.0.2.4:5080" || ts[6].Priority != 30 {
			t.Fatalf("tail %v", addrs(ts[5:]))
		}
	}
}

// firstFreq runs the RFC 2782 ordering n times and returns how often each
// target came first; it also checks that each run is a permutation.
func firstFreq(t *testing.T, weights []uint16, n int, seed uint64) map[string]int {
	t.Helper()
	r := newResolver(t, Config{Static: static(t, "", "192.0.2.1"), Rand: rand.New(rand.NewPCG(seed, seed+1))})
	var in []srvRec
	for i, w := range weights {
		h := fmt.Sprintf("t%d", i)
		in = append(in, srvRec{target: h + ".", host: h, weight: w, priority: 1})
	}
	freq := make(map[string]int)
	for range n {
		out := r.orderSRV(in)
		seen := make(map[string]bool)
		for _, s := range out {
			seen[s.host] = true
		}
		if len(out) != len(in) || len(seen) != len(in) {
			t.Fatalf("not a permutation: %v", out)
		}
		freq[out[0].host]++
	}
	return freq
}

func within(t *testing.T, what string, got int, n int, p, tol float64) {
	t.Helper()
	f := float64(got) / float64(n)
	if math.Abs(f-p) > tol {
		t.Errorf("%s: frequency %.4f, want %.4f ± %.3f", what, f, p, tol)
	}
}

func TestWeightedSelectionDistribution(t *testing.T) {
	const n = 10000
	// RFC 2782: a random number in [0, sum] picks the first record whose
	// running sum reaches it: 61/101, 30/101, 10/101.
	freq := firstFreq(t, []uint16{60, 30, 10}, n, 42)
	within(t, "weight 60", freq["t0"], n, 61.0/101, 0.02)
	within(t, "weight 30", freq["t1"], n, 30.0/101, 0.02)
	within(t, "weight 10", freq["t2"], n, 10.0/101, 0.015)

	// Same with the records listed in another order (the shuffle and the
	// weight-0 partition must not bias).
	freq = firstFreq(t, []uint16{10, 60, 30}, n, 43)
	within(t, "weight 10 listed first", freq["t0"], n, 10.0/101, 0.015)
	within(t, "weight 60 listed second", freq["t1"], n, 61.0/101, 0.02)
}

func TestWeightZero(t *testing.T) {
	const n = 10000
	// A weight-0 record gets a small chance: 1/(sum+1).
	freq := firstFreq(t, []uint16{0, 10}, n, 5)
	within(t, "weight 0 vs 10", freq["t0"], n, 1.0/11, 0.015)
	freq = firstFreq(t, []uint16{90, 0, 10}, n, 6)
	within(t, "weight 0 vs 90+10", freq["t1"], n, 1.0/101, 0.006)
	if freq["t1"] == 0 {
		t.Error("weight 0 never picked first")
	}
	// All weights 0: uniform.
	freq = firstFreq(t, []uint16{0, 0, 0}, n, 7)
	for _, h := range []string{"t0", "t1", "t2"} {
		within(t, "all zero "+h, freq[h], n, 1.0/3, 0.02)
	}
	// Weight-0 records that are not picked early follow the weighted ones.
	r := newResolver(t, Config{Static: static(t, "", "192.0.2.1"), Rand: rand.New(rand.NewPCG(8, 9))})
	in := []srvRec{{host: "z", weight: 0}, {host: "w", weight: 65535}}
	last := 0
	for range 1000 {
		if r.orderSRV(in)[1].host == "z" {
			last++
		}
	}
	if last < 990 {
		t.Errorf("weight 0 last in only %d/1000 orders", last)
	}
}

func TestWeightedSelectionThroughResolve(t *testing.T) {
	d := startDNS(t)
	d.add(
		srvUDP+" 300 IN SRV 10 60 5060 a.hq.test.",
		srvUDP+" 300 IN SRV 10 30 5060 b.hq.test.",
		srvUDP+" 300 IN SRV 10 10 5060 c.hq.test.",
	)
	d.addExtra(srvUDP, dns.TypeSRV,
		"a.hq.test. 300 IN A 192.0.2.1", "b.hq.test. 300 IN A 192.0.2.2", "c.hq.test. 300 IN A 192.0.2.3")
	r := newResolver(t, Config{Domain: "hq.test", Servers: []string{d.addr}})
	const n = 3000
	freq := make(map[string]int)
	for range n {
		ts := resolve(t, r)
		if len(ts) != 3 {
			t.Fatalf("targets %v", addrs(ts))
		}
		freq[ts[0].Host]++
	}
	within(t, "a", freq["a.hq.test"], n, 61.0/101, 0.035)
	within(t, "b", freq["b.hq.test"], n, 30.0/101, 0.035)
	within(t, "c", freq["c.hq.test"], n, 10.0/101, 0.025)
	if q := d.total(); q != 1 {
		t.Errorf("%d queries for %d cached resolutions, want 1", q, n)
	}
}

func TestAdditionalSection(t *testing.T) {
	d := startDNS(t)
	d.add(
		srvUDP+" 60 IN SRV 10 0 5060 a.hq.test.",
		srvUDP+" 60 IN SRV 20 0 5060 b.hq.test.",
		// The zone's own records differ, to prove the additional section is used.
		"a.hq.test. 60 IN A 198.51.100.1",
		"b.hq.test. 60 IN A 192.0.2.2",
	)
	d.addExtra(srvUDP, dns.TypeSRV,
		"a.hq.test. 60 IN AAAA 2001:db8::a",
		"a.hq.test. 60 IN A 192.0.2.1",
		"unrelated.test. 60 IN A 203.0.113.9",
	)
	r := newResolver(t, Config{Domain: "hq.test", Servers: []string{d.addr}})
	got := addrs(resolve(t, r))
	want := []string{"192.0.2.1:5060", "[2001:db8::a]:5060", "192.0.2.2:5060"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if c := d.count("a.hq.test", dns.TypeA, "") + d.count("a.hq.test", dns.TypeAAAA, ""); c != 0 {
		t.Errorf("%d address queries for a target given in the additional section", c)
	}
	if c := d.count("b.hq.test", dns.TypeA, ""); c != 1 {
		t.Errorf("b.hq.test A queried %d times, want 1", c)
	}
}

func TestFallbackToAddressRecords(t *testing.T) {
	for _, tc := range []struct {
		name, transport, srv string
		nodata               bool
		port                 uint16
	}{
		{"udp NXDOMAIN", "", "_sip._udp.hq.test.", false, 5060},
		{"tcp NODATA", "tcp", "_sip._tcp.hq.test.", true, 5060},
		{"tls", "TLS", "_sips._tcp.hq.test.", false, 5061},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDNS(t)
			d.add("hq.test. 60 IN A 192.0.2.7", "hq.test. 60 IN AAAA 2001:db8::7")
			if tc.nodata {
				d.add(tc.srv + " 60 IN TXT \"no srv here\"")
			}
			r := newResolver(t, Config{Domain: "HQ.test.", Transport: siptarget.Transport(tc.transport), Servers: []string{d.addr}})
			ts := resolve(t, r)
			want := []string{
				netip.AddrPortFrom(netip.MustParseAddr("192.0.2.7"), tc.port).String(),
				netip.AddrPortFrom(netip.MustParseAddr("2001:db8::7"), tc.port).String(),
			}
			if fmt.Sprint(addrs(ts)) != fmt.Sprint(want) {
				t.Fatalf("got %v, want %v", addrs(ts), want)
			}
			wantT := strings.ToLower(tc.transport)
			if wantT == "" {
				wantT = "udp"
			}
			if ts[0].Host != "hq.test" || string(ts[0].Transport) != wantT {
				t.Fatalf("target %+v", ts[0])
			}
			if d.count(tc.srv, dns.TypeSRV, "") != 1 {
				t.Fatalf("SRV %s not queried", tc.srv)
			}
			// The negative SRV answer is cached too. tls asks _sip._tls
			// as well before the addresses.
			resolve(t, r)
			want3 := 3
			if tc.port == 5061 {
				want3 = 4
			}
			if q := d.total(); q != want3 {
				t.Fatalf("%d queries after a cached second resolution, want %d", q, want3)
			}
		})
	}
}

func TestCNAMEFollowed(t *testing.T) {
	d := startDNS(t)
	d.add(
		srvUDP+" 60 IN SRV 10 0 5060 sip.hq.test.",
		"sip.hq.test. 60 IN CNAME real.hq.test.",
		"real.hq.test. 60 IN A 192.0.2.8",
	)
	r := newResolver(t, Config{Domain: "hq.test", Servers: []string{d.addr}})
	ts := resolve(t, r)
	if len(ts) != 1 || ts[0].Addr.String() != "192.0.2.8:5060" || ts[0].Host != "sip.hq.test" {
		t.Fatalf("got %+v", ts)
	}
}

func TestNoService(t *testing.T) {
	d := startDNS(t)
	d.add(srvUDP+" 60 IN SRV 0 0 0 .", "hq.test. 60 IN A 192.0.2.7")
	r := newResolver(t, Config{Domain: "hq.test", Servers: []string{d.addr}})
	_, err := r.Resolve(context.Background())
	if !errors.Is(err, ErrNoService) {
		t.Fatalf("err = %v, want ErrNoService", err)
	}
}

func TestStaticTargets(t *testing.T) {
	d := startDNS(t)
	d.add("pbx.branch.test. 60 IN A 192.0.2.20", "pbx.branch.test. 60 IN AAAA 2001:db8::20")
	r := newResolver(t, Config{
		Domain:    "hq.test", // ignored: Static wins
		Static:    static(t, "tls", "192.0.2.10:5070", "pbx.branch.test:5080", "[2001:db8::1]", "198.51.100.1"),
		Transport: "tls",
		Servers:   []string{d.addr},
	})
	ts := resolve(t, r)
	want := []string{"192.0.2.10:5070", "192.0.2.20:5080", "[2001:db8::20]:5080", "[2001:db8::1]:5061", "198.51.100.1:5061"}
	if fmt.Sprint(addrs(ts)) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", addrs(ts), want)
	}
	wantPrio := []uint16{0, 1, 1, 2, 3}
	for i, tg := range ts {
		if tg.Priority != wantPrio[i] || tg.Transport != "tls" {
			t.Fatalf("target %d: %+v", i, tg)
		}
	}
	if ts[1].Host != "pbx.branch.test" || ts[0].Host != "192.0.2.10" {
		t.Fatalf("hosts %q %q", ts[0].Host, ts[1].Host)
	}
	if c := d.count("_sips._tcp.hq.test", dns.TypeSRV, ""); c != 0 {
		t.Fatalf("SRV queried %d times with static targets", c)
	}

	// IP literals need no DNS at all.
	r = newResolver(t, Config{Static: static(t, "", "192.0.2.10:5070")})
	if got := addrs(resolve(t, r)); fmt.Sprint(got) != "[192.0.2.10:5070]" {
		t.Fatalf("got %v", got)
	}

	// One static name that does not exist is skipped; all missing is an error.
	r = newResolver(t, Config{Static: static(t, "", "nope.branch.test:5060", "192.0.2.10"), Servers: []string{d.addr}})
	if got := addrs(resolve(t, r)); fmt.Sprint(got) != "[192.0.2.10:5060]" {
		t.Fatalf("got %v", got)
	}
	r = newResolver(t, Config{Static: static(t, "", "nope.branch.test:5060"), Servers: []string{d.addr}})
	_, err := r.Resolve(context.Background())
	if !errors.Is(err, ErrNoSuchHost) || !strings.HasPrefix(err.Error(), "gateway/resolve: A nope.branch.test: ") {
		t.Fatalf("err = %v", err)
	}
}

func TestTTLCache(t *testing.T) {
	d := startDNS(t)
	d.add(
		srvUDP+" 60 IN SRV 10 0 5060 a.hq.test.",
		"a.hq.test. 300 IN A 192.0.2.1",
	)
	clk := newClock()
	r := newResolver(t, Config{Domain: "hq.test", Servers: []string{d.addr}, Now: clk.Now})
	resolve(t, r)
	resolve(t, r)
	srvQ := func() int { return d.count(srvUDP, dns.TypeSRV, "") }
	aQ := func() int { return d.count("a.hq.test", dns.TypeA, "") }
	if srvQ() != 1 || aQ() != 1 {
		t.Fatalf("queries SRV=%d A=%d, want 1/1", srvQ(), aQ())
	}
	clk.Advance(59 * time.Second)
	resolve(t, r)
	if srvQ() != 1 {
		t.Fatalf("SRV re-queried before its TTL")
	}
	clk.Advance(2 * time.Second) // SRV (60 s) expired, A (300 s) not
	resolve(t, r)
	if srvQ() != 2 || aQ() != 1 {
		t.Fatalf("after 61 s: SRV=%d A=%d, want 2/1", srvQ(), aQ())
	}
	clk.Advance(240 * time.Second)
	resolve(t, r)
	if aQ() != 2 {
		t.Fatalf("A not re-queried after its TTL: %d", aQ())
	}
	if r.Stale() {
		t.Fatal("Stale with a live DNS")
	}
}

func TestTTLClamp(t *testing.T) {
	d := startDNS(t)
	d.add("hq.test. 1 IN A 192.0.2.1", "big.test. 86400 IN A 192.0.2.2")
	clk := newClock()
	r := newResolver(t, Config{Domain: "hq.test", Servers: []string{d.addr}, Now: clk.Now, MinTTL: 10 * time.Second, MaxTTL: time.Minute})
	resolve(t, r)
	clk.Advance(9 * time.Second)
	resolve(t, r)
	if c := d.count("hq.test", dns.TypeA, ""); c != 1 {
		t.Fatalf("TTL 1 s not raised to MinTTL: %d queries", c)
	}
	clk.Advance(2 * time.Second)
	resolve(t, r)
	if c := d.count("hq.test", dns.TypeA, ""); c != 2 {
		t.Fatalf("not re-queried after MinTTL: %d queries", c)
	}

	r = newResolver(t, Config{Static: static(t, "", "big.test"), Servers: []string{d.addr}, Now: clk.Now, MaxTTL: time.Minute})
	resolve(t, r)
	clk.Advance(61 * time.Second)
	resolve(t, r)
	if c := d.count("big.test", dns.TypeA, ""); c != 2 {
		t.Fatalf("TTL 86400 s not lowered to MaxTTL: %d queries", c)
	}
}

func TestStaleWhenServerStopped(t *testing.T) {
	d := startDNS(t)
	d.add(
		srvUDP+" 60 IN SRV 10 0 5060 a.hq.test.",
		"a.hq.test. 60 IN A 192.0.2.1",
	)
	clk := newClock()
	r := newResolver(t, Config{Domain: "hq.test", Servers: []string{d.addr}, Now: clk.Now, MinTTL: 5 * time.Second})
	fresh := addrs(resolve(t, r))
	if r.Stale() {
		t.Fatal("stale at start")
	}

	d.stop()
	clk.Advance(61 * time.Second)
	got := addrs(resolve(t, r))
	if fmt.Sprint(got) != fmt.Sprint(fresh) {
		t.Fatalf("stale answer %v, want %v", got, fresh)
	}
	if !r.Stale() {
		t.Fatal("Stale() = false while serving from a dead DNS")
	}

	d.restart()
	before := d.total()
	clk.Advance(2 * time.Second) // within the MinTTL retry hold-off: no query
	resolve(t, r)
	if d.total() != before || !r.Stale() {
		t.Fatalf("queried during hold-off (%d→%d) or not stale", before, d.total())
	}
	d.add("a.hq.test. 60 IN A 192.0.2.99") // the answer changes while we were cut off
	clk.Advance(4 * time.Second)
	got = addrs(resolve(t, r))
	if r.Stale() {
		t.Fatal("still stale after DNS came back")
	}
	if fmt.Sprint(got) != "[192.0.2.1:5060 192.0.2.99:5060]" {
		t.Fatalf("fresh answer %v", got)
	}
}

func TestStaleOnSERVFAIL(t *testing.T) {
	d := startDNS(t)
	d.add("hq.test. 60 IN A 192.0.2.1")
	clk := newClock()
	r := newResolver(t, Config{Domain: "hq.test", Servers: []string{d.addr}, Now: clk.Now})
	resolve(t, r)

	d.servfail.Store(true)
	clk.Advance(time.Hour)
	if got := addrs(resolve(t, r)); fmt.Sprint(got) != "[192.0.2.1:5060]" || !r.Stale() {
		t.Fatalf("got %v stale=%v", got, r.Stale())
	}
	d.servfail.Store(false)
	clk.Advance(6 * time.Second)
	resolve(t, r)
	if r.Stale() {
		t.Fatal("still stale after SERVFAIL ended")
	}

	// Without a previous answer a SERVFAIL is an error naming package and query.
	r = newResolver(t, Config{Domain: "hq.test", Servers: []string{d.addr}, Now: clk.Now})
	d.servfail.Store(true)
	_, err := r.Resolve(context.Background())
	var rc *RcodeError
	if !errors.As(err, &rc) || rc.Rcode != dns.RcodeServerFailure {
		t.Fatalf("err = %v, want RcodeError SERVFAIL", err)
	}
	if !strings.HasPrefix(err.Error(), "gateway/resolve: SRV _sip._udp.hq.test: server 127.0.0.1:") {
		t.Fatalf("error text %q", err)
	}
}

func TestNXDOMAINIsNotStale(t *testing.T) {
	d := startDNS(t)
	d.add("hq.test. 60 IN A 192.0.2.1")
	clk := newClock()
	r := newResolver(t, Config{Domain: "hq.test", Servers: []string{d.addr}, Now: clk.Now})
	resolve(t, r)
	d.remove("hq.test")
	clk.Advance(61 * time.Second)
	_, err := r.Resolve(context.Background())
	if !errors.Is(err, ErrNoSuchHost) {
		t.Fatalf("err = %v, want ErrNoSuchHost", err)
	}
	if !strings.HasPrefix(err.Error(), "gateway/resolve: A hq.test: ") {
		t.Fatalf("error text %q", err)
	}
	if r.Stale() {
		t.Fatal("Stale after an authoritative NXDOMAIN")
	}
	// The negative answer is cached (SOA minimum 30 s), and then a DNS outage
	// serves it stale rather than the older positive answer.
	n := d.total()
	if _, err := r.Resolve(context.Background()); !errors.Is(err, ErrNoSuchHost) || d.total() != n {
		t.Fatalf("negative answer not cached: err=%v queries %d→%d", err, n, d.total())
	}
}

func TestTruncatedRetriedOverTCP(t *testing.T) {
	d := startDNS(t)
	d.truncOver.Store(5)
	for i := range 40 {
		h := fmt.Sprintf("sip%02d.hq.test.", i)
		d.add(fmt.Sprintf("%s 60 IN SRV 10 0 5060 %s", srvUDP, h), fmt.Sprintf("%s 60 IN A 192.0.2.%d", h, i+1))
	}
	r := newResolver(t, Config{Domain: "hq.test", Servers: []string{d.addr}})
	ts := resolve(t, r)
	if len(ts) != 40 {
		t.Fatalf("%d targets, want 40", len(ts))
	}
	if u, c := d.count(srvUDP, dns.TypeSRV, "udp"), d.count(srvUDP, dns.TypeSRV, "tcp"); u != 1 || c != 1 {
		t.Fatalf("SRV queries udp=%d tcp=%d, want 1/1", u, c)
	}
	if c := d.count("sip00.hq.test", dns.TypeA, "tcp"); c != 0 {
		t.Fatalf("small answers went over TCP")
	}
}

func TestFailoverToSecondServer(t *testing.T) {
	d := startDNS(t)
	d.add("hq.test. 60 IN A 192.0.2.1")

	t.Run("closed port", func(t *testing.T) {
		r := newResolver(t, Config{Domain: "hq.test", Servers: []string{deadUDP(t), d.addr}})
		if got := addrs(resolve(t, r)); fmt.Sprint(got) != "[192.0.2.1:5060]" {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("silent server times out", func(t *testing.T) {
		silent := silentUDP(t)
		r := newResolver(t, Config{Domain: "hq.test", Servers: []string{silent, d.addr}, Timeout: 150 * time.Millisecond})
		start := time.Now()
		if got := addrs(resolve(t, r)); fmt.Sprint(got) != "[192.0.2.1:5060]" {
			t.Fatalf("got %v", got)
		}
		// One timeout for the SRV query; afterwards the answering server is asked first.
		if el := time.Since(start); el > 1500*time.Millisecond {
			t.Fatalf("took %v: the silent server was waited for more than once", el)
		}
	})
	t.Run("all dead", func(t *testing.T) {
		a, b := deadUDP(t), deadUDP(t)
		r := newResolver(t, Config{Domain: "hq.test", Servers: []string{a, b}})
		_, err := r.Resolve(context.Background())
		if err == nil {
			t.Fatal("no error with every server dead")
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "gateway/resolve: SRV _sip._udp.hq.test: ") ||
			!strings.Contains(msg, "server "+a) || !strings.Contains(msg, "server "+b) {
			t.Fatalf("error text %q", msg)
		}
	})
}

func TestContextCancel(t *testing.T) {
	r := newResolver(t, Config{Domain: "hq.test", Servers: []string{silentUDP(t)}, Timeout: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := r.Resolve(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("cancellation took %v", el)
	}
}

func TestConcurrentResolveSharesQueries(t *testing.T) {
	d := startDNS(t)
	d.add(
		srvUDP+" 60 IN SRV 10 50 5060 a.hq.test.",
		srvUDP+" 60 IN SRV 10 50 5060 b.hq.test.",
		"a.hq.test. 60 IN A 192.0.2.1",
		"b.hq.test. 60 IN A 192.0.2.2",
	)
	wait := make(chan struct{})
	d.mu.Lock()
	d.handlerWait = wait
	d.mu.Unlock()
	r, err := New(Config{Domain: "hq.test", Servers: []string{d.addr}}) // global rand source
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			ts, err := r.Resolve(context.Background())
			if err == nil && len(ts) != 2 {
				err = fmt.Errorf("targets %v", addrs(ts))
			}
			if err != nil {
				errs <- err
			}
			_ = r.Stale()
		})
	}
	time.AfterFunc(20*time.Millisecond, func() { close(wait) })
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if c := d.count(srvUDP, dns.TypeSRV, ""); c != 1 {
		t.Fatalf("%d SRV queries for 16 concurrent resolutions, want 1", c)
	}
}

func TestNewValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"empty", Config{}},
		{"bad transport", Config{Domain: "hq.test", Transport: "sctp", Servers: []string{"127.0.0.1:53"}}},
		{"bad server", Config{Domain: "hq.test", Servers: []string{"localhost:53"}}},
		{"unparsed static target", Config{Static: []siptarget.Target{{Host: "192.0.2.1"}}}},
		{"bad domain", Config{Domain: "hq..test", Servers: []string{"127.0.0.1:53"}}},
		{"min over max", Config{Domain: "hq.test", Servers: []string{"127.0.0.1"}, MinTTL: time.Hour, MaxTTL: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), "gateway/resolve: ") {
				t.Fatalf("err = %v", err)
			}
		})
	}
	if _, err := New(Config{Domain: "hq.test", Servers: []string{"127.0.0.1", "[::1]:5353"}}); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkResolveCached(b *testing.B) {
	d := startDNS(b)
	d.add(
		srvUDP+" 300 IN SRV 10 60 5060 a.hq.test.",
		srvUDP+" 300 IN SRV 10 40 5060 b.hq.test.",
		srvUDP+" 300 IN SRV 20 0 5060 c.hq.test.",
	)
	d.addExtra(srvUDP, dns.TypeSRV,
		"a.hq.test. 300 IN A 192.0.2.1", "a.hq.test. 300 IN AAAA 2001:db8::1",
		"b.hq.test. 300 IN A 192.0.2.2", "c.hq.test. 300 IN A 192.0.2.3")
	r, err := New(Config{Domain: "hq.test", Servers: []string{d.addr}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := r.Resolve(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Resolve(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// static parses targets as the gateway does (siptarget, def the transport).
func static(t testing.TB, def siptarget.Transport, ss ...string) []siptarget.Target {
	t.Helper()
	var out []siptarget.Target
	for _, s := range ss {
		g, err := siptarget.Parse(s, def)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return out
}

// A static target keeps its own transport (and the port that transport
// gave it); Dest names it the way the gateway does.
func TestStaticTransports(t *testing.T) {
	r := newResolver(t, Config{Static: static(t, "udp", "tls:192.0.2.1", "tcp:[2001:db8::1]", "192.0.2.2")})
	var got []string
	for _, tg := range resolve(t, r) {
		got = append(got, tg.Dest().String())
	}
	want := []string{"tls:192.0.2.1:5061", "tcp:[2001:db8::1]:5060", "udp:192.0.2.2:5060"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestSystemResolver: without Config.Servers the nameservers of the
// system's resolv.conf are asked (hq.dns_servers empty = system resolver),
// read at each query so that a rewritten file is followed; a file without
// a usable nameserver fails the resolution instead of the configuration.
func TestSystemResolver(t *testing.T) {
	d := startDNS(t)
	d.add(srvUDP+" 60 IN SRV 10 0 5060 a.hq.test.", "a.hq.test. 60 IN A 192.0.2.1")
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	write := func(s string) {
		if err := os.WriteFile(conf, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("# no server yet\nsearch example.com\n")
	r := newResolver(t, Config{Domain: "hq.test", ResolvConf: conf, MinTTL: time.Millisecond, MaxTTL: time.Millisecond})
	if ts, err := r.Resolve(t.Context()); err == nil {
		t.Fatalf("resolved %v without a nameserver", addrs(ts))
	}
	// A nameserver written ip:port keeps its port (the test server is on
	// port 0); a plain one gets port 53.
	write("search example.com\nnameserver " + d.addr + "\n")
	if got := addrs(resolve(t, r)); !slices.Equal(got, []string{"192.0.2.1:5060"}) {
		t.Fatalf("targets %v", got)
	}
	if _, err := New(Config{Domain: "hq.test", ResolvConf: filepath.Join(t.TempDir(), "missing")}); err != nil {
		t.Fatalf("a missing resolv.conf must fail queries, not New: %v", err)
	}
	write("nameserver 192.0.2.53\nnameserver 2001:db8::53\nnameserver resolver.example\n")
	got, err := SystemServers(conf)
	if err != nil || !slices.Equal(got, []string{"192.0.2.53:53", "[2001:db8::53]:53"}) {
		t.Fatalf("SystemServers = %v, %v", got, err)
	}
}
