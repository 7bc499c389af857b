package gateway

import (
	"net/netip"
	"testing"

	"github.com/emiago/sipgo/sip"

	"github.com/outpost/outpost/siptarget"
)

// inviteFrom is an INVITE as sipgo's transport layer hands it over: src
// is where it came from, transport the socket's ("UDP", "TCP", "TLS").
func inviteFrom(transport, src string) *sip.Request {
	req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", Host: "box"})
	req.SetSource(src)
	req.MessageData.SetTransport(transport)
	return req
}

// Trunks are trusted by their target's address, IPv6 included: over UDP
// only from the target's exact ip:port (a spoofed datagram from the
// gateway's IP but another port is anybody's), over TCP from the target's
// IP on any port (the handshake proves the address; a TCP client's port
// is ephemeral), never over a transport the target was not configured
// with, and names never match.
func TestSourceIsOneOf(t *testing.T) {
	targets := []siptarget.Target{
		siptarget.MustParse("udp:198.18.3.2:5060", ""),
		siptarget.MustParse("tcp:[2001:db8::3]", ""),
		siptarget.MustParse("pstn.example:5060", ""),
	}
	for _, tc := range []struct {
		transport, src string
		want           bool
	}{
		{"UDP", "198.18.3.2:5060", true},
		{"udp", "[::ffff:198.18.3.2]:5060", true},
		{"UDP", "198.18.3.2:40000", false}, // spoofed: right IP, another port
		{"UDP", "198.18.3.2:5061", false},
		{"TCP", "198.18.3.2:5060", false}, // the gateway is configured udp
		{"TCP", "198.18.3.2:40000", false},
		{"TLS", "198.18.3.2:5060", false},
		{"TCP", "[2001:db8::3]:5060", true},
		{"TCP", "[2001:db8::3]:49152", true}, // a connection HQ opened: ephemeral port
		{"UDP", "[2001:db8::3]:5060", false}, // configured tcp
		{"", "198.18.3.2:5060", false},       // transport unknown: not from a socket
		{"UDP", "198.18.3.3:5060", false},
		{"TCP", "[2001:db8::4]:5060", false},
		{"UDP", "pstn.example:5060", false},
		{"UDP", "garbage", false},
	} {
		if got := sourceIsOneOf(inviteFrom(tc.transport, tc.src), targets); got != tc.want {
			t.Errorf("%s from %s: trusted %v, want %v", tc.transport, tc.src, got, tc.want)
		}
	}
}

// HQ is trusted from its targets (by the rule above) and from anywhere in
// hq.trusted_networks, whatever port and transport.
func TestFromHQNetworks(t *testing.T) {
	targets := []siptarget.Target{siptarget.MustParse("udp:198.18.1.10:5060", "")}
	nets := []netip.Prefix{netip.MustParsePrefix("198.18.8.0/24"), netip.MustParsePrefix("2001:db8:8::/48")}
	for _, tc := range []struct {
		transport, src string
		want           bool
	}{
		{"UDP", "198.18.1.10:5060", true},
		{"UDP", "198.18.1.10:5099", false},
		{"UDP", "198.18.8.77:40000", true},
		{"TCP", "198.18.8.1:51000", true},
		{"UDP", "[::ffff:198.18.8.2]:5060", true},
		{"TCP", "[2001:db8:8:1::5]:5060", true},
		{"UDP", "198.18.9.1:5060", false},
		{"UDP", "[2001:db8:9::5]:5060", false},
		{"UDP", "garbage", false},
	} {
		if got := trustedHQ(inviteFrom(tc.transport, tc.src), targets, nets); got != tc.want {
			t.Errorf("%s from %s: trusted as HQ %v, want %v", tc.transport, tc.src, got, tc.want)
		}
	}
}
