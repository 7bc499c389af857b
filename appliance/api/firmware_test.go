package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fwBackend is a Backend (only its firmware is used) with an updater.
type fwBackend struct {
	Backend
	fw Firmware
}

func (b fwBackend) Firmware() Firmware { return b.fw }

type fakeFirmware struct{ got string }

func (f *fakeFirmware) FirmwareStatus(context.Context) (FirmwareStatus, error) {
	return FirmwareStatus{Slot: "A", Committed: "A"}, nil
}

func (f *fakeFirmware) InstallFirmware(_ context.Context, r io.Reader, reboot bool) (FirmwareResult, error) {
	b, _ := io.ReadAll(r)
	f.got = string(b)
	switch f.got {
	case "bad":
		return FirmwareResult{}, fmt.Errorf("%w: signature does not verify", ErrBadBundle)
	case "busy":
		return FirmwareResult{}, fmt.Errorf("%w: another install", ErrFirmwareBusy)
	}
	return FirmwareResult{Slot: "B", Reboot: reboot}, nil
}

func TestFirmwareRoutes(t *testing.T) {
	fw := &fakeFirmware{}
	log := slog.New(slog.DiscardHandler)
	srv := httptest.NewServer(Handler(fwBackend{fw: fw}, log, nil))
	defer srv.Close()
	cl := &Client{hc: srv.Client(), base: srv.URL}
	ctx := t.Context()

	if st, err := cl.FirmwareStatus(ctx); err != nil || st.Slot != "A" {
		t.Fatalf("status: %+v %v", st, err)
	}
	res, err := cl.PushFirmware(ctx, []byte("good"), false)
	if err != nil || res.Slot != "B" || res.Reboot || fw.got != "good" {
		t.Fatalf("push: %+v %v (got %q)", res, err, fw.got)
	}
	for body, code := range map[string]int{"bad": http.StatusUnprocessableEntity, "busy": http.StatusConflict} {
		_, err := cl.PushFirmware(ctx, []byte(body), true)
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != code {
			t.Errorf("push %q: %v, want %d", body, err, code)
		}
	}

	// A host without an A/B layout answers 404.
	bare := httptest.NewServer(Handler(fwBackend{}, log, nil))
	defer bare.Close()
	cl = &Client{hc: bare.Client(), base: bare.URL}
	if _, err := cl.FirmwareStatus(ctx); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("no firmware: %v", err)
	}
}
