package gateway

import (
	"net"
	"testing"
	"time"

	"github.com/outpost/outpost/siptarget"
)

// With pstn.options_interval_ms set, a silent PSTN gateway is probed down
// (health.DefaultDownAfter failed OPTIONS) before any call finds out; an
// unprobed configuration lists the gateways up, in order.
func TestPSTNGatewayProbes(t *testing.T) {
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	cfg := testConfig(Listen{Transport: "udp", Addr: "127.0.0.1:0"})
	cfg.PSTN = []PSTNGateway{
		{Name: "dead", Target: siptarget.MustParse("udp:"+silent.LocalAddr().String(), siptarget.UDP)},
		{Name: "other", Target: siptarget.MustParse("udp:198.18.3.2:5060", siptarget.UDP)},
	}
	s := startServer(t, cfg)
	if hs := s.PSTNHealth(); len(hs) != 2 || hs[0].Name != "dead" || !hs[0].Up || hs[0].Probed || hs[1].Name != "other" {
		t.Fatalf("unprobed health: %+v", hs)
	}

	cfg.PSTN = cfg.PSTN[:1]
	cfg.PSTNProbeInterval = 100 * time.Millisecond
	if err := s.Reconfigure(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		hs := s.PSTNHealth()
		if len(hs) == 1 && !hs[0].Up && hs[0].Probed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("silent gateway not probed down: %+v", hs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	buf := make([]byte, 2048)
	silent.SetReadDeadline(time.Now().Add(time.Second))
	if n, _, err := silent.ReadFrom(buf); err != nil || string(buf[:8]) != "OPTIONS " {
		t.Fatalf("the gateway got %q (%v), want an OPTIONS probe", buf[:n], err)
	}
}
