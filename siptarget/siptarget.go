package siptarget

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Transport is a SIP transport as configuration writes it: lower case.
type Transport string

// The transports a target may name.
const (
	UDP Transport = "udp"
	TCP Transport = "tcp"
	TLS Transport = "tls"
)

// ParseTransport reads "udp", "tcp" or "tls" in any case. The empty string
// is an error: callers with a default say so (Parse's def).
func ParseTransport(s string) (Transport, error) {
	switch tr := Transport(strings.ToLower(s)); tr {
	case UDP, TCP, TLS:
		return tr, nil
	}
	return "", fmt.Errorf("unknown transport %q (want udp, tcp or tls)", s)
}

// Valid reports whether tr is one of UDP, TCP and TLS.
func (tr Transport) Valid() bool { return tr == UDP || tr == TCP || tr == TLS }

// SIPName is the transport as SIP messages write it (Via, the transport
// URI parameter, sipgo's Request.SetTransport): "UDP", "TCP", "TLS".
func (tr Transport) SIPName() string { return strings.ToUpper(string(tr)) }

// DefaultPort is the port a target of this transport has when none is
// given: 5061 for TLS, 5060 otherwise (RFC 3261 §19.1.2).
func (tr Transport) DefaultPort() uint16 {
	if tr == TLS {
		return 5061
	}
	return 5060
}

// Target is where SIP requests go: a transport, a host (an IP literal or a
// DNS name) and a port. Parse fills every field; the zero Target is not a
// valid target. Targets are comparable with ==.
type Target struct {
	Transport Transport
	// Host is the DNS name in lower case without a trailing dot, or the
	// IP address in its canonical text (IPv6 without brackets).
	Host string
	// Addr is the address when Host is an IP literal; invalid for names.
	Addr netip.Addr
	Port uint16
}

// Parse reads a target (see the package doc for the grammar); def is the
// transport of a target without a prefix ("" = UDP). Errors quote s and
// say what is wrong: `target "tls:h:0": port 0 out of range`.
func Parse(s string, def Transport) (Target, error) {
	t, problem := parse(s, def)
	if problem != "" {
		return Target{}, fmt.Errorf("target %q: %s", s, problem)
	}
	return t, nil
}

// MustParse is Parse for tests and constants; it panics on error.
func MustParse(s string, def Transport) Target {
	t, err := Parse(s, def)
	if err != nil {
		panic(err)
	}
	return t
}

func parse(s string, def Transport) (Target, string) {
	if def == "" {
		def = UDP
	}
	if !def.Valid() {
		return Target{}, fmt.Sprintf("unknown default transport %q (want udp, tcp or tls)", def)
	}
	if s == "" {
		return Target{}, "empty"
	}
	t := Target{Transport: def}
	rest := s
	if p, r, ok := strings.Cut(s, ":"); ok {
		if tr, err := ParseTransport(p); err == nil {
			t.Transport, rest = tr, r
		} else if !strings.HasPrefix(s, "[") && strings.Count(s, ":") > 1 {
			// Two colons or more outside brackets: a transport prefix that
			// is not ours, or an IPv6 address without brackets.
			if _, err := netip.ParseAddr(s); err == nil || isHex(p) {
				return Target{}, "IPv6 address must be in brackets"
			}
			return Target{}, fmt.Sprintf("unknown transport %q (want udp, tcp or tls)", p)
		}
	}

	hp, err := SplitHostPort(rest)
	if err != nil {
		return Target{}, err.Error()
	}
	t.Port = t.Transport.DefaultPort()
	if hp.Port != "" {
		if hp.Num == 0 {
			return Target{}, fmt.Sprintf("port %s out of range", hp.Port)
		}
		t.Port = hp.Num
	}
	host := hp.Host

	if hp.Bracketed {
		a, err := netip.ParseAddr(host)
		switch {
		case err != nil && strings.Contains(host, "%"):
			return Target{}, fmt.Sprintf("IPv6 zone not allowed in %q", host)
		case err != nil || !a.Is6():
			return Target{}, fmt.Sprintf("brackets are for IPv6 addresses only, not %q", host)
		case a.Zone() != "":
			return Target{}, fmt.Sprintf("IPv6 zone not allowed in %q", host)
		}
		t.Addr = a.Unmap()
		t.Host = t.Addr.String()
		return t, ""
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
		t.Addr, t.Host = a, a.String()
		return t, ""
	}
	name, problem := hostName(host)
	if problem != "" {
		return Target{}, problem
	}
	t.Host = name
	return t, ""
}

// hostName checks an RFC 3261 §25.1 hostname and returns it in lower case
// without its trailing dot.
func hostName(h string) (string, string) {
	name := strings.ToLower(strings.TrimSuffix(h, "."))
	if name == "" || len(name) > 253 {
		return "", fmt.Sprintf("bad host name %q: want 1 to 253 characters", h)
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", fmt.Sprintf("bad host name %q: empty label or label longer than 63", h)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Sprintf("bad host name %q: a label starts or ends with '-'", h)
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", fmt.Sprintf("bad host name %q: want letters, digits, '-' and '.'", h)
			}
		}
	}
	if top := labels[len(labels)-1]; top[0] < 'a' || top[0] > 'z' {
		return "", fmt.Sprintf("bad host name %q: the last label must start with a letter (or write an IP address)", h)
	}
	return name, ""
}

// isHex reports whether s could be a group of an IPv6 address.
func isHex(s string) bool {
	if len(s) > 4 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// IsIP reports whether the host is an IP literal (Addr is valid).
func (t Target) IsIP() bool { return t.Addr.IsValid() }

// AddrPort is the address and port of an IP target; the zero AddrPort
// (not valid) for a name.
func (t Target) AddrPort() netip.AddrPort {
	if !t.Addr.IsValid() {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(t.Addr, t.Port)
}

// HostPort is "host:port" as net.Dial and sipgo's SetDestination take it:
// "198.18.0.1:5060", "[2001:db8::1]:5061", "pbx.example.com:5060".
func (t Target) HostPort() string { return net.JoinHostPort(t.Host, strconv.Itoa(int(t.Port))) }

// String is the canonical form, which Parse reads back to t:
// "udp:198.18.0.1:5060", "tls:[2001:db8::1]:5061".
func (t Target) String() string { return string(t.Transport) + ":" + t.HostPort() }
