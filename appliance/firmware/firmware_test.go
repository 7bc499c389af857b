package firmware

import (
	"bytes"
	"context"
	"errors"
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
	b.cfg = Config{BootEnv: filepath.Join(d, "grubenv"), BundleKey: filepath.Join(d, "bundle.pub"), SpoolDir: filepath.Join(d, "data"),
		Version: "1.0", Arch: "arm64", Cmdline: cmdline, SysBlock: filepath.Join(d, "sys"), DevDir: filepath.Join(d, "dev"),
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

func (b *box) bundle(t *testing.T, arch string, payload []byte) []byte {
	t.Helper()
	key, err := layout.ParsePrivateKey(b.priv)
	if err != nil {
		t.Fatal(err)
	}
	n, sum, _ := layout.HashPayload(bytes.NewReader(payload))
	var out bytes.Buffer
	m := layout.Manifest{Arch: arch, Version: "2.0", Payload: layout.Payload{Size: n, SHA256: sum}}
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
	res, err := u.InstallFirmware(t.Context(), bytes.NewReader(b.bundle(t, "arm64", p)), true)
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
		_, err := u.InstallFirmware(t.Context(), bytes.NewReader(c.data), true)
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

func TestInstallDuringUncommittedTrialIsRefused(t *testing.T) {
	env, _ := layout.FactoryEnv().StartTrial(layout.SlotB)
	_, env = env.Boot()
	b := newBox(t, "outpost.slot=B outpost.trial=1", env)
	u, err := New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.InstallFirmware(t.Context(), bytes.NewReader(b.bundle(t, "arm64", payload())), false); !errors.Is(err, api.ErrFirmwareBusy) {
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
	res, err := u.InstallFirmware(t.Context(), bytes.NewReader(b.bundle(t, "arm64", payload())), false)
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
