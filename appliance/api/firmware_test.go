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

type fakeFirmware struct {
	got  string
	opts InstallOptions
}

func (f *fakeFirmware) FirmwareStatus(context.Context) (FirmwareStatus, error) {
	return FirmwareStatus{Slot: "A", Committed: "A"}, nil
}

func (f *fakeFirmware) InstallFirmware(_ context.Context, r io.Reader, opts InstallOptions) (FirmwareResult, error) {
	b, _ := io.ReadAll(r)
	f.got, f.opts = string(b), opts
	switch f.got {
	case "bad":
		return FirmwareResult{}, fmt.Errorf("%w: signature does not verify", ErrBadBundle)
	case "busy":
		return FirmwareResult{}, fmt.Errorf("%w: another install", ErrFirmwareBusy)
	case "old":
		if !opts.AllowDowngrade {
			return FirmwareResult{}, fmt.Errorf("%w: bundle v1 is older than the installed v2", ErrDowngrade)
		}
		return FirmwareResult{Slot: "B", Reboot: opts.Reboot, Downgrade: true}, nil
	}
	return FirmwareResult{Slot: "B", Reboot: opts.Reboot}, nil
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
	res, err := cl.PushFirmware(ctx, []byte("good"), InstallOptions{})
	if err != nil || res.Slot != "B" || res.Reboot || fw.got != "good" || fw.opts.AllowDowngrade {
		t.Fatalf("push: %+v %v (got %q, %+v)", res, err, fw.got, fw.opts)
	}
	for body, code := range map[string]int{"bad": http.StatusUnprocessableEntity, "busy": http.StatusConflict, "old": http.StatusConflict} {
		_, err := cl.PushFirmware(ctx, []byte(body), InstallOptions{Reboot: true})
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != code {
			t.Errorf("push %q: %v, want %d", body, err, code)
		}
	}
	// A downgrade refusal names the versions; allow_downgrade=1 lets it through.
	if _, err := cl.PushFirmware(ctx, []byte("old"), InstallOptions{Reboot: true}); err == nil || !strings.Contains(err.Error(), "older than the installed v2") {
		t.Errorf("downgrade refusal: %v", err)
	}
	res, err = cl.PushFirmware(ctx, []byte("old"), InstallOptions{Reboot: true, AllowDowngrade: true})
	if err != nil || !res.Downgrade || !res.Reboot || !fw.opts.AllowDowngrade || !fw.opts.Reboot {
		t.Errorf("push with allow-downgrade: %+v %v (%+v)", res, err, fw.opts)
	}
	// The query parameter as other clients send it.
	for q, want := range map[string]int{"allow_downgrade=1": http.StatusOK, "allow_downgrade=true": http.StatusOK,
		"allow_downgrade=0": http.StatusConflict, "": http.StatusConflict, "allow_downgrade=maybe": http.StatusBadRequest} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/api/v1/firmware?reboot=0&"+q, strings.NewReader("old"))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("PUT ?%s: %d, want %d", q, resp.StatusCode, want)
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
