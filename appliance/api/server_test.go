package api

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Profiling is served by the admin socket's handler only, never by the
// handler the remote (HTTPS) API serves.
func TestProfilingOnlyOnTheAdminHandler(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name string
		h    http.Handler
		want int
	}{
		{"remote", Handler(fwBackend{}, log, nil), http.StatusNotFound},
		{"admin", AdminHandler(fwBackend{}, log, nil), http.StatusOK},
	} {
		srv := httptest.NewServer(tc.h)
		res, err := srv.Client().Get(srv.URL + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		srv.Close()
		if res.StatusCode != tc.want {
			t.Errorf("%s handler: GET /debug/pprof/ = %d, want %d", tc.name, res.StatusCode, tc.want)
		}
	}
}
