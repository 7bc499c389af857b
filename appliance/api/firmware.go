package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
)

// Firmware is the A/B updater of a box (appliance/firmware). A Backend
// that has one exposes it with a Firmware() method; a host without an A/B
// layout (a development machine) answers 404.
type Firmware interface {
	FirmwareStatus(ctx context.Context) (FirmwareStatus, error)
	// InstallFirmware verifies a bundle, writes it to the inactive slot
	// and arranges one trial boot of it; with opts.Reboot the box then
	// reboots. A bundle older than the installed firmware is refused
	// (ErrDowngrade) unless opts.AllowDowngrade.
	InstallFirmware(ctx context.Context, bundle io.Reader, opts InstallOptions) (FirmwareResult, error)
}

// InstallOptions are the query parameters of PUT /api/v1/firmware.
type InstallOptions struct {
	Reboot         bool // reboot=0 turns it off; default on
	AllowDowngrade bool // allow_downgrade=1: install a bundle older than the installed firmware
}

// Firmware errors, mapped to HTTP statuses by the handler.
var (
	ErrBadBundle    = errors.New("bundle refused")                   // 422: signature, size, hash, arch, format
	ErrFirmwareBusy = errors.New("firmware update not possible now") // 409: another install, or an uncommitted trial
	ErrDowngrade    = errors.New("downgrade refused")                // 409: bundle older than the installed firmware, without allow_downgrade
	ErrNoFirmware   = errors.New("this host has no A/B firmware layout")
)

// FirmwareStatus is GET /api/v1/firmware.
type FirmwareStatus struct {
	Arch      string `json:"arch"`
	Version   string `json:"version"`             // running build
	Slot      string `json:"slot"`                // booted slot, A or B
	Trial     bool   `json:"trial"`               // booted as the one trial of an update
	Committed string `json:"committed"`           // slot GRUB boots when no trial is pending
	Pending   string `json:"pending,omitempty"`   // slot the next boot tries once
	Failed    string `json:"failed,omitempty"`    // slot whose last trial never became healthy (rolled back)
	Healthy   bool   `json:"healthy"`             // this boot passed its health check
	SlotSize  int64  `json:"slot_size,omitempty"` // bytes a slot image may have
	Built     int64  `json:"built,omitempty"`     // BUILD_EPOCH of the running build (anti-rollback: no older bundle without allow_downgrade)
}

// FirmwareResult is the answer to PUT /api/v1/firmware.
type FirmwareResult struct {
	Slot    string `json:"slot"` // slot written, booted once on trial at the next boot
	Version string `json:"version"`
	Arch    string `json:"arch"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256"`
	Reboot  bool   `json:"reboot"` // the box reboots now
	// Downgrade: the bundle is older than the installed firmware and was
	// installed because the push allowed it.
	Downgrade bool `json:"downgrade,omitempty"`
}

// maxBundle bounds an upload: a slot image plus its header. The
// updater refuses anything larger than a slot from the manifest already.
const maxBundle = 512 << 20

// registerFirmware adds the firmware routes for b, which may or may not
// have an updater.
func registerFirmware(mux *http.ServeMux, b Backend, log *slog.Logger) {
	get := func() Firmware {
		if fp, ok := b.(interface{ Firmware() Firmware }); ok {
			return fp.Firmware()
		}
		return nil
	}
	mux.HandleFunc("GET /api/v1/firmware", func(w http.ResponseWriter, r *http.Request) {
		fw := get()
		if fw == nil {
			firmwareFail(w, log, ErrNoFirmware)
			return
		}
		st, err := fw.FirmwareStatus(r.Context())
		if err != nil {
			firmwareFail(w, log, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("PUT /api/v1/firmware", func(w http.ResponseWriter, r *http.Request) {
		fw := get()
		if fw == nil {
			firmwareFail(w, log, ErrNoFirmware)
			return
		}
		q := r.URL.Query()
		opts := InstallOptions{Reboot: q.Get("reboot") != "0"}
		if v := q.Get("allow_downgrade"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				writeJSON(w, http.StatusBadRequest, ErrorBody{Error: fmt.Sprintf("allow_downgrade=%q: want 1 or 0", v)})
				return
			}
			opts.AllowDowngrade = b
		}
		res, err := fw.InstallFirmware(r.Context(), http.MaxBytesReader(w, r.Body, maxBundle), opts)
		if err != nil {
			firmwareFail(w, log, err)
			return
		}
		log.Info("firmware installed", "slot", res.Slot, "version", res.Version, "reboot", res.Reboot, "downgrade", res.Downgrade)
		writeJSON(w, http.StatusOK, res)
	})
}

func firmwareFail(w http.ResponseWriter, log *slog.Logger, err error) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, ErrBadBundle):
		log.Warn("firmware bundle refused", "err", err)
		writeJSON(w, http.StatusUnprocessableEntity, ErrorBody{Error: err.Error()})
	case errors.As(err, &tooLarge):
		writeJSON(w, http.StatusRequestEntityTooLarge, ErrorBody{Error: fmt.Sprintf("bundle larger than %d bytes", tooLarge.Limit)})
	case errors.Is(err, ErrDowngrade):
		log.Warn("firmware bundle refused", "err", err)
		writeJSON(w, http.StatusConflict, ErrorBody{Error: err.Error()})
	case errors.Is(err, ErrFirmwareBusy):
		writeJSON(w, http.StatusConflict, ErrorBody{Error: err.Error()})
	case errors.Is(err, ErrNoFirmware):
		writeJSON(w, http.StatusNotFound, ErrorBody{Error: err.Error()})
	default:
		log.Error("firmware request failed", "err", err)
		writeJSON(w, http.StatusInternalServerError, ErrorBody{Error: err.Error()})
	}
}

// FirmwareStatus is GET /api/v1/firmware.
func (c *Client) FirmwareStatus(ctx context.Context) (st FirmwareStatus, err error) {
	return st, c.Do(ctx, http.MethodGet, "/api/v1/firmware", nil, nil, &st)
}

// PushFirmware uploads a bundle (PUT /api/v1/firmware).
func (c *Client) PushFirmware(ctx context.Context, bundle []byte, opts InstallOptions) (res FirmwareResult, err error) {
	return c.PushFirmwareProgress(ctx, bundle, opts, nil)
}

// PushFirmwareProgress is PushFirmware calling sent, when non-nil, with
// the bytes handed to the connection so far, as the upload goes (from
// the HTTP transport's goroutine).
func (c *Client) PushFirmwareProgress(ctx context.Context, bundle []byte, opts InstallOptions, sent func(n int64)) (res FirmwareResult, err error) {
	q := url.Values{}
	if !opts.Reboot {
		q.Set("reboot", "0")
	}
	if opts.AllowDowngrade {
		q.Set("allow_downgrade", "1")
	}
	p := "/api/v1/firmware"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	hdr := http.Header{"Content-Type": {"application/octet-stream"}}
	var body io.Reader = bytes.NewReader(bundle)
	if sent != nil {
		body = &countingReader{r: body, sent: sent}
	}
	return res, c.do(ctx, http.MethodPut, p, hdr, body, int64(len(bundle)), &res)
}

// countingReader reports the bytes read through it.
type countingReader struct {
	r    io.Reader
	n    int64
	sent func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.n += int64(n)
		c.sent(c.n)
	}
	return n, err
}
