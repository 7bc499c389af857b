// Package siplog keeps per-packet log records from flooding the log: a
// slog.Handler that counts records by kind and source class and lets at
// most one summary line per kind and class through per interval (10 s by
// default), with the number suppressed since the last line, at WARN or
// below, and with every string attribute truncated and escaped so a
// packet's bytes never reach the log raw.
//
// The gateway wraps the handlers it gives sipgo (transport, transaction
// and server layers), the fast path and the registrar in a Limiter. A
// Classifier says which records are per-packet (and of what kind); the
// others pass through untouched. It does not decide what is logged in the
// first place, and it keeps no packet.
package siplog

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultInterval is the least time between two lines of one kind and
// source class.
const DefaultInterval = 10 * time.Second

// DefaultMaxValue is how many bytes of a string attribute are kept.
const DefaultMaxValue = 64

// Classifier returns the kind of a per-packet record ("unparseable",
// "auth_failed", …), or ok false for a record that is not per-packet and
// passes through unchanged. It must return few distinct kinds: the
// Limiter keeps a counter and a window per kind and class.
type Classifier func(r slog.Record) (kind string, ok bool)

// Options tune a Limiter; zero fields mean defaults.
type Options struct {
	Interval time.Duration    // DefaultInterval
	MaxValue int              // DefaultMaxValue
	Now      func() time.Time // time.Now; tests inject a fake clock
}

// Limiter is the rate-limiting slog.Handler. Its clones (WithAttrs,
// WithGroup) share its counters and windows.
type Limiter struct {
	next     slog.Handler
	classify Classifier
	st       *state
}

type window struct {
	last       time.Time
	suppressed uint64
}

type state struct {
	interval time.Duration
	maxValue int
	now      func() time.Time

	mu     sync.Mutex
	counts map[string]uint64  // by kind
	wins   map[string]*window // by kind + "|" + class
}

// New wraps next.
func New(next slog.Handler, classify Classifier, o Options) *Limiter {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.MaxValue <= 0 {
		o.MaxValue = DefaultMaxValue
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Limiter{next: next, classify: classify, st: &state{
		interval: o.Interval, maxValue: o.MaxValue, now: o.Now,
		counts: map[string]uint64{}, wins: map[string]*window{},
	}}
}

// Counts returns how many per-packet records of each kind were seen
// (logged or suppressed) since start.
func (l *Limiter) Counts() map[string]uint64 {
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	out := make(map[string]uint64, len(l.st.counts))
	for k, n := range l.st.counts {
		out[k] = n
	}
	return out
}

// Enabled reports whether next logs at level, and always for WARN and
// above: those per-packet records are counted even when the log is set
// to ERROR only (and logged, downgraded to WARN, only if WARN is on).
// Debug records stay off when next has them off, so sipgo does not build
// its costly debug dumps for nothing.
func (l *Limiter) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn || l.next.Enabled(ctx, level)
}

// Handle counts a per-packet record and logs it only when its kind and
// source class had no line within the interval.
func (l *Limiter) Handle(ctx context.Context, r slog.Record) error {
	kind, ok := l.classify(r)
	if !ok {
		if !l.next.Enabled(ctx, r.Level) {
			return nil
		}
		return l.next.Handle(ctx, r)
	}
	class := sourceClass(r)
	st := l.st
	now := st.now()
	st.mu.Lock()
	st.counts[kind]++
	key := kind + "|" + class
	w := st.wins[key]
	if w == nil {
		w = &window{}
		st.wins[key] = w
	} else if now.Sub(w.last) < st.interval {
		w.suppressed++
		st.mu.Unlock()
		return nil
	}
	suppressed := w.suppressed
	w.last, w.suppressed = now, 0
	st.mu.Unlock()

	level := min(r.Level, slog.LevelWarn)
	if !l.next.Enabled(ctx, level) {
		return nil
	}
	out := slog.NewRecord(r.Time, level, r.Message, r.PC)
	out.AddAttrs(slog.String("kind", kind), slog.String("source_class", class), slog.Uint64("suppressed", suppressed))
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(st.sanitize(a))
		return true
	})
	return l.next.Handle(ctx, out)
}

