package gateway

import (
	"testing"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/siptarget"
)

// Trunks are trusted by the address of their targets, IPv6 included,
// whatever port and transport the request came from; names never match.
func TestSourceIsOneOf(t *testing.T) {
	targets := []siptarget.Target{
		siptarget.MustParse("udp:198.18.3.2:5060", ""),
		siptarget.MustParse("tcp:[2001:db8::3]", ""),
		siptarget.MustParse("pstn.example:5060", ""),
	}
	for src, want := range map[string]bool{
		"198.18.3.2:40000":      true,
		"[2001:db8::3]:5062":    true,
		"[::ffff:198.18.3.2]:1": true,
		"198.18.3.3:5060":       false,
		"[2001:db8::4]:5060":    false,
		"pstn.example:5060":     false,
		"garbage":               false,
	} {
		req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", Host: "box"})
		req.SetSource(src)
		if got := sourceIsOneOf(req, targets); got != want {
			t.Errorf("source %s: trusted %v, want %v", src, got, want)
		}
	}
}
