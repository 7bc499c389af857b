package firmware

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/images/layout"
)

// box is a fake A/B disk: sysfs uevents naming the partitions, regular
// files standing in for the slot devices, and a GRUB environment block.
type box struct {
	dir      string
	cfg      Config
	priv     []byte // bundle signing key (PEM)
	reboots  atomic.Int32
	slotFile map[layout.Slot]string
}

func newBox(t *testing.T, cmdline string, env layout.Env) *box {
	t.Helper()
	d := t.TempDir()
	b := &box{dir: d, slotFile: map[layout.Slot]string{}}
	for i, name := range []string{"vda2", "vda3"} {
		slot := []layout.Slot{layout.SlotA, layout.SlotB}[i]
		os.MkdirAll(filepath.Join(d, "sys", name), 0o755)
		os.WriteFile(filepath.Join(d, "sys", name, "uevent"), []byte("MAJOR=254\nDEVNAME="+name+"\nDEVTYPE=partition\nPARTNAME="+slot.Partition()+"\n"), 0o644)
		os.MkdirAll(filepath.Join(d, "dev"), 0o755)
		b.slotFile[slot] = filepath.Join(d, "dev", name)
		os.WriteFile(b.slotFile[slot], make([]byte, 1<<20), 0o644)
	}
	os.MkdirAll(filepath.Join(d, "sys", "vda"), 0o755)
	os.WriteFile(filepath.Join(d, "sys", "vda", "uevent"), []byte("DEVNAME=vda\nDEVTYPE=disk\n"), 0o644)
	blk, _ := env.Encode()
	os.WriteFile(filepath.Join(d, "grubenv"), blk, 0o644)
	priv, pub, err := layout.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	b.priv = priv
	os.WriteFile(filepath.Join(d, "bundle.pub"), pub, 0o644)
	os.MkdirAll(filepath.Join(d, "data"), 0o700)
	// The running build: version 1.0, built at installedEpoch.
	os.WriteFile(filepath.Join(d, "release"), layout.Release{Version: "1.0", Arch: "arm64", Epoch: installedEpoch}.Encode(), 0o644)
	b.cfg = Config{BootEnv: filepath.Join(d, "grubenv"), BundleKey: filepath.Join(d, "bundle.pub"), SpoolDir: filepath.Join(d, "data"),
		Version: "1.0", Release: filepath.Join(d, "release"), Arch: "arm64", Cmdline: cmdline, SysBlock: filepath.Join(d, "sys"), DevDir: filepath.Join(d, "dev"),
		Reboot: func() error { b.reboots.Add(1); return nil }, RebootDelay: time.Millisecond}
	return b
}

