package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"
)

// Backend is what the appliance offers the API.
type Backend interface {
	Status(ctx context.Context) Status
	Registrations(ctx context.Context) []Registration
	// Config returns the redacted document of version (0 = active).
	Config(ctx context.Context, version int64) (ConfigResponse, error)
	History(ctx context.Context) ([]Version, error)
	// Apply validates, applies live and stores doc as a new version.
	// ifMatch, when non-zero, must equal the active version.
	Apply(ctx context.Context, doc []byte, source string, ifMatch int64, dryRun bool) (ApplyResult, error)
	Rollback(ctx context.Context, version int64) (ApplyResult, error)
	Route(ctx context.Context, number string) RouteResult
	Calls(ctx context.Context) []Call
	// CDRs returns up to limit records of calls started at or after since,
	// oldest first.
	CDRs(ctx context.Context, since time.Time, limit int) ([]CDR, error)
	Interfaces(ctx context.Context) Interfaces
	MediaResources(ctx context.Context) MediaResources
}

// Errors the Backend returns, mapped to HTTP statuses.
var (
	ErrNotFound = errors.New("not found")              // 404
	ErrConflict = errors.New("version does not match") // 412
)

// ValidationError carries field errors (422).
type ValidationError struct{ Errors []FieldError }

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid document (%d errors)", len(e.Errors))
	for i, fe := range e.Errors {
		if i == 10 {
			fmt.Fprintf(&b, "; and %d more", len(e.Errors)-i)
			break
		}
		fmt.Fprintf(&b, "; %s: %s", fe.Path, fe.Message)
	}
	return b.String()
}

// maxDocument bounds a pushed document: the largest branch has a few
// thousand users, far below this.
const maxDocument = 16 << 20

// Handler serves the API over b; metrics, when non-nil, serves GET /metrics.
func Handler(b Backend, log *slog.Logger, metrics http.Handler) http.Handler {
	h := &handler{b: b, log: log}
	mux := http.NewServeMux()
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	registerReadOnly(mux, h)
	mux.HandleFunc("GET /api/v1/media-resources", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, b.MediaResources(r.Context()))
	})
	mux.HandleFunc("GET /api/v1/route/{number}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, b.Route(r.Context(), r.PathValue("number")))
	})
	registerFirmware(mux, b, log)         // firmware.go: A/B updates, when b has a Firmware()
	registerDrain(mux, b, h)              // drain.go: when b is a Drainer
	registerTrace(mux, b, h)              // trace.go: live SIP messages, when b is a Tracer
	registerMediaResourceAdmin(mux, b, h) // mediares.go: when b is a MediaResourceAdmin
	mux.HandleFunc("GET /api/v1/config", h.getConfig)
	mux.HandleFunc("PUT /api/v1/config", h.putConfig)
	mux.HandleFunc("GET /api/v1/config/history", func(w http.ResponseWriter, r *http.Request) {
		vs, err := b.History(r.Context())
		if err != nil {
			h.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, vs)
	})
	mux.HandleFunc("POST /api/v1/config/rollback/{version}", func(w http.ResponseWriter, r *http.Request) {
		v, err := strconv.ParseInt(r.PathValue("version"), 10, 64)
		if err != nil || v < 1 {
			writeJSON(w, http.StatusBadRequest, ErrorBody{Error: "version must be a positive integer"})
			return
		}
		res, err := b.Rollback(r.Context(), v)
		if err != nil {
			h.fail(w, err)
			return
		}
		w.Header().Set("ETag", etag(res.Version.Version))
		writeJSON(w, http.StatusOK, res)
	})
	return mux
}

// ReadOnlyHandler serves only the reads an operator's status page polls:
// GET /api/v1/status, registrations, calls, interfaces and cdr. It offers
// no method that changes anything, no config document (even redacted) and
// no profiling; every other request is 404 (405 for another method on
// these paths).
func ReadOnlyHandler(b Backend, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	registerReadOnly(mux, &handler{b: b, log: log})
	return mux
}

