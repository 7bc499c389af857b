package appliance

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/appliance/store"
	"github.com/outpost/outpost/gateway/b2bua"
)

// CDR retention and batching. A record is written within cdrFlush of the
// call's end; one fsynced transaction per batch keeps a burst of short calls
// (the call-rate benchmark ends thousands a second) from costing a flash
// write each. At most cdrKeep rows are kept: at 10,000 calls a day that is
// three weeks, and the table stays a few tens of MB.
const (
	cdrKeep    = 200_000
	cdrFlush   = time.Second
	cdrBatch   = 512
	cdrBacklog = 8192 // records waiting for the writer; beyond, new ones are dropped and counted
)

// cdrWriter appends call detail records to the store in batches. Add never
// blocks a SIP handler: when the store cannot keep up the record is dropped
// and counted (outpost_cdr_dropped_total) rather than slowing calls.
type cdrWriter struct {
	st  *store.Store
	log *slog.Logger
	ch  chan store.CDR

	written, dropped, failed atomic.Int64

	mu     sync.Mutex // guards totals (ended calls, for metrics)
	totals map[cdrKey]int64
}

type cdrKey struct{ route, disposition string }

func newCDRWriter(st *store.Store, log *slog.Logger) *cdrWriter {
	return &cdrWriter{st: st, log: log, ch: make(chan store.CDR, cdrBacklog), totals: map[cdrKey]int64{}}
}

// Add queues a record.
func (w *cdrWriter) Add(r store.CDR) {
	w.mu.Lock()
	w.totals[cdrKey{r.Route, r.Disposition}]++
	w.mu.Unlock()
	select {
	case w.ch <- r:
	default:
		if w.dropped.Add(1) == 1 {
			w.log.Warn("cdr: writer backlog full, dropping records", "backlog", cdrBacklog)
		}
	}
}

// Totals returns the number of ended calls by route and disposition.
func (w *cdrWriter) Totals() map[cdrKey]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[cdrKey]int64, len(w.totals))
	for k, v := range w.totals {
		out[k] = v
	}
	return out
}

// Run writes batches until ctx ends, then writes what is queued.
func (w *cdrWriter) Run(ctx context.Context) error {
	t := time.NewTicker(cdrFlush)
	defer t.Stop()
	batch := make([]store.CDR, 0, cdrBatch)
	flush := func(ctx context.Context) {
		if len(batch) == 0 {
			return
		}
		if err := w.st.AddCDRs(ctx, batch, cdrKeep); err != nil {
			w.failed.Add(int64(len(batch)))
			w.log.Error("cdr: write failed, records lost", "records", len(batch), "err", err)
		} else {
			w.written.Add(int64(len(batch)))
		}
		batch = batch[:0]
	}
	for {
		select {
		case r := <-w.ch:
			batch = append(batch, r)
			if len(batch) >= cdrBatch {
				flush(ctx)
			}
		case <-t.C:
			flush(ctx)
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			for {
				select {
				case r := <-w.ch:
					batch = append(batch, r)
				default:
					flush(fctx)
					return nil
				}
			}
		}
	}
}

func (a *App) CDRs(ctx context.Context, since time.Time, limit int) ([]api.CDR, error) {
	recs, err := a.st.CDRs(ctx, since, limit)
	if err != nil {
		return nil, err
	}
	out := make([]api.CDR, len(recs))
	for i, r := range recs {
		var dur float64
		if !r.Answered.IsZero() {
			dur = r.Ended.Sub(r.Answered).Seconds()
		}
		out[i] = api.CDR{ID: r.ID, CallID: r.CallID, Started: r.Started, Answered: r.Answered, Ended: r.Ended,
			DurationS: dur, Caller: r.Caller, Dialled: r.Dialled, Routed: r.Routed, Route: r.Route, Target: r.Target,
			Mode: r.Mode, Code: r.Code, Disposition: r.Disposition, Hangup: r.Hangup, Media: r.Media}
	}
	return out, nil
}

// recordCDR is the B2BUA's OnEnd: the call's record, in the mode the box
// is in when it ends.
func (a *App) recordCDR(c b2bua.CDR) {
	peer := c.Peer
	switch {
	case c.Disposition == b2bua.Voicemail:
		peer += " (voicemail of " + c.ForwardedFrom + ")"
	case c.ForwardedFrom != "":
		peer += " (forwarded by " + c.ForwardedFrom + ": " + c.ForwardReason + ")"
	}
	if c.TransferOf != "" {
		peer += " (transfer of " + c.TransferOf + ")"
	}
	if c.FallbackFrom != "" {
		peer += " (fallback from " + string(c.FallbackFrom) + ": " + c.FallbackReason + ")"
	}
	a.cdr.Add(store.CDR{CallID: c.CallID, Started: c.Start, Answered: c.Answer, Ended: c.End, Caller: c.Caller,
		Dialled: c.Dialled, Routed: c.Target, Route: string(c.Route), Target: peer, Mode: string(a.mode.Mode()),
		Code: c.Status, Disposition: string(c.Disposition), Hangup: c.HangupBy, Media: a.media.takeStats(c.CallID)})
}
