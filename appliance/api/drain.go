package api

import (
	"context"
	"net/http"
	"time"
)

// Drainer is what a Backend offers for draining: refusing new calls while
// those in progress finish, before a stop or a reboot.
type Drainer interface {
	// Drain starts (on) or cancels the drain; with wait it returns once no
	// call is in progress or the drain time is up.
	Drain(ctx context.Context, on, wait bool) (DrainStatus, error)
}

// DrainStatus is the answer of POST/DELETE /api/v1/drain.
type DrainStatus struct {
	Draining bool      `json:"draining"`
	Until    time.Time `json:"until,omitzero"` // when the drain time is up
	Calls    int       `json:"calls"`          // calls still in progress
	// Registered is how many users still have a binding here; a pool
	// member that drains hands them over to their next member as their
	// phones refresh (a box alone keeps them).
	Registered int `json:"registered"`
	// Drained: draining, and nothing is left to wait for (no call in
	// progress and, in a pool, no user registered here), or the drain
	// time is up.
	Drained bool `json:"drained,omitempty"`
}

// registerDrain serves POST /api/v1/drain (start; ?wait=1 returns when the
// calls have ended or the drain time is up) and DELETE /api/v1/drain
// (cancel), when b is a Drainer.
func registerDrain(mux *http.ServeMux, b Backend, h *handler) {
	d, ok := b.(Drainer)
	if !ok {
		return
	}
	serve := func(on bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			st, err := d.Drain(r.Context(), on, on && r.URL.Query().Get("wait") == "1")
			if err != nil {
				h.fail(w, err)
				return
			}
			writeJSON(w, http.StatusOK, st)
		}
	}
	mux.HandleFunc("POST /api/v1/drain", serve(true))
	mux.HandleFunc("DELETE /api/v1/drain", serve(false))
}

// Drain starts (on) or cancels the box's drain; with wait, the call returns
// once the calls in progress have ended or the drain time is up.
func (c *Client) Drain(ctx context.Context, on, wait bool) (st DrainStatus, err error) {
	switch {
	case !on:
		return st, c.Do(ctx, http.MethodDelete, "/api/v1/drain", nil, nil, &st)
	case wait:
		return st, c.Do(ctx, http.MethodPost, "/api/v1/drain?wait=1", nil, nil, &st)
	}
	return st, c.Do(ctx, http.MethodPost, "/api/v1/drain", nil, nil, &st)
}
