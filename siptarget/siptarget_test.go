package siptarget

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	ip := netip.MustParseAddr
	for _, tc := range []struct {
		in   string
		def  Transport
		want Target
	}{
		{"udp:198.18.0.1:5060", "", Target{UDP, "198.18.0.1", ip("198.18.0.1"), 5060}},
		{"198.18.0.1:5070", "", Target{UDP, "198.18.0.1", ip("198.18.0.1"), 5070}},
		{"198.18.0.1", "", Target{UDP, "198.18.0.1", ip("198.18.0.1"), 5060}},
		{"198.18.0.1", TCP, Target{TCP, "198.18.0.1", ip("198.18.0.1"), 5060}},
		{"198.18.0.1", TLS, Target{TLS, "198.18.0.1", ip("198.18.0.1"), 5061}},
		{"tls:198.18.0.1", UDP, Target{TLS, "198.18.0.1", ip("198.18.0.1"), 5061}},
		{"TCP:198.18.0.1:5080", TLS, Target{TCP, "198.18.0.1", ip("198.18.0.1"), 5080}},
		{"Tls:hq.example.com", "", Target{TLS, "hq.example.com", netip.Addr{}, 5061}},
		{"udp:HQ.Example.COM.:5062", "", Target{UDP, "hq.example.com", netip.Addr{}, 5062}},
		{"pbx", "", Target{UDP, "pbx", netip.Addr{}, 5060}},
		{"a-1.b2.example", "", Target{UDP, "a-1.b2.example", netip.Addr{}, 5060}},
		{"[2001:db8::1]:5060", "", Target{UDP, "2001:db8::1", ip("2001:db8::1"), 5060}},
		{"[2001:DB8:0::1]", TCP, Target{TCP, "2001:db8::1", ip("2001:db8::1"), 5060}},
		{"tls:[::1]", "", Target{TLS, "::1", ip("::1"), 5061}},
		{"udp:[::ffff:198.18.0.1]:5060", "", Target{UDP, "198.18.0.1", ip("198.18.0.1"), 5060}},
		{"198.18.0.1:05060", "", Target{UDP, "198.18.0.1", ip("198.18.0.1"), 5060}},
		{"h:65535", "", Target{UDP, "h", netip.Addr{}, 65535}},
		{"h:1", "", Target{UDP, "h", netip.Addr{}, 1}},
		{strings.Repeat("a", 63) + ".example", "", Target{UDP, strings.Repeat("a", 63) + ".example", netip.Addr{}, 5060}},
	} {
		got, err := Parse(tc.in, tc.def)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q, %q) = %+v, %v; want %+v", tc.in, tc.def, got, err, tc.want)
			continue
		}
		again, err := Parse(got.String(), "")
		if err != nil || again != got {
			t.Errorf("Parse(%q) = %+v, %v; want %+v (round trip)", got.String(), again, err, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	long := strings.Repeat("a.", 126) + "bc" // 254 bytes
	for _, tc := range []struct{ in, want string }{
		{"", `target "": empty`},
		{"tls:h:0", `target "tls:h:0": port 0 out of range`},
		{"h:65536", `port 65536 out of range`},
		{"h:99999999999999999999", `port 99999999999999999999 out of range`},
		{"h:", `empty port`},
		{"h:5o60", `bad port "5o60"`},
		{"h:+5", `bad port "+5"`},
		{"h:-1", `bad port "-1"`},
		{":5060", `missing host`},
		{"udp:", `missing host`},
		{"udp::5060", `missing host`},
		{"sctp:h:5060", `unknown transport "sctp"`},
		{"sip:h:5060", `unknown transport "sip"`},
		{"2001:db8::1", `IPv6 address must be in brackets`},
		{"::1", `IPv6 address must be in brackets`},
		{"udp:2001:db8::1", `IPv6 address must be in brackets`},
		{"udp:2001:db8::1:5060", `IPv6 address must be in brackets`},
		{"[2001:db8::1", `missing ']'`},
		{"[2001:db8::1]5060", `unexpected "5060" after ']'`},
		{"[2001:db8::1]:", `empty port`},
		{"[198.18.0.1]:5060", `brackets are for IPv6 addresses only`},
		{"[pbx]:5060", `brackets are for IPv6 addresses only`},
		{"[fe80::1%eth0]:5060", `IPv6 zone not allowed`},
		{"[]:5060", `brackets are for IPv6 addresses only`},
		{"bad_host:5060", `bad host name "bad_host"`},
		{"-a.example", `starts or ends with '-'`},
		{"a-.example", `starts or ends with '-'`},
		{"a..example", `empty label`},
		{".", `bad host name "."`},
		{strings.Repeat("a", 64) + ".example", `longer than 63`},
		{long, `want 1 to 253 characters`},
		{"198.18.0.256", `last label must start with a letter`},
		{"198.18.0", `last label must start with a letter`},
		{"host name", `want letters, digits`},
		{"héte", `want letters, digits`},
		{"udp:h:5060;transport=tcp", `bad port`},
	} {
		_, err := Parse(tc.in, "")
		if err == nil {
			t.Errorf("Parse(%q) accepted", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "target ") {
			t.Errorf("Parse(%q) = %q, want it to contain %q", tc.in, err, tc.want)
		}
	}
	if _, err := Parse("h", "sctp"); err == nil || !strings.Contains(err.Error(), `unknown default transport "sctp"`) {
		t.Errorf("bad default transport: %v", err)
	}
}

func TestTransport(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Transport
		sip  string
		port uint16
	}{{"udp", UDP, "UDP", 5060}, {"TCP", TCP, "TCP", 5060}, {"Tls", TLS, "TLS", 5061}} {
		tr, err := ParseTransport(tc.in)
		if err != nil || tr != tc.want || tr.SIPName() != tc.sip || tr.DefaultPort() != tc.port || !tr.Valid() {
			t.Errorf("ParseTransport(%q) = %q, %v (SIP %q, port %d)", tc.in, tr, err, tr.SIPName(), tr.DefaultPort())
		}
	}
	for _, bad := range []string{"", "sctp", "ws", " udp"} {
		if tr, err := ParseTransport(bad); err == nil {
			t.Errorf("ParseTransport(%q) = %q, want an error", bad, tr)
		}
	}
	if Transport("UDP").Valid() {
		t.Error(`Transport("UDP") is valid; only lower case is`)
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct{ in, str, hp string }{
		{"198.18.0.1", "udp:198.18.0.1:5060", "198.18.0.1:5060"},
		{"tls:[2001:db8::1]", "tls:[2001:db8::1]:5061", "[2001:db8::1]:5061"},
		{"TCP:PBX.example:5070", "tcp:pbx.example:5070", "pbx.example:5070"},
	} {
		g := MustParse(tc.in, "")
		if g.String() != tc.str || g.HostPort() != tc.hp {
			t.Errorf("%q: String %q HostPort %q, want %q %q", tc.in, g.String(), g.HostPort(), tc.str, tc.hp)
		}
	}
	ipT, name := MustParse("[2001:db8::1]:5062", ""), MustParse("pbx.example", "")
	if !ipT.IsIP() || ipT.AddrPort() != netip.MustParseAddrPort("[2001:db8::1]:5062") {
		t.Errorf("IP target: IsIP %v AddrPort %v", ipT.IsIP(), ipT.AddrPort())
	}
	if name.IsIP() || name.AddrPort().IsValid() {
		t.Errorf("name target: IsIP %v AddrPort %v", name.IsIP(), name.AddrPort())
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParse of a bad target did not panic")
		}
	}()
	MustParse("h:0", "")
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"udp:198.18.0.1:5060", "tls:[2001:db8::1]", "pbx.example.com", "TCP:H:1",
		"[::ffff:1.2.3.4]:5060", "2001:db8::1", "h:0", "[fe80::1%eth0]", "a..b", "udp:"} {
		f.Add(s, "")
		f.Add(s, "tls")
	}
	f.Fuzz(func(t *testing.T, s, def string) {
		got, err := Parse(s, Transport(def))
		if err != nil {
			if got != (Target{}) {
				t.Fatalf("Parse(%q) failed but returned %+v", s, got)
			}
			return
		}
		if !got.Transport.Valid() || got.Port == 0 || got.Host == "" {
			t.Fatalf("Parse(%q) = %+v: incomplete", s, got)
		}
		if got.IsIP() != (got.Host == got.Addr.String()) || got.Addr.Zone() != "" || got.Addr.Is4In6() {
			t.Fatalf("Parse(%q) = %+v: Host and Addr disagree", s, got)
		}
		for _, d := range []Transport{UDP, TCP, TLS} {
			again, err := Parse(got.String(), d)
			if err != nil || again != got {
				t.Fatalf("Parse(%q) = %+v, %v; want %+v (from %q)", got.String(), again, err, got, s)
			}
		}
		if hp, err := Parse(got.HostPort(), got.Transport); err != nil || hp != got {
			t.Fatalf("Parse(HostPort %q) = %+v, %v; want %+v", got.HostPort(), hp, err, got)
		}
	})
}