func (b *box) env(t *testing.T) layout.Env {
	t.Helper()
	raw, _ := os.ReadFile(b.cfg.BootEnv)
	e, err := layout.ParseEnv(raw)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// installedEpoch is the BUILD_EPOCH of a box's running build; bundle
// makes bundles built later.
const installedEpoch = 1_700_000_000

func (b *box) bundle(t *testing.T, arch string, payload []byte) []byte {
	t.Helper()
	return b.bundleOf(t, layout.Manifest{Arch: arch, Version: "2.0", Created: installedEpoch + 3600}, payload)
}

// bundleOf signs payload with the box's key under m (Payload filled in).
func (b *box) bundleOf(t *testing.T, m layout.Manifest, payload []byte) []byte {
	t.Helper()
	key, err := layout.ParsePrivateKey(b.priv)
	if err != nil {
		t.Fatal(err)
	}
	n, sum, _ := layout.HashPayload(bytes.NewReader(payload))
	var out bytes.Buffer
	m.Payload = layout.Payload{Size: n, SHA256: sum}
	if err := layout.WriteBundle(&out, m, bytes.NewReader(payload), key); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func payload() []byte { return bytes.Repeat([]byte("hsqs-slot-image "), 20000) }

func TestInstallWritesInactiveSlotAndStartsTrial(t *testing.T) {
	b := newBox(t, "root=PARTLABEL=rootA outpost.slot=A outpost.trial=0 quiet", layout.FactoryEnv())
	u, err := New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	p := payload()
	res, err := u.InstallFirmware(t.Context(), bytes.NewReader(b.bundle(t, "arm64", p)), api.InstallOptions{Reboot: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Slot != "B" || res.Version != "2.0" || !res.Reboot {
		t.Errorf("result %+v", res)
	}
	got, _ := os.ReadFile(b.slotFile[layout.SlotB])
	if !bytes.Equal(got[:len(p)], p) {
		t.Error("slot B does not hold the payload")
	}
	if a, _ := os.ReadFile(b.slotFile[layout.SlotA]); !bytes.Equal(a, make([]byte, 1<<20)) {
		t.Error("slot A was touched")
	}
	if s, ok := b.env(t).Pending(); !ok || s != layout.SlotB || b.env(t).Committed() != layout.SlotA {
		t.Errorf("env after install: %v", b.env(t))
	}
	for i := 0; b.reboots.Load() == 0 && i < 200; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if b.reboots.Load() != 1 {
		t.Error("no reboot after the install")
	}
	if ents, _ := os.ReadDir(b.cfg.SpoolDir); len(ents) != 0 {
		t.Errorf("spool left behind: %v", ents)
	}
	st, _ := u.FirmwareStatus(t.Context())
	if st.Pending != "B" || st.Committed != "A" || st.Slot != "A" {
		t.Errorf("status %+v", st)
	}
}

func TestInstallRefusesWithNothingWritten(t *testing.T) {
	b := newBox(t, "outpost.slot=A outpost.trial=0", layout.FactoryEnv())
	u, err := New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	good := b.bundle(t, "arm64", payload())
	other := newBox(t, "outpost.slot=A", layout.FactoryEnv()).bundle(t, "arm64", payload()) // another key
	tampered := bytes.Clone(good)
	tampered[len(tampered)-100] ^= 1
	envBefore, _ := os.ReadFile(b.cfg.BootEnv)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"foreign key", other, "signature"},
		{"wrong arch", b.bundle(t, "amd64", payload()), "architecture"},
		{"truncated", good[:len(good)-1000], "truncated"},
		{"altered payload", tampered, "SHA-256"},
		{"empty", nil, "truncated"},
	} {
		_, err := u.InstallFirmware(t.Context(), bytes.NewReader(c.data), api.InstallOptions{Reboot: true})
		if !errors.Is(err, api.ErrBadBundle) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrBadBundle saying %q", c.name, err, c.want)
		}
	}
	if s, _ := os.ReadFile(b.slotFile[layout.SlotB]); !bytes.Equal(s, make([]byte, 1<<20)) {
		t.Error("a refused bundle wrote slot B")
	}
	if e, _ := os.ReadFile(b.cfg.BootEnv); !bytes.Equal(e, envBefore) {
		t.Error("a refused bundle changed the boot environment")
	}
	if ents, _ := os.ReadDir(b.cfg.SpoolDir); len(ents) != 0 {
		t.Errorf("spool left behind: %v", ents)
	}
	if b.reboots.Load() != 0 {
		t.Error("rebooted after a refusal")
	}
}

// assertUntouched fails t if anything of an install happened on b.
func (b *box) assertUntouched(t *testing.T, envBefore []byte) {
	t.Helper()
	if s, _ := os.ReadFile(b.slotFile[layout.SlotB]); !bytes.Equal(s, make([]byte, 1<<20)) {
		t.Error("a refused bundle wrote slot B")
	}
	if e, _ := os.ReadFile(b.cfg.BootEnv); !bytes.Equal(e, envBefore) {
		t.Error("a refused bundle changed the boot environment")
	}
	if ents, _ := os.ReadDir(b.cfg.SpoolDir); len(ents) != 0 {
		t.Errorf("spool left behind: %v", ents)
	}
	if b.reboots.Load() != 0 {
		t.Error("rebooted after a refusal")
	}
}

// installed checks that slot B holds p and its trial is pending.
func (b *box) installed(t *testing.T, p []byte) {
	t.Helper()
	got, _ := os.ReadFile(b.slotFile[layout.SlotB])
	if !bytes.Equal(got[:len(p)], p) {
		t.Error("slot B does not hold the payload")
	}
	if s, ok := b.env(t).Pending(); !ok || s != layout.SlotB {
		t.Errorf("env after install: %v", b.env(t))
	}
}

func TestInstallRefusesOlderBundleUnlessAllowed(t *testing.T) {
	b := newBox(t, "outpost.slot=A outpost.trial=0", layout.FactoryEnv())
	var logBuf bytes.Buffer
	b.cfg.Log = slog.New(slog.NewTextHandler(&logBuf, nil))
	u, err := New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if st, _ := u.FirmwareStatus(t.Context()); st.Built != installedEpoch {
		t.Errorf("status built = %d, want %d", st.Built, installedEpoch)
	}
	p := payload()
	// Version strings do not order (git describe); the build epoch does.
	older := b.bundleOf(t, layout.Manifest{Arch: "arm64", Version: "v9.0-3-gabcdef", Created: installedEpoch - 1}, p)
	envBefore, _ := os.ReadFile(b.cfg.BootEnv)

	_, err = u.InstallFirmware(t.Context(), bytes.NewReader(older), api.InstallOptions{Reboot: true})
	if !errors.Is(err, api.ErrDowngrade) || errors.Is(err, api.ErrBadBundle) {
		t.Fatalf("older bundle: err = %v, want ErrDowngrade", err)
	}
	for _, want := range []string{"v9.0-3-gabcdef", "installed 1.0", "allow-downgrade"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	b.assertUntouched(t, envBefore)

	// The same bundle, allowed: installed, and the result and the log say it was a downgrade.
	res, err := u.InstallFirmware(t.Context(), bytes.NewReader(older), api.InstallOptions{AllowDowngrade: true})
	if err != nil {
		t.Fatalf("older bundle with allow-downgrade: %v", err)
	}
	if !res.Downgrade || res.Slot != "B" || res.Version != "v9.0-3-gabcdef" {
		t.Errorf("result %+v", res)
	}
	b.installed(t, p)
	if !strings.Contains(logBuf.String(), "installing an older build") {
		t.Errorf("the downgrade is not logged:\n%s", logBuf.String())
	}
}

func TestInstallEqualOrNewerBundle(t *testing.T) {
	for _, c := range []struct {
		name    string
		created int64
		allow   bool
	}{
		{"same build", installedEpoch, false},
		{"newer", installedEpoch + 1, false},
		{"newer, allow-downgrade set", installedEpoch + 1, true},
	} {
		b := newBox(t, "outpost.slot=A outpost.trial=0", layout.FactoryEnv())
		u, err := New(b.cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := payload()
		res, err := u.InstallFirmware(t.Context(), bytes.NewReader(b.bundleOf(t, layout.Manifest{Arch: "arm64", Version: "abcdef", Created: c.created}, p)),
			api.InstallOptions{AllowDowngrade: c.allow})
		if err != nil || res.Downgrade {
			t.Errorf("%s: %+v, %v", c.name, res, err)
			continue
		}
		b.installed(t, p)
	}
}

func TestInstallWithoutRecordedEpoch(t *testing.T) {
	// An image from before BUILD_EPOCH (or before the release file):
	// nothing to compare with, so the bundle installs and the log says so.
	for name, release := range map[string][]byte{"no release file": nil, "no BUILD_EPOCH": []byte("VERSION=0.9\nARCH=arm64\n")} {
		b := newBox(t, "outpost.slot=A outpost.trial=0", layout.FactoryEnv())
		os.Remove(b.cfg.Release)
		if release != nil {
			os.WriteFile(b.cfg.Release, release, 0o644)
		}
		var logBuf bytes.Buffer
		b.cfg.Log = slog.New(slog.NewTextHandler(&logBuf, nil))
		u, err := New(b.cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := payload()
		res, err := u.InstallFirmware(t.Context(), bytes.NewReader(b.bundleOf(t, layout.Manifest{Arch: "arm64", Version: "dev", Created: 1}, p)), api.InstallOptions{})
		if err != nil || res.Downgrade {
			t.Errorf("%s: %+v, %v", name, res, err)
			continue
		}
		b.installed(t, p)
		if !strings.Contains(logBuf.String(), "records no BUILD_EPOCH") {
			t.Errorf("%s: not logged:\n%s", name, logBuf.String())
		}
	}
}

func TestInstallWithUnreadableReleaseNeedsAllowDowngrade(t *testing.T) {
	b := newBox(t, "outpost.slot=A outpost.trial=0", layout.FactoryEnv())
	os.WriteFile(b.cfg.Release, []byte("VERSION=1.0\nBUILD_EPOCH=soon\n"), 0o644)
	u, err := New(b.cfg) // still an updater: a trial boot must be able to commit
	if err != nil {
		t.Fatal(err)
	}
	p := payload()
	bundle := b.bundle(t, "arm64", p)
	envBefore, _ := os.ReadFile(b.cfg.BootEnv)
	if _, err := u.InstallFirmware(t.Context(), bytes.NewReader(bundle), api.InstallOptions{}); !errors.Is(err, api.ErrDowngrade) {
		t.Fatalf("unknown installed build: err = %v, want ErrDowngrade", err)
	}
	b.assertUntouched(t, envBefore)
	if _, err := u.InstallFirmware(t.Context(), bytes.NewReader(bundle), api.InstallOptions{AllowDowngrade: true}); err != nil {
		t.Fatalf("with allow-downgrade: %v", err)
	}
	b.installed(t, p)
}

func TestInstallDuringUncommittedTrialIsRefused(t *testing.T) {
	env, _ := layout.FactoryEnv().StartTrial(layout.SlotB)
	_, env = env.Boot()
	b := newBox(t, "outpost.slot=B outpost.trial=1", env)
	u, err := New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.InstallFirmware(t.Context(), bytes.NewReader(b.bundle(t, "arm64", payload())), api.InstallOptions{}); !errors.Is(err, api.ErrFirmwareBusy) {
		t.Fatalf("install on an uncommitted trial: %v", err)
	}
	st, _ := u.FirmwareStatus(t.Context())
	if !st.Trial {
		t.Errorf("status %+v: want trial", st)
	}
	// Healthy: the trial commits, and installs work again (into A).
	if out, err := u.Commit(); err != nil || out != layout.Committed {
		t.Fatalf("Commit = %v, %v", out, err)
	}
	if b.env(t).Committed() != layout.SlotB {
		t.Fatalf("env %v", b.env(t))
	}
	res, err := u.InstallFirmware(t.Context(), bytes.NewReader(b.bundle(t, "arm64", payload())), api.InstallOptions{})
	if err != nil || res.Slot != "A" {
		t.Fatalf("install after commit: %+v %v", res, err)
	}
}

func TestCommitRecordsRollback(t *testing.T) {
	env, _ := layout.FactoryEnv().StartTrial(layout.SlotB)
	_, env = env.Boot() // trial of B started...
	_, env = env.Boot() // ...and died: GRUB boots A
	b := newBox(t, "outpost.slot=A outpost.trial=0", env)
	u, err := New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := u.Commit(); err != nil || out != layout.RolledBack {
		t.Fatalf("Commit = %v, %v", out, err)
	}
	st, _ := u.FirmwareStatus(t.Context())
	if st.Failed != "B" || st.Committed != "A" || !st.Healthy || st.Pending != "" {
		t.Errorf("status %+v", st)
	}
}

func TestNewNeedsTheABBootLoader(t *testing.T) {
	b := newBox(t, "root=/dev/vda quiet", layout.FactoryEnv())
	if _, err := New(b.cfg); err == nil || !strings.Contains(err.Error(), "names no slot") {
		t.Errorf("New on a box not booted by the A/B loader: %v", err)
	}
}

func TestLoopbackFor(t *testing.T) {
	for in, want := range map[string]string{"0.0.0.0:5060": "127.0.0.1:5060", "[::]:5060": "127.0.0.1:5060", "10.0.0.1:5060": "10.0.0.1:5060"} {
		if got := loopbackFor(in); got != want {
			t.Errorf("loopbackFor(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestProbeOptions(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	srv := newSIPEcho(t)
	if err := ProbeOptions(ctx, srv); err != nil {
		t.Fatal(err)
	}
}
