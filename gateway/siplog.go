package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// sipgo logs every datagram it cannot parse at ERROR, with the whole
// datagram (up to 64 KiB) as an attribute. Under a flood of garbage that is
// a log write per packet: the fuzz run (bench/fuzz_bench.sh) made 75 MB of
// log from 50,000 messages in 3 s, enough to fill an appliance's log
// storage in minutes. sipgoLogHandler bounds it: long attribute values are
// cut, and at most sipgoLogBurst records per second go through; the next
// record that passes says how many were suppressed.
const (
	sipgoLogBurst   = 20
	sipgoLogAttrMax = 256
)

type sipgoLogHandler struct {
	next slog.Handler
	lim  *logLimiter
}

type logLimiter struct {
	mu         sync.Mutex
	window     time.Time
	n          int
	suppressed int
}

// allow reports whether a record may pass now, and how many were
// suppressed since the last one that did.
func (l *logLimiter) allow(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.window) >= time.Second {
		l.window, l.n = now, 0
	}
	if l.n >= sipgoLogBurst {
		l.suppressed++
		return false, 0
	}
	l.n++
	s := l.suppressed
	l.suppressed = 0
	return true, s
}

func newSipgoLogHandler(next slog.Handler) slog.Handler {
	return &sipgoLogHandler{next: next, lim: &logLimiter{}}
}

func (h *sipgoLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *sipgoLogHandler) Handle(ctx context.Context, r slog.Record) error {
	ok, suppressed := h.lim.allow(r.Time)
	if !ok {
		return nil
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(cutAttr(a))
		return true
	})
	if suppressed > 0 {
		out.AddAttrs(slog.Int("suppressed_before", suppressed))
	}
	return h.next.Handle(ctx, out)
}

func (h *sipgoLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	for i := range as {
		as[i] = cutAttr(as[i])
	}
	return &sipgoLogHandler{next: h.next.WithAttrs(as), lim: h.lim}
}

func (h *sipgoLogHandler) WithGroup(name string) slog.Handler {
	return &sipgoLogHandler{next: h.next.WithGroup(name), lim: h.lim}
}

// cutAttr shortens a long value (a whole message) to its first bytes.
func cutAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := v.String(); len(s) > sipgoLogAttrMax {
			return slog.String(a.Key, s[:sipgoLogAttrMax]+"…")
		}
	case slog.KindAny:
		if s, ok := v.Any().(interface{ String() string }); ok {
			if str := s.String(); len(str) > sipgoLogAttrMax {
				return slog.String(a.Key, str[:sipgoLogAttrMax]+"…")
			}
		}
	}
	return a
}
