// Package logsink sends outpostd's log records to a fleet's syslog
// collector: an slog.Handler that fans records out to the console handler
// and to a Sink, which formats them as RFC 5424 messages and writes them
// over UDP (RFC 5426), TCP with octet-counting framing (RFC 6587 §3.4.1) or
// TLS (RFC 5425).
//
// Logging never waits for the network: records go into a bounded queue
// that one goroutine (Sink.Run, owned by main) drains; when the queue is
// full a record is dropped and counted, and the next delivered message
// says how many were lost. The package imports nothing of Outpost's and
// never logs itself (it is the logger); it does not read syslog, rotate
// files or talk to journald.
package logsink

import (
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// SDID is the SD-ID of the element holding a record's attributes: a
// private name with an enterprise number (RFC 5424 §7.2.2; 32473 is the
// example number of RFC 5612, as good as any until Outpost has its own).
const SDID = "outpost@32473"

// dropSDID is the element the first message after a loss carries:
// [dropped@32473 count="N"].
const dropSDID = "dropped@32473"

// Facility is a syslog facility (RFC 5424 §6.2.1).
type Facility int

// The facilities fleets pick for an appliance's daemon.
const (
	Daemon Facility = 3
	Local0 Facility = 16
)

var facilityNames = []string{"kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news",
	"uucp", "cron", "authpriv", "ftp", "ntp", "audit", "alert", "clock",
	"local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"}

// ParseFacility reads a facility name (daemon, local0 … local7, …).
func ParseFacility(s string) (Facility, bool) {
	for i, n := range facilityNames {
		if strings.EqualFold(s, n) {
			return Facility(i), true
		}
	}
	return 0, false
}

func (f Facility) String() string {
	if f >= 0 && int(f) < len(facilityNames) {
		return facilityNames[f]
	}
	return strconv.Itoa(int(f))
}

// Severity maps an slog level to a syslog severity (RFC 5424 §6.2.1):
// error 3, warning 4, info 6, debug 7; levels in between round down to
// the more severe one (INFO+2 is notice, 5).
func Severity(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3
	case l >= slog.LevelWarn:
		return 4
	case l > slog.LevelInfo:
		return 5
	case l >= slog.LevelInfo:
		return 6
	}
	return 7
}

// Header is what every message of one process shares.
type Header struct {
	Facility Facility
	Hostname string // at most 255 printable ASCII characters; "" = "-"
	AppName  string // at most 48
	ProcID   string // at most 128
}

// Record is one message to format.
type Record struct {
	Time    time.Time
	Level   slog.Level
	MsgID   string // at most 32; "" = "-"
	Params  []Param
	Message string
}

// Param is one SD-PARAM of the outpost@32473 element.
type Param struct{ Name, Value string }

// Append formats r after h as an RFC 5424 SYSLOG-MSG (§6) and appends it
// to b. It returns the result and where STRUCTURED-DATA starts in it,
// which is where a sink inserts its drop report.
func Append(b []byte, h *Header, r *Record) (out []byte, sdAt int) {
	b = append(b, '<')
	b = strconv.AppendInt(b, int64(h.Facility)*8+int64(Severity(r.Level)), 10)
	b = append(b, ">1 "...)
	if r.Time.IsZero() {
		b = append(b, '-')
	} else {
		// TIME-SECFRAC has at most six digits (§6.2.3).
		b = r.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z07:00")
	}
	b = append(b, ' ')
	b = appendHeaderField(b, h.Hostname, 255)
	b = append(b, ' ')
	b = appendHeaderField(b, h.AppName, 48)
	b = append(b, ' ')
	b = appendHeaderField(b, h.ProcID, 128)
	b = append(b, ' ')
	b = appendHeaderField(b, r.MsgID, 32)
	b = append(b, ' ')
	sdAt = len(b)
	if len(r.Params) == 0 {
		b = append(b, '-')
	} else {
		b = append(b, '[')
		b = append(b, SDID...)
		for _, p := range r.Params {
			b = appendParam(b, p.Name, p.Value)
		}
		b = append(b, ']')
	}
	if r.Message != "" {
		b = append(b, ' ')
		b = appendMsg(b, r.Message)
	}
	return b, sdAt
}

// appendDropElement appends [dropped@32473 count="n"].
func appendDropElement(b []byte, n uint64) []byte {
	b = append(b, '[')
	b = append(b, dropSDID...)
	b = append(b, ` count="`...)
	b = strconv.AppendUint(b, n, 10)
	return append(b, `"]`...)
}

// appendHeaderField appends a header field: PRINTUSASCII (33–126) only,
// at most max characters, "-" when empty (§6.2). Anything else becomes
// '_': a header must stay one token.
func appendHeaderField(b []byte, s string, max int) []byte {
	if s == "" {
		return append(b, '-')
	}
	if len(s) > max {
		s = s[:max]
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 33 || c > 126 {
			c = '_'
		}
		b = append(b, c)
	}
	return b
}

// appendParam appends ` name="value"`. SD-NAME is 1–32 PRINTUSASCII
// except '=', SP, ']' and '"' (§6.3.3); PARAM-VALUE is UTF-8 with '"',
// '\' and ']' escaped by a backslash (§6.3.3).
func appendParam(b []byte, name, value string) []byte {
	b = append(b, ' ')
	b = appendSDName(b, name)
	b = append(b, '=', '"')
	b = appendParamValue(b, value)
	return append(b, '"')
}

func appendSDName(b []byte, name string) []byte {
	if name == "" {
		return append(b, '_')
	}
	if len(name) > 32 {
		name = name[:32]
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 33 || c > 126 || c == '=' || c == ']' || c == '"' {
			c = '_'
		}
		b = append(b, c)
	}
	return b
}

func appendParamValue(b []byte, v string) []byte {
	v = strings.ToValidUTF8(v, "\uFFFD")
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '"', '\\', ']':
			b = append(b, '\\', c)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendMsg appends MSG: plain ASCII as it is (MSG-ANY), anything else as
// valid UTF-8 behind the BOM that announces it (§6.4).
func appendMsg(b []byte, m string) []byte {
	for i := 0; i < len(m); i++ {
		if m[i] >= utf8.RuneSelf {
			b = append(b, "\xEF\xBB\xBF"...)
			return append(b, strings.ToValidUTF8(m, "\uFFFD")...)
		}
	}
	return append(b, m...)
}
