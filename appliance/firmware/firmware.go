package firmware

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/outpost/outpost/appliance/api"
	"github.com/outpost/outpost/images/layout"
)

// Config locates the A/B layout. Zero fields take the defaults of a box.
type Config struct {
	BootEnv   string // GRUB environment block on the mounted ESP (required)
	BundleKey string // ed25519 public key (PEM) bundles must verify with (required)
	SpoolDir  string // where a payload waits for its verification: the data partition (required)
	Version   string // running build, reported by Status
	Release   string // running slot's release file (layout.Release; anti-rollback); default /etc/outpost/release
	Arch      string // default runtime.GOARCH
	Cmdline   string // kernel command line; default /proc/cmdline
	SysBlock  string // default /sys/class/block
	DevDir    string // default /dev
	// Reboot reboots the box; default SIGTERM to PID 1 (BusyBox init).
	Reboot      func() error
	RebootDelay time.Duration // after the answer is sent; default 1 s
	Log         *slog.Logger
}

// Updater installs bundles and commits trial boots.
type Updater struct {
	cfg  Config
	key  ed25519.PublicKey
	boot layout.Boot
	// installed is the running (= committed, when installing) build;
	// releaseErr is why its release file could not be read, if so.
	installed  layout.Release
	releaseErr error

	install sync.Mutex // one install at a time (TryLock: a second one is refused)

	mu      sync.Mutex
	healthy bool
	timer   *time.Timer // pending reboot
}

// New checks cfg against the running system: the boot loader must have
// named the slot on the kernel command line and the environment block must
// be readable.
func New(cfg Config) (*Updater, error) {
	if cfg.BootEnv == "" || cfg.BundleKey == "" || cfg.SpoolDir == "" {
		return nil, errors.New("firmware: BootEnv, BundleKey and SpoolDir are required")
	}
	if cfg.Arch == "" {
		cfg.Arch = runtime.GOARCH
	}
	if cfg.SysBlock == "" {
		cfg.SysBlock = "/sys/class/block"
	}
	if cfg.Release == "" {
		cfg.Release = "/" + layout.ReleaseFile
	}
	if cfg.DevDir == "" {
		cfg.DevDir = "/dev"
	}
	if cfg.RebootDelay == 0 {
		cfg.RebootDelay = time.Second
	}
	if cfg.Reboot == nil {
		cfg.Reboot = func() error { return syscall.Kill(1, syscall.SIGTERM) }
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Cmdline == "" {
		b, err := os.ReadFile("/proc/cmdline")
		if err != nil {
			return nil, fmt.Errorf("firmware: %w", err)
		}
		cfg.Cmdline = string(b)
	}
	boot, ok := layout.ParseCmdline(cfg.Cmdline)
	if !ok {
		return nil, fmt.Errorf("firmware: the kernel command line names no slot (%s=A|B): not booted by the A/B boot loader", layout.CmdlineSlot)
	}
	pemKey, err := os.ReadFile(cfg.BundleKey)
	if err != nil {
		return nil, fmt.Errorf("firmware: bundle key: %w", err)
	}
	key, err := layout.ParsePublicKey(pemKey)
	if err != nil {
		return nil, fmt.Errorf("firmware: %w", err)
	}
	u := &Updater{cfg: cfg, key: key, boot: boot}
	if _, err := u.readEnv(); err != nil {
		return nil, err
	}
	u.installed, u.releaseErr = readRelease(cfg.Release)
	if u.releaseErr != nil {
		// Not fatal: the trial must still commit. Installs then need allow_downgrade.
		cfg.Log.Error("firmware: the running build's release is unreadable; bundles install only with allow_downgrade", "err", u.releaseErr)
	}
	if u.installed.Version == "" {
		u.installed.Version = cfg.Version
	}
	return u, nil
}

// readRelease reads the running slot's release file. A missing file is an
// image from before the file: no epoch recorded, like a file without
// BUILD_EPOCH.
func readRelease(path string) (layout.Release, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return layout.Release{}, nil
	}
	if err != nil {
		return layout.Release{}, fmt.Errorf("firmware: %w", err)
	}
	r, err := layout.ParseRelease(b)
	if err != nil {
		return layout.Release{}, fmt.Errorf("firmware: %s: %w", path, err)
	}
	return r, nil
}

// Close cancels a reboot that has not happened yet.
func (u *Updater) Close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.timer != nil {
		u.timer.Stop()
	}
}

func (u *Updater) readEnv() (layout.Env, error) {
	b, err := os.ReadFile(u.cfg.BootEnv)
	if err != nil {
		return nil, fmt.Errorf("firmware: boot environment: %w", err)
	}
	env, err := layout.ParseEnv(b)
	if err != nil {
		return nil, fmt.Errorf("firmware: boot environment %s: %w", u.cfg.BootEnv, err)
	}
	return env, nil
}

