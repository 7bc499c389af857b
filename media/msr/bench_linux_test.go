package msr

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/outpost/outpost/netcfg"
)

// BenchmarkEventToRegister measures, on a real kernel, the time from an
// interface change (the netlink call that makes it returning) to the
// REGISTER announcing it arriving at the registrar, through the whole
// chain: netlink notification → netcfg.Watcher (re-read, diff) → Agent
// (cool-down, reconcile) → binding → sipgo → veth → registrar.
//
// Each iteration changes the address of 100 macvlans on lan0 as fast as
// netlink takes it (a burst), then, in "sequential", changes one at a
// time waiting for each REGISTER. Sub-benchmarks: the production
// cool-downs (Watcher 50 ms + Agent 200 ms) and 5 ms + 5 ms. Run with:
//
//	go test -run '^$' -bench EventToRegister -benchtime 3x ./media/msr/
func BenchmarkEventToRegister(b *testing.B) {
	for _, c := range []struct {
		name           string
		watcher, agent time.Duration
	}{
		{"defaults-50ms+200ms", 0, 0},
		{"debounce-5ms+5ms", 5 * time.Millisecond, 5 * time.Millisecond},
	} {
		b.Run(c.name, func(b *testing.B) { benchEventToRegister(b, c.watcher, c.agent) })
	}
}

const benchLinks = 100

func benchEventToRegister(b *testing.B, watcherDebounce, agentDebounce time.Duration) {
	nb := newNSBox(b, watcherDebounce)
	h, err := netlink.NewHandleAt(nb.box)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	parent, err := h.LinkByName("lan0")
	if err != nil {
		b.Fatal(err)
	}
	links := make([]netlink.Link, benchLinks)
	addrOf := func(i, v int) *netlink.Addr {
		a, err := netlink.ParseAddr(fmt.Sprintf("198.19.%d.%d/24", i, v))
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	for i := range links {
		mv := &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("m%d", i), ParentIndex: parent.Attrs().Index}, Mode: netlink.MACVLAN_MODE_BRIDGE}
		if err := h.LinkAdd(mv); err != nil {
			b.Fatal(err)
		}
		if err := h.AddrAdd(mv, addrOf(i, 1)); err != nil {
			b.Fatal(err)
		}
		if err := h.LinkSetUp(mv); err != nil {
			b.Fatal(err)
		}
		links[i] = mv
	}
	cfg := Config{
		Enabled: true, Name: "msr-bench", Servers: []string{nb.reg.server(0)}, ServiceInterface: "wan0",
		RegisterInterval: time.Hour, RetryInterval: time.Hour, ControlPort: -1, Debounce: agentDebounce,
	}
	a, err := New(cfg, nb.ch, netcfg.State{}, nil, WithSockets(nsSockets{nb.box}), WithLoad(func() int { return 1 }))
	if err != nil {
		b.Fatal(err)
	}
	run(b, a)
	// Everything registered first.
	seen := map[string]bool{}
	for len(seen) < benchLinks+3 {
		r := <-nb.reg.recs
		if r.answer == 200 && r.expires() > 0 {
			seen[r.iface()] = true
		}
	}

	// change moves link i to address version v (delete, then add; the
	// change is complete when AddrAdd returns).
	version := 1
	change := func(i, v int) time.Time {
		if err := h.AddrDel(links[i], addrOf(i, 3-v)); err != nil {
			b.Fatal(err)
		}
		if err := h.AddrAdd(links[i], addrOf(i, v)); err != nil {
			b.Fatal(err)
		}
		return time.Now()
	}
	// await returns when every wanted (iface → address) REGISTER arrived,
	// with their arrival times, and how many REGISTERs came meanwhile.
	await := func(want map[string]string) (map[string]time.Time, int) {
		got := map[string]time.Time{}
		n := 0
		deadline := time.After(30 * time.Second)
		for len(got) < len(want) {
			select {
			case r := <-nb.reg.recs:
				n++
				if r.answer == 200 && r.expires() > 0 && want[r.iface()] == r.hdr(DefaultHeaderPrefix+"Iface-Addr") {
					got[r.iface()] = r.at
				}
			case <-deadline:
				b.Fatalf("only %d of %d REGISTERs within 30 s", len(got), len(want))
			}
		}
		return got, n
	}

	var burst, seq, spans []time.Duration
	registers := 0
	for b.Loop() {
		version = 3 - version
		// Burst: all 100 changes back to back.
		at := make([]time.Time, benchLinks)
		want := map[string]string{}
		for i := range links {
			at[i] = change(i, version)
			want[fmt.Sprintf("m%d", i)] = fmt.Sprintf("198.19.%d.%d", i, version)
		}
		spans = append(spans, at[benchLinks-1].Sub(at[0]))
		got, n := await(want)
		registers += n
		for i := range links {
			burst = append(burst, got[fmt.Sprintf("m%d", i)].Sub(at[i]))
		}
		// Sequential: 10 single changes.
		for i := range 10 {
			v := 3 - version
			t0 := change(i, v)
			got, _ := await(map[string]string{fmt.Sprintf("m%d", i): fmt.Sprintf("198.19.%d.%d", i, v)})
			seq = append(seq, got[fmt.Sprintf("m%d", i)].Sub(t0))
			_ = change(i, version) // back, so the next burst starts alike
			await(map[string]string{fmt.Sprintf("m%d", i): fmt.Sprintf("198.19.%d.%d", i, version)})
		}
	}
	p := func(d []time.Duration, q float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		idx := int(q*float64(len(s))+0.5) - 1
		return float64(s[min(max(idx, 0), len(s)-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(p(burst, 0.50), "burst-p50-ms")
	b.ReportMetric(p(burst, 0.99), "burst-p99-ms")
	b.ReportMetric(p(burst, 1), "burst-max-ms")
	b.ReportMetric(float64(registers)/float64(len(burst)), "REGISTERs/change")
	b.ReportMetric(p(spans, 0.50), "burst-span-ms")
	b.ReportMetric(p(seq, 0.50), "single-p50-ms")
	b.ReportMetric(p(seq, 0.99), "single-p99-ms")
	b.Logf("%d burst changes (burst span p50 %.1f ms): p50 %.1f ms, p99 %.1f ms, max %.1f ms, %.3f REGISTERs/change; %d single changes: p50 %.1f ms, p99 %.1f ms",
		len(burst), p(spans, .5), p(burst, .5), p(burst, .99), p(burst, 1), float64(registers)/float64(len(burst)), len(seq), p(seq, .5), p(seq, .99))
}
