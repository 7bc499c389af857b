package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Tracer is what a Backend offers for live SIP traces.
type Tracer interface {
	// Trace subscribes to the SIP messages filter selects ("" = all;
	// "user=U", "call-id=C", "method=M"). A bad filter is an error wrapping
	// ErrBadRequest.
	Trace(ctx context.Context, filter string) (TraceStream, error)
}

// TraceStream is one subscription; Close ends it.
type TraceStream interface {
	// Next waits for the next message until ctx ends.
	Next(ctx context.Context) (TraceMessage, error)
	Close()
}

// ErrBadRequest is a request the Backend refuses as malformed (400).
var ErrBadRequest = errors.New("bad request")

// TraceMessage is one SIP message as the box sent or received it: one
// JSON line of GET /api/v1/trace.
type TraceMessage struct {
	Time      time.Time `json:"time"`
	Dir       string    `json:"dir"`       // "in" (received) or "out" (sent)
	Transport string    `json:"transport"` // "udp" or "tcp"
	Local     string    `json:"local"`     // the box's address, ip:port
	Remote    string    `json:"remote"`    // the peer's address, ip:port
	Message   string    `json:"message"`   // the SIP message as on the wire
	// Dropped counts the messages this subscription lost so far because
	// the client did not read fast enough.
	Dropped uint64 `json:"dropped,omitempty"`
}

// registerTrace serves GET /api/v1/trace?filter=...: a stream of JSON
// lines, one per SIP message, until the client goes away (or the daemon
// stops). It shows digest responses (never passwords), so it is offered on
// the admin socket and the management API, not the status page.
func registerTrace(mux *http.ServeMux, b Backend, h *handler) {
	t, ok := b.(Tracer)
	if !ok {
		return
	}
	mux.HandleFunc("GET /api/v1/trace", func(w http.ResponseWriter, r *http.Request) {
		st, err := t.Trace(r.Context(), r.URL.Query().Get("filter"))
		if err != nil {
			if errors.Is(err, ErrBadRequest) {
				writeJSON(w, http.StatusBadRequest, ErrorBody{Error: err.Error()})
				return
			}
			h.fail(w, err)
			return
		}
		defer st.Close()
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Time{}) // a trace runs as long as the operator watches
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		_ = rc.Flush()
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for {
			m, err := st.Next(r.Context())
			if err != nil {
				return
			}
			if enc.Encode(m) != nil || rc.Flush() != nil {
				return
			}
		}
	})
}

// Trace streams the box's SIP messages that filter selects to fn until ctx
// ends (then it returns nil), fn fails, or the connection breaks.
func (c *Client) Trace(ctx context.Context, filter string, fn func(TraceMessage) error) error {
	p := "/api/v1/trace"
	if filter != "" {
		p += "?filter=" + url.QueryEscape(filter)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+p, nil)
	if err != nil {
		return err
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("outpostd not reachable: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		e := &APIError{Status: res.StatusCode}
		data, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		if json.Unmarshal(data, &e.Body) != nil || e.Body.Error == "" {
			e.Body.Error = http.StatusText(res.StatusCode)
		}
		return e
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var m TraceMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return fmt.Errorf("decoding trace: %w", err)
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}
