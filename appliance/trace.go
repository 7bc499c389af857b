package appliance

import (
	"context"
	"fmt"
	"sync"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/gateway/trace"
)

// The App serves live SIP traces (GET /api/v1/trace).
var _ api.Tracer = (*App)(nil)

// traceQueue is one API subscriber's queue: a burst of a few seconds of a
// busy branch; beyond it messages are dropped and the client is told.
const traceQueue = 4096

// tracesEnd is closed when the App stops serving its APIs, ending every
// trace stream (http.Server.Shutdown waits for handlers, and a trace
// stream otherwise lasts as long as its client).
type tracesEnd struct {
	once sync.Once
	ch   chan struct{}
}

func (t *tracesEnd) done() <-chan struct{} {
	t.once.Do(func() { t.ch = make(chan struct{}) })
	return t.ch
}

func (t *tracesEnd) close() {
	t.done()
	select {
	case <-t.ch:
	default:
		close(t.ch)
	}
}

func (a *App) Trace(ctx context.Context, filter string) (api.TraceStream, error) {
	f, err := trace.ParseFilter(filter)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", api.ErrBadRequest, err)
	}
	tap := a.gw.Trace()
	return &traceStream{tap: tap, sink: tap.Attach(f, traceQueue), end: a.traces.done()}, nil
}

type traceStream struct {
	tap  *trace.Tap
	sink *trace.Sink
	end  <-chan struct{}
}

func (s *traceStream) Next(ctx context.Context) (api.TraceMessage, error) {
	select {
	case <-ctx.Done():
		return api.TraceMessage{}, ctx.Err()
	case <-s.end:
		return api.TraceMessage{}, context.Canceled
	case m := <-s.sink.C():
		return api.TraceMessage{Time: m.Time.UTC(), Dir: m.Dir.String(), Transport: m.Transport, Local: m.Local.String(),
			Remote: m.Remote.String(), Message: string(m.Data), Dropped: s.sink.Dropped()}, nil
	}
}

func (s *traceStream) Close() { s.tap.Detach(s.sink) }