// writeEnv rewrites the block in place: GRUB's save_env needs the file's
// clusters where they are, so it is never truncated or replaced.
func (u *Updater) writeEnv(env layout.Env) error {
	b, err := env.Encode()
	if err != nil {
		return fmt.Errorf("firmware: %w", err)
	}
	f, err := os.OpenFile(u.cfg.BootEnv, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("firmware: boot environment: %w", err)
	}
	if fi, err := f.Stat(); err == nil && fi.Size() != layout.EnvSize {
		f.Close()
		return fmt.Errorf("firmware: boot environment %s has %d bytes, want %d", u.cfg.BootEnv, fi.Size(), layout.EnvSize)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return fmt.Errorf("firmware: boot environment: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("firmware: boot environment: %w", err)
	}
	return f.Close()
}

// FirmwareStatus implements api.Firmware.
func (u *Updater) FirmwareStatus(context.Context) (api.FirmwareStatus, error) {
	env, err := u.readEnv()
	if err != nil {
		return api.FirmwareStatus{}, err
	}
	u.mu.Lock()
	healthy := u.healthy
	u.mu.Unlock()
	st := api.FirmwareStatus{Arch: u.cfg.Arch, Version: u.cfg.Version, Slot: string(u.boot.Slot),
		Trial: u.boot.Trial && env.Committed() != u.boot.Slot, Committed: string(env.Committed()),
		Failed: env[layout.KeyFailed], Healthy: healthy, SlotSize: layout.SlotSize(), Built: u.installed.Epoch}
	if s, ok := env.Pending(); ok {
		st.Pending = string(s)
	}
	return st, nil
}

// partition returns the device of the GPT partition called name, found by
// PARTNAME= in sysfs as the init finds it.
func (u *Updater) partition(name string) (string, error) {
	ents, err := os.ReadDir(u.cfg.SysBlock)
	if err != nil {
		return "", fmt.Errorf("firmware: %w", err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(u.cfg.SysBlock, e.Name(), "uevent"))
		if err != nil {
			continue
		}
		var dev string
		match := false
		for _, l := range strings.Split(string(b), "\n") {
			if l == "PARTNAME="+name {
				match = true
			}
			if v, ok := strings.CutPrefix(l, "DEVNAME="); ok {
				dev = v
			}
		}
		if match && dev != "" {
			return filepath.Join(u.cfg.DevDir, dev), nil
		}
	}
	return "", fmt.Errorf("firmware: no partition named %s", name)
}

func refused(err error) error { return fmt.Errorf("%w: %w", api.ErrBadBundle, err) }

// checkDowngrade applies the anti-rollback rule (layout.Manifest.CheckDowngrade) to
// a verified manifest: it reports whether m is a downgrade that allow lets
// through, and refuses one it does not with api.ErrDowngrade.
func (u *Updater) checkDowngrade(m *layout.Manifest, allow bool, log *slog.Logger) (downgrade bool, err error) {
	if u.releaseErr != nil {
		if !allow {
			return false, fmt.Errorf("%w: the installed firmware's build is unknown (%v), so bundle %s may be older; push with allow_downgrade (outpostctl firmware push --allow-downgrade) to install it anyway",
				api.ErrDowngrade, u.releaseErr, m.Version)
		}
		log.Warn("firmware: installing a bundle that cannot be compared with the installed build (allow_downgrade)", "err", u.releaseErr)
		return false, nil
	}
	if u.installed.Epoch == 0 {
		log.Warn("firmware: the installed build records no BUILD_EPOCH; the bundle cannot be checked against a downgrade",
			"installed", u.installed.Version, "bundle_created", m.Created)
		return false, nil
	}
	err = m.CheckDowngrade(u.installed)
	switch {
	case err == nil:
		return false, nil
	case !allow:
		return false, fmt.Errorf("%w: %w; push with allow_downgrade (outpostctl firmware push --allow-downgrade) to install it anyway", api.ErrDowngrade, err)
	}
	log.Warn("firmware: installing an older build (allow_downgrade)", "installed", u.installed.Version,
		"installed_epoch", u.installed.Epoch, "bundle_created", m.Created)
	return true, nil
}

// InstallFirmware implements api.Firmware; see the package doc.
func (u *Updater) InstallFirmware(ctx context.Context, body io.Reader, opts api.InstallOptions) (api.FirmwareResult, error) {
	if !u.install.TryLock() {
		return api.FirmwareResult{}, fmt.Errorf("%w: another bundle is being installed", api.ErrFirmwareBusy)
	}
	defer u.install.Unlock()
	env, err := u.readEnv()
	if err != nil {
		return api.FirmwareResult{}, err
	}
	if env.Committed() != u.boot.Slot {
		return api.FirmwareResult{}, fmt.Errorf("%w: slot %s runs on trial and is not committed yet (committed: %s)",
			api.ErrFirmwareBusy, u.boot.Slot, env.Committed())
	}
	target := u.boot.Slot.Other()

	m, err := layout.ReadManifest(body, u.key)
	if err != nil {
		if errors.Is(err, layout.ErrBundle) {
			return api.FirmwareResult{}, refused(err)
		}
		return api.FirmwareResult{}, fmt.Errorf("firmware: reading bundle: %w", err)
	}
	if err := m.Check(u.cfg.Arch); err != nil {
		return api.FirmwareResult{}, refused(err)
	}
	log := u.cfg.Log.With("version", m.Version, "slot", target, "size", m.Payload.Size)
	downgrade, err := u.checkDowngrade(m, opts.AllowDowngrade, log)
	if err != nil {
		return api.FirmwareResult{}, err // logged by the API handler, like a bad bundle
	}
	log.Info("firmware bundle signature verified; receiving payload")

	// Spool and verify the whole payload before the slot is touched.
	if err := checkFree(u.cfg.SpoolDir, m.Payload.Size+16<<20); err != nil {
		return api.FirmwareResult{}, err
	}
	spool, err := os.CreateTemp(u.cfg.SpoolDir, "firmware-*.partial")
	if err != nil {
		return api.FirmwareResult{}, fmt.Errorf("firmware: spool: %w", err)
	}
	defer func() {
		spool.Close()
		os.Remove(spool.Name())
	}()
	if _, err := io.Copy(spool, m.PayloadReader(body)); err != nil {
		if errors.Is(err, layout.ErrBundle) {
			return api.FirmwareResult{}, refused(err)
		}
		return api.FirmwareResult{}, fmt.Errorf("firmware: receiving payload: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return api.FirmwareResult{}, err
	}

	dev, err := u.partition(target.Partition())
	if err != nil {
		return api.FirmwareResult{}, err
	}
	if err := writeSlot(dev, spool, m.Payload.Size, m.Payload.SHA256); err != nil {
		return api.FirmwareResult{}, err
	}
	next, err := env.StartTrial(target)
	if err != nil {
		return api.FirmwareResult{}, fmt.Errorf("firmware: %w", err)
	}
	if err := u.writeEnv(next); err != nil {
		return api.FirmwareResult{}, err
	}
	log.Info("firmware written; the next boot tries the slot once", "device", dev)
	res := api.FirmwareResult{Slot: string(target), Version: m.Version, Arch: m.Arch, Size: m.Payload.Size,
		SHA256: m.Payload.SHA256, Reboot: opts.Reboot, Downgrade: downgrade}
	if opts.Reboot {
		u.mu.Lock()
		u.timer = time.AfterFunc(u.cfg.RebootDelay, func() {
			u.cfg.Log.Info("rebooting into the new slot for its trial boot", "slot", target)
			if err := u.cfg.Reboot(); err != nil {
				u.cfg.Log.Error("reboot failed", "err", err)
			}
		})
		u.mu.Unlock()
	}
	return res, nil
}

// writeSlot copies the verified spool to the slot device, syncs it and
// reads it back: a short or failed write never leads to a trial boot.
func writeSlot(dev string, spool *os.File, size int64, sum string) error {
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("firmware: spool: %w", err)
	}
	out, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("firmware: slot: %w", err)
	}
	if n, err := io.Copy(out, spool); err != nil || n != size {
		out.Close()
		return fmt.Errorf("firmware: writing %s: %d of %d bytes: %v", dev, n, size, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("firmware: syncing %s: %w", dev, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("firmware: %s: %w", dev, err)
	}
	in, err := os.Open(dev)
	if err != nil {
		return fmt.Errorf("firmware: slot: %w", err)
	}
	defer in.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, in, size); err != nil {
		return fmt.Errorf("firmware: reading back %s: %w", dev, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("firmware: %s reads back with SHA-256 %s, wrote %s", dev, got, sum)
	}
	return nil
}

func checkFree(dir string, need int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("firmware: spool: %w", err)
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < need {
		return fmt.Errorf("firmware: the data partition has %d MiB free, the bundle needs %d MiB", free>>20, need>>20)
	}
	return nil
}

// Commit is called once the booted system is healthy: it commits a trial
// boot's slot, or records that the other slot's trial failed.
func (u *Updater) Commit() (layout.Outcome, error) {
	env, err := u.readEnv()
	if err != nil {
		return layout.Unchanged, err
	}
	next, outcome := env.Confirm(u.boot)
	u.mu.Lock()
	u.healthy = true
	u.mu.Unlock()
	if outcome == layout.Unchanged {
		return outcome, nil
	}
	if err := u.writeEnv(next); err != nil {
		return outcome, err
	}
	switch outcome {
	case layout.Committed:
		u.cfg.Log.Info("firmware: trial boot healthy; slot committed", "slot", u.boot.Slot)
	case layout.RolledBack:
		u.cfg.Log.Warn("firmware: the last update's trial boot never became healthy; running the committed slot",
			"failed_slot", next[layout.KeyFailed], "slot", u.boot.Slot)
	}
	return outcome, nil
}

var _ api.Firmware = (*Updater)(nil)
