package ctl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/images/layout"
)

// fwBox is a box whose updater refuses downgrades unless allowed.
type fwBox struct {
	*fakeBox
	fw *recordingFirmware
}

func (b fwBox) Firmware() api.Firmware { return b.fw }

type recordingFirmware struct {
	opts  []api.InstallOptions
	sizes []int
}

func (f *recordingFirmware) FirmwareStatus(context.Context) (api.FirmwareStatus, error) {
	return api.FirmwareStatus{Slot: "A", Committed: "A", Built: 1_700_000_000}, nil
}

func (f *recordingFirmware) InstallFirmware(_ context.Context, r io.Reader, opts api.InstallOptions) (api.FirmwareResult, error) {
	b, _ := io.ReadAll(r)
	f.opts, f.sizes = append(f.opts, opts), append(f.sizes, len(b))
	if !opts.AllowDowngrade {
		return api.FirmwareResult{}, fmt.Errorf("%w: bundle v1.2.0 (built …) is older than the installed v1.3.0 (built …)", api.ErrDowngrade)
	}
	return api.FirmwareResult{Slot: "B", Version: "v1.2.0", Arch: "arm64", Reboot: opts.Reboot, Downgrade: true}, nil
}

// serveUnix serves the admin API of b on a socket in a temporary directory.
func serveUnix(t *testing.T, b api.Backend) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.AdminHandler(b, slog.New(slog.DiscardHandler), nil)}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func writeBundle(t *testing.T) string {
	t.Helper()
	priv, _, err := layout.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := layout.ParsePrivateKey(priv)
	p := bytes.Repeat([]byte("slot"), 1000)
	n, sum, _ := layout.HashPayload(bytes.NewReader(p))
	var out bytes.Buffer
	m := layout.Manifest{Arch: "arm64", Version: "v1.2.0", Created: 1_600_000_000, Payload: layout.Payload{Size: n, SHA256: sum}}
	if err := layout.WriteBundle(&out, m, bytes.NewReader(p), key); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "outpost.bundle")
	os.WriteFile(file, out.Bytes(), 0o644)
	return file
}

func TestFirmwarePushAllowDowngrade(t *testing.T) {
	fw := &recordingFirmware{}
	sock := serveUnix(t, fwBox{fakeBox: &fakeBox{}, fw: fw})
	bundle := writeBundle(t)
	size, _ := os.Stat(bundle)
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		rc := Main(append([]string{"--socket", sock, "firmware", "push"}, args...), &out, &errOut)
		return rc, out.String(), errOut.String()
	}

	// Without the flag the box refuses; the error names the versions.
	rc, _, stderr := run(bundle)
	if rc != 1 || !strings.Contains(stderr, "older than the installed v1.3.0") {
		t.Errorf("push of an older bundle: rc %d, stderr %q", rc, stderr)
	}
	// The flag, before or after BUNDLE, sends allow_downgrade=1.
	rc, stdout, stderr := run("--allow-downgrade", bundle)
	if rc != 0 || !strings.Contains(stdout, "downgrade") || !strings.Contains(stdout, "slot B") {
		t.Errorf("push --allow-downgrade: rc %d, stdout %q, stderr %q", rc, stdout, stderr)
	}
	if rc, _, stderr := run(bundle, "--no-reboot", "--allow-downgrade"); rc != 0 {
		t.Errorf("push BUNDLE --no-reboot --allow-downgrade: rc %d, %q", rc, stderr)
	}
	want := []api.InstallOptions{{Reboot: true}, {Reboot: true, AllowDowngrade: true}, {AllowDowngrade: true}}
	if fmt.Sprint(fw.opts) != fmt.Sprint(want) {
		t.Errorf("the box got %+v, want %+v", fw.opts, want)
	}
	for _, n := range fw.sizes {
		if int64(n) != size.Size() {
			t.Errorf("the box got %d bytes of a %d-byte bundle", n, size.Size())
		}
	}
	// A flag value is not a flag: --allow-downgrade takes none.
	if rc, _, _ := run("--allow-downgrade=yes", bundle); rc != 2 {
		t.Errorf("--allow-downgrade=yes: rc %d, want a usage error", rc)
	}
}

// TestFirmwarePushProgress: on a terminal the upload shows bytes sent of
// the total, up to 100 %, on stderr; stdout gets only the result.
func TestFirmwarePushProgress(t *testing.T) {
	fw := &recordingFirmware{}
	sock := serveUnix(t, fwBox{fakeBox: &fakeBox{}, fw: fw})
	bundle := writeBundle(t)
	var out, progress bytes.Buffer
	c := &cmd{cl: api.NewUnixClient(sock), out: &out, errOut: io.Discard}
	if err := c.firmwareVerb(t.Context(), []string{"push", "--allow-downgrade", bundle}, &progress); err != nil {
		t.Fatal(err)
	}
	p := progress.String()
	if !strings.HasPrefix(p, "\rupload [..........] 0.0/0.0 MiB 0%") || !strings.HasSuffix(p, "] 0.0/0.0 MiB 100%\n") ||
		!strings.Contains(p, "[##########]") {
		t.Errorf("progress %q", p)
	}
	if strings.Contains(out.String(), "upload") || !strings.Contains(out.String(), "slot B") {
		t.Errorf("stdout %q", out.String())
	}
}

func TestUploadProgressLine(t *testing.T) {
	var b bytes.Buffer
	draw := uploadProgress(&b, 40<<20)
	draw(10 << 20)
	draw(10<<20 + 1) // same percent: not redrawn
	draw(40 << 20)
	want := "\rupload [..........] 0.0/40.0 MiB 0%\rupload [##........] 10.0/40.0 MiB 25%\rupload [##########] 40.0/40.0 MiB 100%"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
}
