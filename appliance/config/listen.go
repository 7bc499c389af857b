package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// DefaultSIPPort is the port of a listen spec that names none.
const DefaultSIPPort = 5060

// Listen is one parsed sip.listen spec.
type Listen struct {
	Transport string // udp, tcp or tls
	Host      string // IP literal, IPv6 without brackets
	Port      int    // 0 = ephemeral
}

// String formats l back into a spec, e.g. "tcp:[::1]:5060".
func (l Listen) String() string { return l.Transport + ":" + l.Addr() }

// Addr is "host:port" for net.Listen.
func (l Listen) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// ParseListen parses "TRANSPORT:HOST[:PORT]": transport udp, tcp or tls; HOST
// an IP literal (IPv6 in brackets); PORT 0..65535, 0 meaning ephemeral,
// 5060 when omitted. Examples: "udp:0.0.0.0:5060", "tcp:[::1]:5060",
// "udp:127.0.0.1:0", "udp:10.0.0.1".
func ParseListen(s string) (Listen, error) {
	bad := func(format string, args ...any) (Listen, error) {
		return Listen{}, fmt.Errorf("bad listen spec %q: %s", s, fmt.Sprintf(format, args...))
	}
	transport, rest, ok := strings.Cut(s, ":")
	if !ok {
		return bad("want TRANSPORT:HOST[:PORT]")
	}
	switch transport {
	case "udp", "tcp", "tls":
	default:
		return bad("unknown transport %q (want udp, tcp or tls)", transport)
	}
	host, port := rest, ""
	switch {
	case strings.HasPrefix(rest, "["):
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return bad("missing ']' after IPv6 address")
		}
		host = rest[1:end]
		switch after := rest[end+1:]; {
		case after == "":
		case strings.HasPrefix(after, ":"):
			port = after[1:]
			if port == "" {
				return bad("missing port after ':'")
			}
		default:
			return bad("unexpected %q after ']'", after)
		}
		if !strings.Contains(host, ":") {
			return bad("brackets are for IPv6 addresses only")
		}
	case strings.Count(rest, ":") == 1:
		host, port, _ = strings.Cut(rest, ":")
		if port == "" {
			return bad("missing port after ':'")
		}
	case strings.Count(rest, ":") > 1:
		return bad("IPv6 address must be in brackets, e.g. %s:[::1]:5060", transport)
	}
	p := DefaultSIPPort
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || port[0] == '+' || port[0] == '-' {
			if isDigits(port) {
				return bad("port out of range")
			}
			return bad("bad port %q", port)
		}
		if n < 0 || n > 65535 {
			return bad("port out of range")
		}
		p = n
	}
	if host == "" {
		return bad("missing host (use 0.0.0.0 or [::] for all addresses)")
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return bad("host %q is not an IP address", host)
	}
	return Listen{Transport: transport, Host: host, Port: p}, nil
}

// addr is the parsed host, unmapped.
func (l Listen) addr() netip.Addr {
	a, _ := netip.ParseAddr(l.Host)
	return a.Unmap()
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