func TestSplitHostPort(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want HostPort
	}{
		{"wan0:5060", HostPort{"wan0", false, "5060", 5060}},
		{"*", HostPort{"*", false, "", 0}},
		{"127.0.0.1:0", HostPort{"127.0.0.1", false, "0", 0}},
		{"[::]:05061", HostPort{"::", true, "05061", 5061}},
		{"[fe80::1%eth0]", HostPort{"fe80::1%eth0", true, "", 0}},
	} {
		got, err := SplitHostPort(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("SplitHostPort(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		in   string
		want Problem
	}{
		{"[::1", MissingBracket}, {"[::1]x", AfterBracket}, {"[::1]:", EmptyPort}, {"h:", EmptyPort},
		{"::1", Unbracketed}, {"", MissingHost}, {":5060", MissingHost}, {"h:+1", BadPort},
		{"h:65536", PortRange}, {"[::1]:99999999999999999999", PortRange},
	} {
		_, err := SplitHostPort(tc.in)
		if got := ProblemOf(err); got != tc.want {
			t.Errorf("SplitHostPort(%q) = %v (problem %d), want problem %d", tc.in, err, got, tc.want)
		}
	}
	if ProblemOf(nil) != 0 || ProblemOf(errors.New("x")) != 0 {
		t.Error("ProblemOf of a foreign error is not 0")
	}
}

func TestParseExplicit(t *testing.T) {
	for _, ok := range []string{"udp:198.18.0.9:9060", "tcp:[::1]:9061", "tcp:homer.example:9060"} {
		if _, err := ParseExplicit(ok); err != nil {
			t.Errorf("ParseExplicit(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"198.18.0.9:9060", "udp:198.18.0.9", "udp:[::1]", "sctp:h:1", "udp:h:0", "udp::1:9060", ""} {
		if got, err := ParseExplicit(bad); err == nil {
			t.Errorf("ParseExplicit(%q) = %v, want an error", bad, got)
		}
	}
}

func TestIsDigits(t *testing.T) {
	for s, want := range map[string]bool{"0": true, "0123456789": true, "": false, "1a": false, "+1": false, "١": false, " 1": false} {
		if IsDigits(s) != want {
			t.Errorf("IsDigits(%q) = %v", s, !want)
		}
	}
}

// FuzzSplitHostPort checks that a split hostport joins back to what it
// was split from, and that Parse agrees with it.
func FuzzSplitHostPort(f *testing.F) {
	for _, s := range []string{"wan0:5060", "*", "127.0.0.1:0", "[::]:05061", "[fe80::1%eth0]", "[::1]x", "h:+1", "::1", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hp, err := SplitHostPort(s)
		if err != nil {
			if ProblemOf(err) == 0 || hp != (HostPort{}) {
				t.Fatalf("SplitHostPort(%q) = %+v, %v", s, hp, err)
			}
			if _, perr := Parse("udp:"+s, ""); perr == nil {
				t.Fatalf("SplitHostPort(%q) failed (%v) but Parse accepted it", s, err)
			}
			return
		}
		joined := hp.Host
		if hp.Bracketed {
			joined = "[" + joined + "]"
		}
		if hp.Port != "" {
			joined += ":" + hp.Port
		}
		if joined != s || hp.Host == "" && !hp.Bracketed || hp.Port == "" && hp.Num != 0 {
			t.Fatalf("SplitHostPort(%q) = %+v", s, hp)
		}
	})
}