// registerReadOnly adds the reads of ReadOnlyHandler to mux.
func registerReadOnly(mux *http.ServeMux, h *handler) {
	b := h.b
	registerServices(mux, b)  // services.go
	registerVoicemail(mux, b) // voicemail.go
	mux.HandleFunc("GET /api/v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, b.Status(r.Context()))
	})
	mux.HandleFunc("GET /api/v1/registrations", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, b.Registrations(r.Context()))
	})
	mux.HandleFunc("GET /api/v1/calls", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, b.Calls(r.Context()))
	})
	mux.HandleFunc("GET /api/v1/interfaces", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, b.Interfaces(r.Context()))
	})
	mux.HandleFunc("GET /api/v1/cdr", h.getCDR)
}

// AdminHandler is Handler plus profiling (net/http/pprof), for the field
// and for benchmarks. Only the admin socket (root, 0600) serves it: a
// profile shows memory contents and costs CPU, so the remote API never
// offers it.
func AdminHandler(b Backend, log *slog.Logger, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", Handler(b, log, metrics))
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	return mux
}

type handler struct {
	b   Backend
	log *slog.Logger
}

func (h *handler) getConfig(w http.ResponseWriter, r *http.Request) {
	var v int64
	if s := r.URL.Query().Get("version"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			writeJSON(w, http.StatusBadRequest, ErrorBody{Error: "version must be a positive integer"})
			return
		}
		v = n
	}
	res, err := h.b.Config(r.Context(), v)
	if err != nil {
		h.fail(w, err)
		return
	}
	w.Header().Set("ETag", etag(res.Version.Version))
	writeJSON(w, http.StatusOK, res)
}

// maxCDRs bounds one CDR response; a client pages with since= and limit=.
const maxCDRs = 10000

func (h *handler) getCDR(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since time.Time
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, ErrorBody{Error: "since must be an RFC 3339 time, e.g. 2026-11-29T10:00:00Z"})
			return
		}
		since = t
	}
	limit := maxCDRs
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxCDRs {
			writeJSON(w, http.StatusBadRequest, ErrorBody{Error: fmt.Sprintf("limit must be 1..%d", maxCDRs)})
			return
		}
		limit = n
	}
	recs, err := h.b.CDRs(r.Context(), since, limit)
	if err != nil {
		h.fail(w, err)
		return
	}
	if recs == nil {
		recs = []CDR{}
	}
	writeJSON(w, http.StatusOK, recs)
}

func (h *handler) putConfig(w http.ResponseWriter, r *http.Request) {
	var ifMatch int64
	if s := r.Header.Get("If-Match"); s != "" {
		n, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(s, "W/"), `"`), 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, ErrorBody{Error: "If-Match must be a version ETag"})
			return
		}
		ifMatch = n
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDocument))
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, ErrorBody{Error: "document too large or unreadable"})
		return
	}
	dry := r.URL.Query().Get("dry_run") == "1" || r.URL.Query().Get("dry_run") == "true"
	source := r.Header.Get("X-Outpost-Source")
	if source == "" {
		source = "api"
	}
	res, err := h.b.Apply(r.Context(), body, source, ifMatch, dry)
	if err != nil {
		h.fail(w, err)
		return
	}
	if !dry {
		w.Header().Set("ETag", etag(res.Version.Version))
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *handler) fail(w http.ResponseWriter, err error) {
	var ve *ValidationError
	switch {
	case errors.As(err, &ve):
		writeJSON(w, http.StatusUnprocessableEntity, ErrorBody{Error: ve.Error(), Errors: ve.Errors})
	case errors.Is(err, ErrNotFound):
		writeJSON(w, http.StatusNotFound, ErrorBody{Error: err.Error()})
	case errors.Is(err, ErrConflict):
		writeJSON(w, http.StatusPreconditionFailed, ErrorBody{Error: err.Error()})
	default:
		h.log.Error("api request failed", "err", err)
		writeJSON(w, http.StatusInternalServerError, ErrorBody{Error: err.Error()})
	}
}

func etag(v int64) string { return `"` + strconv.FormatInt(v, 10) + `"` }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // "<redacted>" as it is: no browser renders these answers as HTML
	_ = enc.Encode(v)
}