// WithAttrs returns a Limiter over next.WithAttrs, sharing the counters.
// Bound attributes are the program's own (part=sipgo), not packet data.
func (l *Limiter) WithAttrs(as []slog.Attr) slog.Handler {
	return &Limiter{next: l.next.WithAttrs(as), classify: l.classify, st: l.st}
}

// WithGroup returns a Limiter over next.WithGroup, sharing the counters.
func (l *Limiter) WithGroup(name string) slog.Handler {
	return &Limiter{next: l.next.WithGroup(name), classify: l.classify, st: l.st}
}

// sanitize truncates and escapes every string-like value of a: the
// packet's text, parse errors quoting it, addresses.
func (st *state) sanitize(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		as := v.Group()
		out := make([]any, len(as))
		for i, g := range as {
			out[i] = st.sanitize(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindString:
		return slog.String(a.Key, st.escape(v.String()))
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, st.escape(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, st.escape(x.String()))
		case []byte:
			return slog.String(a.Key, st.escape(string(x)))
		default:
			return slog.String(a.Key, st.escape(fmt.Sprint(x)))
		}
	}
	return slog.Attr{Key: a.Key, Value: v} // numbers, times, booleans
}

// escape keeps at most maxValue bytes of s, escaped as by %q (control
// bytes, invalid UTF-8 and quotes; the handler adds its own quotes), and
// says how long s was if cut.
func (st *state) escape(s string) string {
	cut := len(s) > st.maxValue
	n := len(s)
	if cut {
		s = s[:st.maxValue]
	}
	q := strconv.Quote(s)
	q = q[1 : len(q)-1]
	if cut {
		q += fmt.Sprintf("…(%d bytes)", n)
	}
	return q
}

// addrKeys are the attribute keys sipgo, the fast path and the registrar
// put a peer's address under.
var addrKeys = map[string]bool{"raddr": true, "src": true, "source": true, "from": true, "ip": true, "dst": true}

// sourceClass is "loopback", "private" (RFC 1918, ULA, link-local),
// "public" or "unknown" (no address in the record): the rate limit is per
// class so a flood from the Internet cannot hide the one line about the
// LAN.
func sourceClass(r slog.Record) string {
	class := "unknown"
	r.Attrs(func(a slog.Attr) bool {
		if !addrKeys[a.Key] {
			return true
		}
		s := a.Value.Resolve().String()
		var ip netip.Addr
		if ap, err := netip.ParseAddrPort(s); err == nil {
			ip = ap.Addr()
		} else if p, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
			ip = p
		} else {
			return true
		}
		ip = ip.Unmap()
		switch {
		case ip.IsLoopback():
			class = "loopback"
		case ip.IsPrivate(), ip.IsLinkLocalUnicast():
			class = "private"
		default:
			class = "public"
		}
		return false
	})
	return class
}

// Sipgo classifies sipgo's records: every record at WARN or above is a
// per-packet failure (sipgo v1.7.3 logs a parse failure, a request it
// cannot make a transaction of, a response matching nothing, a failed
// send, each once per packet and at ERROR, the parse failure with the
// whole datagram), and so are its INFO records about a request or
// response nothing handles (its default handlers log one per packet).
// Other records below WARN pass through.
func Sipgo(r slog.Record) (string, bool) {
	m := r.Message
	if r.Level < slog.LevelWarn {
		switch {
		case r.Level < slog.LevelInfo:
			return "", false
		case strings.Contains(m, "Unhandled sip response"):
			return "unmatched_response", true
		case strings.Contains(m, "Unhandled sip request"):
			return "no_handler", true
		}
		return "", false
	}
	switch {
	case strings.Contains(m, "failed to parse"):
		return "unparseable", true
	case strings.HasPrefix(m, "Server tx failed"), strings.Contains(m, "malformed"):
		return "bad_request", true
	case strings.HasPrefix(m, "Client tx failed"):
		return "unmatched_response", true
	case strings.Contains(m, "handler not found"):
		return "no_handler", true
	case strings.Contains(m, "Read filter"):
		return "read_filter", true
	case strings.Contains(m, "failed"), strings.Contains(m, "Failed"):
		return "send_failed", true
	}
	return "other", true
}

// All classifies every record as one kind: for a logger that only logs
// per-packet events (the fast path).
func All(kind string) Classifier {
	return func(slog.Record) (string, bool) { return kind, true }
}
