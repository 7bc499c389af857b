package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// mrBackend is a MediaResourceAdmin that knows one MSR.
type mrBackend struct {
	Backend
	active map[string]bool
}

func (b *mrBackend) SetMediaResourceActive(_ context.Context, name string, active bool) (MediaResourceState, error) {
	if _, ok := b.active[name]; !ok {
		return MediaResourceState{}, fmt.Errorf("media resource %q: %w", name, ErrNotFound)
	}
	b.active[name] = active
	return MediaResourceState{MSR: name, Active: active, Resources: 2}, nil
}

// POST /api/v1/media-resources/{name} sets the flag on both handlers
// (admin socket and management API) and checks its body.
func TestSetMediaResourceActive(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	b := &mrBackend{active: map[string]bool{"msr-kazan": true}}
	for _, h := range []http.Handler{Handler(b, log, nil), AdminHandler(b, log, nil)} {
		for _, tc := range []struct {
			name, body string
			want       int
			active     bool
		}{
			{"msr-kazan", `{"active": false}`, http.StatusOK, false},
			{"msr-kazan", `{"active": true}`, http.StatusOK, true},
			{"msr-kazan", `{}`, http.StatusBadRequest, true},
			{"msr-kazan", `{"active": "no"}`, http.StatusBadRequest, true},
			{"msr-kazan", `{"active": false, "x": 1}`, http.StatusBadRequest, true},
			{"msr-other", `{"active": false}`, http.StatusNotFound, true},
		} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/media-resources/"+tc.name, strings.NewReader(tc.body)))
			if rec.Code != tc.want || b.active["msr-kazan"] != tc.active {
				t.Errorf("POST %s %s = %d (active %v), want %d (active %v): %s", tc.name, tc.body, rec.Code, b.active["msr-kazan"], tc.want, tc.active, rec.Body)
			}
		}
	}
	// A backend without the method: no such route.
	rec := httptest.NewRecorder()
	Handler(fwBackend{}, log, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/media-resources/x", strings.NewReader(`{"active":true}`)))
	if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("without MediaResourceAdmin: %d", rec.Code)
	}
}
