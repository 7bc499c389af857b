package appliance

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// httpSlot is the one HTTP server a part runs on its listener (the
// management API, the status page). A push replaces it whole: swap stops
// the running server, waiting for its goroutine, then serves the new one.
type httpSlot struct {
	name string // for the log: "management api", "status page"
	log  *slog.Logger

	mu      sync.Mutex
	srv     *http.Server
	bound   string
	serving sync.WaitGroup
}

// swap stops the running server and serves srv on ln (nothing when srv is
// nil), over TLS when srv has a TLSConfig.
func (h *httpSlot) swap(srv *http.Server, ln net.Listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopLocked()
	if srv == nil {
		return
	}
	h.srv, h.bound = srv, ln.Addr().String()
	useTLS := srv.TLSConfig != nil // read before serving: ServeTLS writes TLSConfig
	h.serving.Go(func() {
		var err error
		if useTLS {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.log.Error(h.name+" stopped", "err", err)
		}
	})
	h.log.Info(h.name+" listening", "addr", h.bound, "tls", useTLS)
}

// Addr is the bound address, "" when nothing is served.
func (h *httpSlot) Addr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bound
}

// up reports whether a server runs.
func (h *httpSlot) up() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.srv != nil
}

// server is the running server (nil when none), for tests.
func (h *httpSlot) server() *http.Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.srv
}

// Stop shuts the server down (requests in progress get 5 s) and waits for
// its goroutine.
func (h *httpSlot) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopLocked()
}

func (h *httpSlot) stopLocked() {
	if h.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
	h.serving.Wait()
	h.srv, h.bound = nil, ""
}
