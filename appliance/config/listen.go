package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/outpost/outpost/siptarget"
)

// DefaultSIPPort is the port of a udp or tcp listen spec that names none;
// DefaultSIPSPort that of a tls one (RFC 3261 §19.1.2).
const (
	DefaultSIPPort  = 5060
	DefaultSIPSPort = 5061
)

// Listen is one parsed sip.listen spec.
type Listen struct {
	Transport string // udp, tcp or tls
	Host      string // IP literal, IPv6 without brackets; "" with Interface
	Port      int    // 0 = ephemeral
	// Interface, instead of Host, names a network interface ("wan0") or
	// every interface ("*", loopback excluded): the box listens on the
	// interface's addresses as they come and go (DHCP, PPPoE), which a
	// factory document written before the box knows its addresses needs.
	Interface string
}

// String formats l back into a spec, e.g. "tcp:[::1]:5060", "udp:wan0:5060".
func (l Listen) String() string {
	if l.Interface != "" {
		return l.Transport + ":" + l.Interface + ":" + strconv.Itoa(l.Port)
	}
	return l.Transport + ":" + l.Addr()
}

// Addr is "host:port" for net.Listen.
func (l Listen) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// ParseListen parses "TRANSPORT:HOST[:PORT]": transport udp, tcp or tls; HOST
// an IP literal (IPv6 in brackets), an interface name, or "*" for every
// interface but loopback; PORT 0..65535, 0 meaning ephemeral, 5060 when
// omitted (5061 for tls). Examples: "udp:0.0.0.0:5060", "tcp:[::1]:5060",
// "udp:127.0.0.1:0", "udp:10.0.0.1", "udp:wan0:5060", "tcp:*".
func ParseListen(s string) (Listen, error) {
	bad := func(format string, args ...any) (Listen, error) {
		return Listen{}, fmt.Errorf("bad listen spec %q: %s", s, fmt.Sprintf(format, args...))
	}
	transport, rest, ok := strings.Cut(s, ":")
	if !ok {
		return bad("want TRANSPORT:HOST[:PORT]")
	}
	// Lower case only, as the schema's pattern says (siptarget's targets
	// take any case).
	if tr, err := siptarget.ParseTransport(transport); err != nil || string(tr) != transport {
		return bad("unknown transport %q (want udp, tcp or tls)", transport)
	}
	hp, err := siptarget.SplitHostPort(rest)
	switch siptarget.ProblemOf(err) {
	case 0:
	case siptarget.MissingBracket:
		return bad("missing ']' after IPv6 address")
	case siptarget.EmptyPort:
		return bad("missing port after ':'")
	case siptarget.Unbracketed:
		return bad("IPv6 address must be in brackets, e.g. %s:[::1]:5060", transport)
	case siptarget.MissingHost:
		return bad("missing host (use 0.0.0.0 or [::] for all addresses)")
	case siptarget.PortRange:
		return bad("port out of range")
	default: // AfterBracket, BadPort: siptarget's words
		return bad("%s", err)
	}
	if hp.Bracketed && !strings.Contains(hp.Host, ":") {
		return bad("brackets are for IPv6 addresses only")
	}
	host, p := hp.Host, int(siptarget.Transport(transport).DefaultPort())
	if hp.Port != "" {
		p = int(hp.Num) // 0 = ephemeral
	}
	if _, err := netip.ParseAddr(host); err != nil {
		if host == "*" || isIfName(host) {
			return Listen{Transport: transport, Port: p, Interface: host}, nil
		}
		return bad("host %q is neither an IP address nor an interface name", host)
	}
	return Listen{Transport: transport, Host: host, Port: p}, nil
}

// isIfName reports whether s can be a Linux interface name (IFNAMSIZ-1
// bytes, no '/', ':' or white space) that is not mistaken for an address.
func isIfName(s string) bool {
	if s == "" || len(s) > 15 || s == "." || s == ".." || siptarget.IsDigits(strings.ReplaceAll(s, ".", "")) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '@') {
			return false
		}
	}
	return true
}

// ifaceOverlap reports whether two specs of the same protocol and port,
// one or both naming interfaces, may try to bind the same address.
func ifaceOverlap(a, b Listen) bool {
	switch {
	case a.Interface == "*" || b.Interface == "*":
		return true
	case a.Interface != "" && b.Interface != "":
		return a.Interface == b.Interface
	case a.Interface != "":
		return b.addr().IsUnspecified()
	default:
		return a.addr().IsUnspecified()
	}
}

// addr is the parsed host, unmapped.
func (l Listen) addr() netip.Addr {
	a, _ := netip.ParseAddr(l.Host)
	return a.Unmap()
}

// isDigits is siptarget's, under the name validate.go calls.
var isDigits = siptarget.IsDigits
