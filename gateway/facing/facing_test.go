package facing

import (
	"net/netip"
	"testing"
)

func aps(ss ...string) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParseAddrPort(s))
	}
	return out
}

// route is a routing table by destination host:port; asked counts lookups.
type route struct {
	table map[string]string
	asked int
}

func (r *route) source(hostport string) (netip.Addr, bool) {
	r.asked++
	src, ok := r.table[hostport]
	if !ok {
		return netip.Addr{}, false
	}
	return netip.MustParseAddr(src), true
}

func TestPick(t *testing.T) {
	table := map[string]string{
		"198.18.1.10:5060":   "198.18.0.1",  // HQ behind the WAN
		"198.18.2.20:5060":   "198.18.2.1",  // a phone on the LAN
		"198.18.9.9:5060":    "198.18.99.1", // an address with no listener
		"[2001:db8::1]:5060": "2001:db8::2",
	}
	for _, tc := range []struct {
		name  string
		local []netip.AddrPort
		dest  string
		want  int
		asked int // routing lookups
	}{
		{"none", nil, "198.18.1.10:5060", -1, 0},
		{"one: no lookup", aps("198.18.2.1:5060"), "198.18.1.10:5060", 0, 0},
		{"wan", aps("198.18.2.1:5060", "198.18.0.1:5060"), "198.18.1.10:5060", 1, 1},
		{"lan", aps("198.18.2.1:5060", "198.18.0.1:5060"), "198.18.2.20:5060", 0, 1},
		{"no listener on the source: wildcard", aps("198.18.2.1:5060", "0.0.0.0:5062", "198.18.0.1:5060"), "198.18.9.9:5060", 1, 1},
		{"no route: wildcard", aps("198.18.2.1:5060", "[::]:5062"), "203.0.113.1:5060", 1, 1},
		{"no route, no wildcard: the first", aps("198.18.2.1:5060", "198.18.0.1:5060"), "203.0.113.1:5060", 0, 1},
		{"ipv6", aps("198.18.0.1:5060", "[2001:db8::2]:5060"), "[2001:db8::1]:5060", 1, 1},
		{"ipv4-mapped listener", aps("198.18.2.1:5060", "[::ffff:198.18.0.1]:5060"), "198.18.1.10:5060", 1, 1},
	} {
		r := &route{table: table}
		if got := Pick(tc.local, tc.dest, r.source); got != tc.want || r.asked != tc.asked {
			t.Errorf("%s: Pick = %d after %d lookups, want %d after %d", tc.name, got, r.asked, tc.want, tc.asked)
		}
	}
}

func TestChoose(t *testing.T) {
	local := aps("0.0.0.0:5062", "198.18.2.1:5060", "[::ffff:198.18.0.1]:5060")
	var gotDest netip.Addr
	var gotCands []netip.Addr
	pick := func(answer string, ok bool) Chooser {
		return func(dest netip.Addr, cands []netip.Addr) (netip.Addr, bool) {
			gotDest, gotCands = dest, cands
			if !ok {
				return netip.Addr{}, false
			}
			return netip.MustParseAddr(answer), true
		}
	}
	for _, tc := range []struct {
		name   string
		dest   string
		f      Chooser
		want   int
		wantOK bool
	}{
		{"chosen", "198.18.1.10:5060", pick("198.18.0.1", true), 2, true},
		{"chosen lan", "[::ffff:198.18.2.20]:5060", pick("198.18.2.1", true), 1, true},
		{"left open", "198.18.1.10:5060", pick("", false), 0, false},
		{"not a listener", "198.18.1.10:5060", pick("198.18.7.7", true), 0, false},
		{"a name is not asked", "hq.example:5060", pick("198.18.0.1", true), 0, false},
		{"no port", "198.18.1.10", pick("198.18.0.1", true), 0, false},
	} {
		gotDest, gotCands = netip.Addr{}, nil
		got, ok := Choose(local, tc.dest, tc.f)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: Choose = %d %v, want %d %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
		if gotCands != nil && (len(gotCands) != 2 || gotCands[0].String() != "198.18.2.1" || gotCands[1].String() != "198.18.0.1" || gotDest.Is4In6()) {
			t.Errorf("%s: chooser asked about %v among %v (want unmapped, no wildcard)", tc.name, gotDest, gotCands)
		}
	}
}

func TestAnnounce(t *testing.T) {
	r := &route{table: map[string]string{"198.18.1.10:5060": "198.18.0.1"}}
	for _, tc := range []struct{ local, dest, want string }{
		{"198.18.2.1:5060", "198.18.1.10:5060", "198.18.2.1:5060"},
		{"0.0.0.0:5062", "198.18.1.10:5060", "198.18.0.1:5062"},
		{"[::]:5062", "198.18.1.10:5060", "198.18.0.1:5062"},
		{"0.0.0.0:5062", "203.0.113.1:5060", "0.0.0.0:5062"},
	} {
		if got := Announce(netip.MustParseAddrPort(tc.local), tc.dest, r.source).String(); got != tc.want {
			t.Errorf("Announce(%s, %s) = %s, want %s", tc.local, tc.dest, got, tc.want)
		}
	}
}

// The kernel's routing table answers for loopback.
func TestKernel(t *testing.T) {
	if a, ok := Kernel("127.0.0.1:9"); !ok || a != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("Kernel(127.0.0.1:9) = %v %v", a, ok)
	}
	if _, ok := Kernel("not an address"); ok {
		t.Error("Kernel answered for garbage")
	}
}
