package siptarget

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Problem names what keeps a hostport from splitting, so that a caller
// that words its errors its own way (appliance/config's listen specs)
// can tell the cases apart without matching text.
type Problem int

// The problems SplitHostPort reports.
const (
	MissingBracket Problem = iota + 1 // "[" without "]"
	AfterBracket                      // something other than ":port" after "]"
	EmptyPort                         // ":" with nothing after it
	Unbracketed                       // more than one ':' outside brackets (IPv6)
	MissingHost                       // nothing before the port
	BadPort                           // a port that is not decimal digits
	PortRange                         // a port above 65535
)

// SyntaxError is a hostport that does not split: Problem says why, Text
// is the part it concerns (the text after "]", or the port).
type SyntaxError struct {
	Problem Problem
	Text    string
}

func (e *SyntaxError) Error() string {
	switch e.Problem {
	case MissingBracket:
		return "missing ']'"
	case AfterBracket:
		return fmt.Sprintf("unexpected %q after ']'", e.Text)
	case EmptyPort:
		return "empty port"
	case Unbracketed:
		return "IPv6 address must be in brackets"
	case MissingHost:
		return "missing host"
	case BadPort:
		return fmt.Sprintf("bad port %q", e.Text)
	case PortRange:
		return fmt.Sprintf("port %s out of range", e.Text)
	}
	return "bad host and port"
}

// HostPort is a hostport split by the grammar's punctuation but not yet
// judged: whether Host is an address, a name or (for a listen spec) an
// interface is the caller's question, and so is whether port 0 is
// allowed.
type HostPort struct {
	Host      string // as written, without brackets; never ""
	Bracketed bool   // Host was written in brackets
	Port      string // the port's digits as written; "" when absent
	Num       uint16 // the port's value, 0..65535; 0 when absent
}

// SplitHostPort splits "host", "host:port", "[v6]" or "[v6]:port". The
// error is a *SyntaxError.
func SplitHostPort(s string) (HostPort, error) {
	var hp HostPort
	bad := func(p Problem, text string) (HostPort, error) { return HostPort{}, &SyntaxError{p, text} }
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return bad(MissingBracket, "")
		}
		after := s[end+1:]
		hp.Host, hp.Bracketed = s[1:end], true
		switch {
		case after == "":
		case after[0] != ':':
			return bad(AfterBracket, after)
		case after == ":":
			return bad(EmptyPort, "")
		default:
			hp.Port = after[1:]
		}
	} else {
		host, port, ok := strings.Cut(s, ":")
		switch {
		case strings.Contains(port, ":"):
			return bad(Unbracketed, "")
		case host == "":
			return bad(MissingHost, "")
		case ok && port == "":
			return bad(EmptyPort, "")
		}
		hp.Host, hp.Port = host, port
	}
	if hp.Port != "" {
		n, err := strconv.ParseUint(hp.Port, 10, 16)
		switch {
		case !IsDigits(hp.Port):
			return bad(BadPort, hp.Port)
		case err != nil:
			return bad(PortRange, hp.Port)
		}
		hp.Num = uint16(n)
	}
	return hp, nil
}

// ParseExplicit is Parse for addresses that must name their transport
// and port because no default applies, such as a HEP capture server
// ("udp:198.18.0.9:9060"): "udp:host" or "host:9060" is refused.
func ParseExplicit(s string) (Target, error) {
	tr, rest, ok := strings.Cut(s, ":")
	if _, err := ParseTransport(tr); !ok || err != nil {
		return Target{}, fmt.Errorf("target %q: want TRANSPORT:HOST:PORT", s)
	}
	if hp, err := SplitHostPort(rest); err == nil && hp.Port == "" {
		return Target{}, fmt.Errorf("target %q: want TRANSPORT:HOST:PORT (no port)", s)
	}
	return Parse(s, "")
}

// IsDigits reports whether s is one or more ASCII decimal digits, the
// check under every port, status code and numeric token Outpost reads.
func IsDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// ProblemOf is the Problem of an error from SplitHostPort; 0 for others.
func ProblemOf(err error) Problem {
	var se *SyntaxError
	if errors.As(err, &se) {
		return se.Problem
	}
	return 0
}
