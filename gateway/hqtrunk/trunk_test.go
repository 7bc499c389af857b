package hqtrunk

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/outpost/outpost/gateway/upstream"
	"github.com/outpost/outpost/siptarget"
)

// TLS to HQ is accepted, with its CA and client certificate checked when
// the trunk is built; static targets keep their transport and port.
func TestNew(t *testing.T) {
	for name, hq := range map[string]Config{
		"srv transport": {Domain: "hq.example", Transport: siptarget.TLS, DNSServers: []string{"127.0.0.1:53"}},
		"static target": {Static: []siptarget.Target{siptarget.MustParse("198.18.1.10", ""), siptarget.MustParse("tls:198.18.1.11", "")}},
	} {
		if _, err := New(hq); err != nil {
			t.Errorf("%s: New = %v", name, err)
		}
	}
	for name, hq := range map[string]Config{
		"bad ca":           {Domain: "hq.example", Transport: siptarget.TLS, CAPEM: "not a certificate"},
		"key without cert": {Domain: "hq.example", Transport: siptarget.TLS, ClientKeyPEM: "x"},
	} {
		if _, err := New(hq); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	h, err := New(Config{Static: []siptarget.Target{siptarget.MustParse("tcp:[2001:db8::1]", ""), siptarget.MustParse("198.18.1.10:5070", "")}})
	if err != nil {
		t.Fatal(err)
	}
	names, err := h.Targets(t.Context())
	if err != nil || len(names) != 2 || names[0] != "tcp:[2001:db8::1]:5060" || names[1] != "udp:198.18.1.10:5070" {
		t.Errorf("targets %q, %v", names, err)
	}

}

// okPinger answers every probe at once.
type okPinger struct{}

func (okPinger) Ping(context.Context, string) (time.Duration, error) { return time.Millisecond, nil }

// The backup pool's targets come after the primary's, so a call reaches
// them only after every primary target failed by the retry rule; once no
// primary target is eligible (down by its probes) the backup comes first.
func TestBackupOrder(t *testing.T) {
	h, err := New(Config{Static: []siptarget.Target{siptarget.MustParse("198.18.1.10", "")}, DownAfter: 2,
		Backup: &Pool{Static: []siptarget.Target{siptarget.MustParse("198.18.2.10", "")}}})
	if err != nil {
		t.Fatal(err)
	}
	const a, b = "udp:198.18.1.10:5060", "udp:198.18.2.10:5060"
	if names, err := h.Targets(t.Context()); err != nil || !slices.Equal(names, []string{a, b}) {
		t.Fatalf("targets %q, %v; want primary then backup", names, err)
	}
	if h.Backup(a) || !h.Backup(b) {
		t.Errorf("Backup(%s) = %v, Backup(%s) = %v; want false, true", a, h.Backup(a), b, h.Backup(b))
	}
	h.pools[0].tracker.Track(a)
	h.pools[1].tracker.Track(b)
	h.pools[0].tracker.ProbeResult(a, false, 0)
	h.pools[0].tracker.ProbeResult(a, false, 0)
	if names, err := h.Targets(t.Context()); err != nil || !slices.Equal(names, []string{b, a}) {
		t.Fatalf("targets %q, %v; want the backup first while the primary is down", names, err)
	}
	// A call's outcome goes to the pool the target belongs to.
	h.Report(b, 503, nil)
	if h.pools[1].tracker.Eligible(b) || h.pools[0].tracker.Knows(b) {
		t.Error("the backup target's 503 was not reported to the backup pool")
	}
}

// A pool that never resolves (its DNS server is silent) becomes
// unresolved after DownAfter failed resolutions — the box booted into an
// outage — while the backup's targets are announced as they are found;
// calls then skip the unresolved primary without waiting for DNS.
func TestPoolUnresolvedAtBoot(t *testing.T) {
	silent, err := net.ListenPacket("udp", "127.0.0.1:0") // a DNS server that never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	h, err := New(Config{Domain: "hq.test", DNSServers: []string{silent.LocalAddr().String()},
		DownAfter: 2, ProbeInterval: 100 * time.Millisecond,
		Backup: &Pool{Static: []siptarget.Target{siptarget.MustParse("198.18.2.10", "")}}})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan Event, 16)
	start := time.Now()
	h.start(t.Context(), okPinger{}, func(ev Event) { events <- ev }, slog.New(slog.DiscardHandler))
	defer h.close()
	var gotBackup, gotUnresolved bool
	for !gotBackup || !gotUnresolved {
		select {
		case ev := <-events:
			switch {
			case ev.Target == "udp:198.18.2.10:5060" && ev.Up && ev.Pool == "backup udp:198.18.2.10:5060":
				gotBackup = true
			case ev.Unresolved && ev.Pool == "primary hq.test":
				gotUnresolved = true
				if d := time.Since(start); d > time.Second {
					t.Errorf("unresolved after %v, want about 2 × 100 ms", d)
				}
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("events: backup target %v, primary unresolved %v", gotBackup, gotUnresolved)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if names, err := h.Targets(ctx); err != nil || !slices.Equal(names, []string{"udp:198.18.2.10:5060"}) {
		t.Fatalf("targets %q, %v; want the backup alone, at once", names, err)
	}
	if evs := h.forget("test"); len(evs) != 2 || !evs[0].Resolved || !evs[1].Gone {
		t.Errorf("forget = %+v, want the backup target gone and the primary pool resolved", evs)
	}
}

// The HQ trunk gives the upstream agent every resolved target with its
// priority and health, whatever its health (Targets leaves the blocked
// ones out).
func TestCandidates(t *testing.T) {
	h, err := New(Config{Static: []siptarget.Target{siptarget.MustParse("198.18.1.10", ""), siptarget.MustParse("198.18.1.11:5070", "")}})
	if err != nil {
		t.Fatal(err)
	}
	h.Report("udp:198.18.1.10:5060", 503, nil) // blocked for a while
	got, err := h.Candidates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []upstream.Candidate{
		{Target: "udp:198.18.1.10:5060", Priority: 0, Eligible: false},
		{Target: "udp:198.18.1.11:5070", Priority: 1, Eligible: true},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("candidates %+v\nwant %+v", got, want)
	}
}

// With hq.domain set, requests to a static target carry the domain in
// the Request-URI; a static IP literal without a domain keeps its address.
func TestRequestHost(t *testing.T) {
	static := []siptarget.Target{siptarget.MustParse("tls:198.18.1.10:5061", "")}
	h, err := New(Config{Domain: "hq.example", Static: static})
	if err != nil {
		t.Fatal(err)
	}
	names, err := h.Targets(t.Context())
	if err != nil || len(names) != 1 {
		t.Fatalf("targets %v, %v", names, err)
	}
	if got := h.RequestHost(names[0]); got != "hq.example" {
		t.Errorf("RequestHost(%s) = %q, want hq.example", names[0], got)
	}
	h, _ = New(Config{Static: static})
	names, _ = h.Targets(t.Context())
	if got := h.RequestHost(names[0]); got != "" {
		t.Errorf("RequestHost(%s) without domain = %q, want the address", names[0], got)
	}
}
