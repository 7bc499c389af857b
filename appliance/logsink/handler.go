package logsink

import (
	"context"
	"log/slog"
	"time"
)

// Handler is an slog.Handler that passes each record to the console
// handler it wraps and queues it, formatted, on a Sink. It never waits
// for the collector.
type Handler struct {
	next  slog.Handler
	sink  *Sink
	level slog.Leveler
	part  string  // MSGID: a "part" attribute given to WithAttrs outside any group
	pre   []Param // attributes given to WithAttrs, flattened
	group string  // "a.b." after WithGroup("a").WithGroup("b")
}

// NewHandler returns a handler that sends records of level and above to
// s, and every record next is enabled for to next.
func NewHandler(next slog.Handler, s *Sink, level slog.Leveler) *Handler {
	if level == nil {
		level = slog.LevelInfo
	}
	return &Handler{next: next, sink: s, level: level}
}

func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level.Level() || h.next.Enabled(ctx, l)
}

func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if h.next.Enabled(ctx, r.Level) {
		err = h.next.Handle(ctx, r)
	}
	if r.Level < h.level.Level() {
		return err
	}
	rec := Record{Time: r.Time, Level: r.Level, MsgID: h.part, Message: r.Message,
		Params: make([]Param, len(h.pre), len(h.pre)+r.NumAttrs())}
	copy(rec.Params, h.pre)
	r.Attrs(func(a slog.Attr) bool {
		if h.group == "" && a.Key == "part" {
			rec.MsgID = a.Value.Resolve().String()
		}
		rec.Params = appendAttr(rec.Params, h.group, a)
		return true
	})
	h.sink.enqueue(&rec)
	return err
}

func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	h2 := *h
	h2.next = h.next.WithAttrs(as)
	h2.pre = append([]Param(nil), h.pre...)
	for _, a := range as {
		if h.group == "" && a.Key == "part" {
			h2.part = a.Value.Resolve().String()
		}
		h2.pre = appendAttr(h2.pre, h.group, a)
	}
	return &h2
}

func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.next = h.next.WithGroup(name)
	h2.group = h.group + name + "."
	return &h2
}

// appendAttr flattens a into params, groups joined with dots
// ("peer.addr"), following slog's rules: empty attributes and empty
// groups are left out, a group without a key is inlined.
func appendAttr(params []Param, prefix string, a slog.Attr) []Param {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return params
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p = prefix + a.Key + "."
		}
		for _, ga := range a.Value.Group() {
			params = appendAttr(params, p, ga)
		}
		return params
	}
	if a.Key == "" {
		return params
	}
	v := a.Value.String()
	if a.Value.Kind() == slog.KindTime {
		v = a.Value.Time().Format(time.RFC3339Nano)
	}
	return append(params, Param{Name: prefix + a.Key, Value: v})
}
