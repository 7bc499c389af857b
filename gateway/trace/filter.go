package trace

import (
	"bytes"
	"fmt"
	"strings"
)

// Filter selects messages: by user (the user part of the Request-URI,
// From or To), by Call-ID, or by method (a request's, or the CSeq method
// of a response). The zero Filter matches every message.
type Filter struct {
	Field string // "", "user", "call-id" or "method"
	Value string
}

// ParseFilter parses "user=U", "call-id=C" or "method=M" ("" = all).
func ParseFilter(s string) (Filter, error) {
	if s == "" {
		return Filter{}, nil
	}
	k, v, ok := strings.Cut(s, "=")
	k = strings.ToLower(strings.TrimSpace(k))
	v = strings.TrimSpace(v)
	if !ok || v == "" {
		return Filter{}, fmt.Errorf("filter %q: want user=U, call-id=C or method=M", s)
	}
	switch k {
	case "user", "call-id":
	case "method":
		v = strings.ToUpper(v)
	default:
		return Filter{}, fmt.Errorf("filter %q: unknown field %q (want user, call-id or method)", s, k)
	}
	return Filter{Field: k, Value: v}, nil
}

func (f Filter) String() string {
	if f.Field == "" {
		return ""
	}
	return f.Field + "=" + f.Value
}

// Match reports whether the message msg passes f.
func (f Filter) Match(msg []byte) bool {
	switch f.Field {
	case "":
		return true
	case "call-id":
		return string(Header(msg, "call-id", "i")) == f.Value
	case "method":
		return Method(msg) == f.Value
	case "user":
		line, _, _ := bytes.Cut(msg, []byte("\n"))
		if !bytes.HasPrefix(line, []byte("SIP/2.0 ")) {
			if _, rest, ok := bytes.Cut(line, []byte(" ")); ok && string(uriUser(rest)) == f.Value {
				return true
			}
		}
		return string(uriUser(Header(msg, "from", "f"))) == f.Value || string(uriUser(Header(msg, "to", "t"))) == f.Value
	}
	return false
}

// Method is a request's method, or the CSeq method of a response.
func Method(msg []byte) string {
	line, _, _ := bytes.Cut(msg, []byte("\n"))
	if !bytes.HasPrefix(line, []byte("SIP/2.0 ")) {
		m, _, _ := bytes.Cut(line, []byte(" "))
		return string(m)
	}
	cseq := bytes.Fields(Header(msg, "cseq", ""))
	if len(cseq) == 2 {
		return string(cseq[1])
	}
	return ""
}

// Header returns the value of the first header named name (or its compact
// form, when not "") in msg's header section, trimmed; nil when absent.
func Header(msg []byte, name, compact string) []byte {
	_, rest, _ := bytes.Cut(msg, []byte("\n")) // the start line
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			return nil // end of the header section
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		k = bytes.TrimSpace(k)
		if bytes.EqualFold(k, []byte(name)) || compact != "" && bytes.EqualFold(k, []byte(compact)) {
			return bytes.TrimSpace(v)
		}
	}
	return nil
}

// uriUser is the user part of the first sip: or sips: URI in v
// ("\"A\" <sip:100@host>;tag=1" → "100"); nil without one.
func uriUser(v []byte) []byte {
	i := bytes.Index(v, []byte("sip:"))
	n := 4
	if j := bytes.Index(v, []byte("sips:")); j >= 0 && (i < 0 || j < i) {
		i, n = j, 5
	}
	if i < 0 {
		return nil
	}
	v = v[i+n:]
	end := bytes.IndexAny(v, "@>;? \t")
	if end < 0 || v[end] != '@' {
		return nil
	}
	user, _, _ := bytes.Cut(v[:end], []byte(":")) // user:password
	return user
}
