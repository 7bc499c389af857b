package gateway

import (
	"errors"
	"testing"

	"github.com/outpost/outpost/siptarget"
)

// TLS to HQ or a PSTN gateway is refused when configured (no TLS client
// configuration yet), not dropped target by target at call time.
func TestTLSTargetsRefused(t *testing.T) {
	for name, hq := range map[string]HQConfig{
		"srv transport": {Domain: "hq.example", Transport: siptarget.TLS, DNSServers: []string{"127.0.0.1:53"}},
		"static target": {Static: []siptarget.Target{siptarget.MustParse("198.18.1.10", ""), siptarget.MustParse("tls:198.18.1.11", "")}},
	} {
		if _, err := newHQTrunk(hq); !errors.Is(err, errNoTLS) {
			t.Errorf("%s: newHQTrunk = %v, want errNoTLS", name, err)
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
