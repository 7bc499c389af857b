package gateway

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/outpost/outpost/siptarget"
)

// TLS to HQ is accepted (hqtls.go), with its CA and client certificate
// checked when the trunk is built; a PSTN gateway over TLS is still
// refused when configured, not dropped at call time.
func TestTLSTargets(t *testing.T) {
	for name, hq := range map[string]HQConfig{
		"srv transport": {Domain: "hq.example", Transport: siptarget.TLS, DNSServers: []string{"127.0.0.1:53"}},
		"static target": {Static: []siptarget.Target{siptarget.MustParse("198.18.1.10", ""), siptarget.MustParse("tls:198.18.1.11", "")}},
	} {
		if _, err := newHQTrunk(hq); err != nil {
			t.Errorf("%s: newHQTrunk = %v", name, err)
		}
	}
	for name, hq := range map[string]HQConfig{
		"bad ca":           {Domain: "hq.example", Transport: siptarget.TLS, CAPEM: "not a certificate"},
		"key without cert": {Domain: "hq.example", Transport: siptarget.TLS, ClientKeyPEM: "x"},
	} {
		if _, err := newHQTrunk(hq); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	h, err := newHQTrunk(HQConfig{Static: []siptarget.Target{siptarget.MustParse("tcp:[2001:db8::1]", ""), siptarget.MustParse("198.18.1.10:5070", "")}})
	if err != nil {
		t.Fatal(err)
	}
	names, err := h.Targets(t.Context())
	if err != nil || len(names) != 2 || names[0] != "tcp:[2001:db8::1]:5060" || names[1] != "udp:198.18.1.10:5070" {
		t.Errorf("targets %q, %v", names, err)
	}

	cfg := testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"})
	cfg.PSTN = []PSTNGateway{{Name: "gw", Target: siptarget.MustParse("tls:198.18.3.2", "")}}
	if s, err := New(t.Context(), cfg, nil, nil); err == nil {
		s.Close()
		t.Error("a PSTN gateway over TLS was accepted")
	}
}

// okPinger answers every probe at once.
type okPinger struct{}

func (okPinger) Ping(context.Context, string) (time.Duration, error) { return time.Millisecond, nil }

// The backup pool's targets come after the primary's, so a call reaches
// them only after every primary target failed by the retry rule; once no
// primary target is eligible (down by its probes) the backup comes first.
func TestHQBackupOrder(t *testing.T) {
	h, err := newHQTrunk(HQConfig{Static: []siptarget.Target{siptarget.MustParse("198.18.1.10", "")}, DownAfter: 2,
		Backup: &HQPool{Static: []siptarget.Target{siptarget.MustParse("198.18.2.10", "")}}})
	if err != nil {
		t.Fatal(err)
	}
	const a, b = "udp:198.18.1.10:5060", "udp:198.18.2.10:5060"
	if names, err := h.Targets(t.Context()); err != nil || !slices.Equal(names, []string{a, b}) {
		t.Fatalf("targets %q, %v; want primary then backup", names, err)
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
func TestHQPoolUnresolvedAtBoot(t *testing.T) {
	silent, err := net.ListenPacket("udp", "127.0.0.1:0") // a DNS server that never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	h, err := newHQTrunk(HQConfig{Domain: "hq.test", DNSServers: []string{silent.LocalAddr().String()},
		DownAfter: 2, ProbeInterval: 100 * time.Millisecond,
		Backup: &HQPool{Static: []siptarget.Target{siptarget.MustParse("198.18.2.10", "")}}})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan HQTargetEvent, 16)
	start := time.Now()
	h.start(t.Context(), okPinger{}, func(ev HQTargetEvent) { events <- ev }, slog.New(slog.DiscardHandler))
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
