package images

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/outpost/outpost/images/layout"
)

// BootTestOptions select the boot test.
type BootTestOptions struct {
	Project *Project
	Arch    string
	Accel   string // kvm, tcg or auto
	Retries int    // whole-scenario retries after a failure (default 1)
}

// BootReport is what a boot test measured (images/out/ARCH/boot-report.json).
type BootReport struct {
	Arch          string `json:"arch"`
	Accel         string `json:"accel"`
	Version       string `json:"version"`
	ImageBytes    int64  `json:"image_bytes"`     // apparent size of the raw disk image
	ImageAlloc    int64  `json:"image_allocated"` // blocks allocated (sparse file)
	RootfsBytes   int64  `json:"rootfs_bytes"`    // slot image (squashfs)
	BundleBytes   int64  `json:"bundle_bytes"`    // signed update bundle
	OutpostdBytes int64  `json:"outpostd_bytes"`  // static, stripped
	// Seconds from qemu start (power on) to the first answered SIP OPTIONS
	// through the 127.0.0.1 forward.
	FirstBootS  float64 `json:"first_boot_sip_ready_s"` // includes formatting the data partition
	SecondBootS float64 `json:"second_boot_sip_ready_s"`
	// Seconds from the end of `outpostctl firmware push` to SIP answering
	// on the new slot (reboot, firmware, GRUB, kernel, init, outpostd).
	UpdateS   float64 `json:"update_push_to_sip_ready_s"`
	RollbackS float64 `json:"rollback_push_to_sip_ready_s"` // trial boot, its failure, the boot back
	IdleRSS   int64   `json:"idle_rss_bytes"`               // outpostd, from /metrics, idle after boot
	// Phases split each boot above by console lines (bootPhases):
	// first_boot, second_boot, update, rollback, reformat.
	Phases   map[string]BootPhases `json:"phases"`
	Attempts int                   `json:"attempts"`
}

// BootPhases is one boot split where the console shows a hand-over, in
// seconds, each phase from the end of the one before; the clock starts at
// power on (qemu start) for the first, second and reformat boots, at the
// end of the push for an update (Firmware then includes the reboot), and
// at init's "trial boot ... failed" line for a rollback.
type BootPhases struct {
	Firmware float64 `json:"firmware_s"` // to GRUB's first line (outpost: slot X trial N)
	GRUB     float64 `json:"grub_s"`     // to GRUB having read kernel and initrd from the slot
	// Kernel is the EFI stub decompressing the kernel, the kernel's own
	// start and the boot initrd, to /sbin/init's first line; KernelClock is
	// the kernel's uptime at that line (the rest is the decompression).
	Kernel      float64 `json:"kernel_s"`
	KernelClock float64 `json:"kernel_clock_at_init_s"`
	Init        float64 `json:"init_s"`     // to init starting outpostd (mounts, modules, networking)
	Outpostd    float64 `json:"outpostd_s"` // to the first SIP OPTIONS answered through the forward
	Total       float64 `json:"total_s"`
}

// The console lines that end each phase (grub.cfg, rootfs-overlay/sbin/init).
var (
	grubFirstLine  = regexp.MustCompile(`outpost: slot [AB] trial [01]`)
	grubLoadedLine = regexp.MustCompile(`outpost: kernel and initrd loaded`)
	initFirstLine  = regexp.MustCompile(`OUTPOST-BOOT slot=\S+ trial=\S+ .*uptime=([0-9.]+)`)
	outpostdLine   = regexp.MustCompile(`outpost-init: starting outpostd`)
)

// bootPhases splits the boot whose console starts after line from, with
// the clock starting at t0 and SIP answering at sip (both from qemu start).
func (v *vm) bootPhases(ctx context.Context, from int, t0, sip time.Duration) (BootPhases, error) {
	var ph BootPhases
	prev := t0
	for _, s := range []struct {
		re  *regexp.Regexp
		out *float64
	}{{grubFirstLine, &ph.Firmware}, {grubLoadedLine, &ph.GRUB}, {initFirstLine, &ph.Kernel}, {outpostdLine, &ph.Init}} {
		i, m, err := v.waitConsole(ctx, from, s.re)
		if err != nil {
			return ph, fmt.Errorf("boot phases: %w", err)
		}
		at := v.lineAt(i)
		*s.out, prev, from = round2((at - prev).Seconds()), at, i+1
		if len(m) > 1 {
			ph.KernelClock, _ = strconv.ParseFloat(m[1], 64)
		}
	}
	ph.Outpostd = round2((sip - prev).Seconds())
	ph.Total = round2((sip - t0).Seconds())
	return ph, nil
}

func (v *vm) lineAt(i int) time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.at[i]
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// BootTest builds the update bundles the scenario needs, then boots the
// image of arch (make image) in qemu and checks, in order:
//
//  1. first boot: the data partition comes formatted with the image (the
//     init formats nothing), SIP answers through the forward, the
//     management API answers over mutual TLS with the factory document;
//  2. a config pushed over the management API and a REGISTER are stored;
//  3. after a power cut both are still there, and the data partition is
//     not formatted again;
//  4. bundles with the wrong architecture, a foreign signature or a
//     truncated payload are refused with a clear error and slot B stays
//     untouched (all zero) with no trial pending;
//  5. a good bundle is installed into slot B, the box reboots into it on
//     trial, becomes healthy and commits B;
//  6. a bundle whose outpostd exits at start is installed into slot A, its
//     trial fails, the box reboots into the committed slot B;
//  7. after a power cut and a wiped data partition, the init formats it
//     again and the box answers on the factory document.
//
// A failed scenario is retried once from a fresh copy of the image.
func BootTest(ctx context.Context, o BootTestOptions) (BootReport, error) {
	p := o.Project
	p.defaults()
	if o.Retries == 0 {
		o.Retries = 1
	}
	rep := BootReport{Arch: o.Arch, Accel: accel(o.Accel, o.Arch), Version: p.Version, Phases: map[string]BootPhases{}}
	img := p.ImagePath(o.Arch)
	if _, err := os.Stat(img); err != nil {
		return rep, fmt.Errorf("images: no image to boot (make image ARCH=%s): %w", o.Arch, err)
	}
	work := filepath.Join(p.ArchDir(o.Arch), "boottest")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return rep, err
	}
	b, err := p.testBundles(ctx, o.Arch, work)
	if err != nil {
		return rep, err
	}
	rep.ImageBytes, rep.ImageAlloc = fileSizes(img)
	rep.RootfsBytes, _ = fileSizes(filepath.Join(p.ArchDir(o.Arch), "binaries", "rootfs.squashfs"))
	rep.BundleBytes, _ = fileSizes(b.good)
	rep.OutpostdBytes, _ = fileSizes(filepath.Join(p.ArchDir(o.Arch), "go", "outpostd"))

	for attempt := 1; ; attempt++ {
		rep.Attempts = attempt
		err = p.scenario(ctx, o.Arch, rep.Accel, img, work, b, &rep)
		if err == nil {
			break
		}
		if attempt > o.Retries || ctx.Err() != nil {
			return rep, err
		}
		p.Log.Warn("boot test failed; retrying once from a fresh image", "arch", o.Arch, "attempt", attempt, "err", err)
	}
	js, _ := json.MarshalIndent(rep, "", "  ")
	return rep, os.WriteFile(filepath.Join(p.ArchDir(o.Arch), "boot-report.json"), append(js, '\n'), 0o644)
}

type testBundles struct {
	good, goodVersion string
	bad               string // outpostd exits at start
	wrongArch         string
	foreignKey        string
	truncated         string
}

// testBundles builds the slot variants (version stamped differently; one
// with a broken outpostd) and signs them, plus three that must be refused.
func (p *Project) testBundles(ctx context.Context, arch, work string) (testBundles, error) {
	b := testBundles{goodVersion: p.Version + "-update"}
	good, err := p.Variant(ctx, arch, b.goodVersion, "")
	if err != nil {
		return b, err
	}
	broken := filepath.Join(work, "outpostd-broken")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'outpostd: deliberately broken build (rollback test): exiting' >&2\nexit 1\n"), 0o755); err != nil {
		return b, err
	}
	bad, err := p.Variant(ctx, arch, p.Version+"-broken", broken)
	if err != nil {
		return b, err
	}
	sign := func(rootfs, a, version, key, out string) error {
		_, err := MakeBundle(BundleOptions{Rootfs: rootfs, Key: key, Arch: a, Version: version, Epoch: p.Epoch, Out: out})
		return err
	}
	b.good, b.bad = filepath.Join(work, "good.bundle"), filepath.Join(work, "bad.bundle")
	b.wrongArch, b.foreignKey, b.truncated = filepath.Join(work, "wrong-arch.bundle"), filepath.Join(work, "foreign-key.bundle"), filepath.Join(work, "truncated.bundle")
	if err := sign(good, arch, b.goodVersion, p.BundleKey(), b.good); err != nil {
		return b, err
	}
	if err := sign(bad, arch, p.Version+"-broken", p.BundleKey(), b.bad); err != nil {
		return b, err
	}
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[arch]
	if err := sign(good, other, b.goodVersion, p.BundleKey(), b.wrongArch); err != nil {
		return b, err
	}
	foreign := filepath.Join(work, "foreign.key")
	os.Remove(foreign)
	os.Remove(foreign + ".pub")
	if _, err := EnsureKey(foreign); err != nil {
		return b, err
	}
	if err := sign(good, arch, b.goodVersion, foreign, b.foreignKey); err != nil {
		return b, err
	}
	data, err := os.ReadFile(b.good)
	if err != nil {
		return b, err
	}
	return b, os.WriteFile(b.truncated, data[:len(data)-len(data)/3], 0o644)
}

// box is the booted image as HQ sees it: the SIP forward and outpostctl
// over the management API's forward.
type box struct {
	p        *Project
	ctl      string
	sip, api string
	work     string
}

func (b box) ctlRun(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	lab := b.p.LabDir()
	full := append([]string{"--server", "https://" + b.api, "--cert", filepath.Join(lab, LabClient+".pem"),
		"--key", filepath.Join(lab, LabClient+"-key.pem"), "--ca", filepath.Join(lab, LabCA), "--timeout", "60s"}, args...)
	cmd := exec.CommandContext(ctx, b.ctl, full...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// ctlJSON runs a verb with --json and decodes its answer.
func (b box) ctlJSON(ctx context.Context, out any, args ...string) error {
	so, se, err := b.ctlRun(ctx, append(args, "--json")...)
	if err != nil {
		return fmt.Errorf("outpostctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(se))
	}
	if err := json.Unmarshal([]byte(so), out); err != nil {
		return fmt.Errorf("outpostctl %s: %w in %q", strings.Join(args, " "), err, so)
	}
	return nil
}

type fwStatus struct {
	Slot, Committed, Pending, Failed, Version string
	Trial, Healthy                            bool
}

// waitHealthy polls the firmware status until the box reports its boot
// healthy (and so committed or rolled back).
func (b box) waitHealthy(ctx context.Context) (fwStatus, error) {
	var st fwStatus
	for {
		err := b.ctlJSON(ctx, &st, "firmware", "status")
		if err == nil && st.Healthy {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("firmware status never healthy (last %+v, %v): %w", st, err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

type stepErr struct {
	step string
	err  error
}

func (e *stepErr) Error() string { return e.step + ": " + e.err.Error() }
func (e *stepErr) Unwrap() error { return e.err }

func (p *Project) scenario(ctx context.Context, arch, acc, img, work string, bundles testBundles, rep *BootReport) (err error) {
	bootWait := 300 * time.Second // TCG, loaded machine
	if acc == "kvm" {
		bootWait = 120 * time.Second
	}
	disk, vars := filepath.Join(work, "disk.img"), filepath.Join(work, "vars.fd")
	if _, err := (runner{log: p.Log}).run(ctx, "", "cp", "--sparse=always", img, disk); err != nil {
		return err
	}
	if err := copyFile(uefi[arch].vars, vars, 0o644); err != nil {
		return err
	}
	console := filepath.Join(work, "console.log")
	os.Remove(console)
	sipPort, apiPort, err := freePorts()
	if err != nil {
		return err
	}
	hostCtl, err := p.HostCtl(ctx)
	if err != nil {
		return err
	}
	bx := box{p: p, ctl: hostCtl, sip: "127.0.0.1:" + itoa(sipPort), api: "127.0.0.1:" + itoa(apiPort), work: work}
	vc := vmConfig{Arch: arch, Disk: disk, Vars: vars, Accel: acc, SIPPort: sipPort, APIPort: apiPort, Console: console, Log: p.Log}
	step := func(name string, f func(context.Context) error) error {
		sctx, cancel := context.WithTimeout(ctx, bootWait)
		defer cancel()
		p.Log.Info("boot test", "arch", arch, "step", name)
		if err := f(sctx); err != nil {
			return &stepErr{name, err}
		}
		return nil
	}
	var v *vm
	boot := func(sctx context.Context, name string) (float64, error) {
		var err error
		// Each qemu run is bounded: the whole test's context and 15 minutes.
		if v, err = startVM(ctx, vc, 15*time.Minute); err != nil {
			return 0, err
		}
		if err := waitSIP(sctx, bx.sip); err != nil {
			return 0, err
		}
		sip := time.Since(v.started)
		if rep.Phases[name], err = v.bootPhases(sctx, 0, 0, sip); err != nil {
			return 0, err
		}
		return sip.Seconds(), nil
	}
	defer func() {
		if v != nil {
			if err != nil {
				err = fmt.Errorf("%w\n--- console (last lines; full log %s) ---\n%s", err, console, v.tailConsole(40))
			}
			v.stop()
		}
	}()

	// 1. First boot.
	var testVersion int64
	err = step("first boot", func(sctx context.Context) error {
		var err error
		if rep.FirstBootS, err = boot(sctx, "first_boot"); err != nil {
			return err
		}
		if v.tailConsoleHas(formatLine) {
			return errors.New("the first boot formatted the data partition: the image should carry it formatted")
		}
		var st struct {
			Version       string `json:"version"`
			ConfigSource  string `json:"config_source"`
			ConfigVersion int64  `json:"config_version"`
		}
		if err := bx.ctlJSON(sctx, &st, "status"); err != nil {
			return err
		}
		if st.Version != p.Version || !strings.Contains(st.ConfigSource, FactoryDoc) {
			return fmt.Errorf("status over mutual TLS: build %q config %q, want %q and the factory document", st.Version, st.ConfigSource, p.Version)
		}
		fw, err := bx.waitHealthy(sctx)
		if err != nil {
			return err
		}
		if fw.Slot != "A" || fw.Committed != "A" || fw.Trial {
			return fmt.Errorf("firmware status %+v, want slot A committed", fw)
		}
		return nil
	})
	if err != nil {
		return err
	}

	// 2. Push a config over the management API and register a phone.
	err = step("config push and registration", func(sctx context.Context) error {
		doc, err := testDocument(filepath.Join(p.ArchDir(arch), FactoryDoc))
		if err != nil {
			return err
		}
		f := filepath.Join(work, "pushed.json")
		if err := os.WriteFile(f, doc, 0o600); err != nil {
			return err
		}
		var res struct {
			Version struct {
				Version int64 `json:"version"`
			} `json:"version"`
		}
		if err := bx.ctlJSON(sctx, &res, "config", "apply", f); err != nil {
			return err
		}
		testVersion = res.Version.Version
		if err := sipRegister(bx.sip, "1001", "image-test-1001", "outpost.local"); err != nil {
			return err
		}
		if err := bx.checkRegistered(sctx); err != nil {
			return err
		}
		// Idle RSS: a few seconds after the last request.
		time.Sleep(5 * time.Second)
		rss, err := bx.metric(sctx, "process_resident_memory_bytes")
		if err != nil {
			return err
		}
		rep.IdleRSS = int64(rss)
		// Let the kernel write back (sysctl: 1 s) before the power cut.
		time.Sleep(3 * time.Second)
		return nil
	})
	if err != nil {
		return err
	}

	// 3. Power cut, boot again: config and registration survived.
	v.stop()
	v = nil
	err = step("second boot after a power cut", func(sctx context.Context) error {
		var err error
		if rep.SecondBootS, err = boot(sctx, "second_boot"); err != nil {
			return err
		}
		var cfg struct {
			Version struct {
				Version int64 `json:"version"`
			} `json:"version"`
			Document struct {
				Site struct {
					Name string `json:"name"`
				} `json:"site"`
			} `json:"document"`
		}
		if err := bx.ctlJSON(sctx, &cfg, "config", "get"); err != nil {
			return err
		}
		if cfg.Version.Version != testVersion || cfg.Document.Site.Name != "image-test" {
			return fmt.Errorf("after reboot: config version %d site %q, want %d %q", cfg.Version.Version, cfg.Document.Site.Name, testVersion, "image-test")
		}
		if err := bx.checkRegistered(sctx); err != nil {
			return fmt.Errorf("after reboot: %w", err)
		}
		if v.tailConsoleHas(formatLine) {
			return errors.New("the data partition was formatted again")
		}
		_, err = bx.waitHealthy(sctx)
		return err
	})
	if err != nil {
		return err
	}

	// 4. Bundles that must be refused, with nothing written.
	err = step("refused bundles", func(sctx context.Context) error {
		for _, c := range []struct{ file, want string }{
			{bundles.wrongArch, "built for another architecture"},
			{bundles.foreignKey, "signature does not verify"},
			{bundles.truncated, "truncated"},
		} {
			_, se, err := bx.ctlRun(sctx, "firmware", "push", c.file)
			if err == nil || !strings.Contains(se, c.want) || !strings.Contains(se, "422") {
				return fmt.Errorf("push %s: want a 422 refusal saying %q, got err=%v stderr=%q", filepath.Base(c.file), c.want, err, se)
			}
			p.Log.Info("refused as expected", "bundle", filepath.Base(c.file), "answer", strings.TrimSpace(se))
		}
		var fw fwStatus
		if err := bx.ctlJSON(sctx, &fw, "firmware", "status"); err != nil {
			return err
		}
		if fw.Pending != "" || fw.Committed != "A" {
			return fmt.Errorf("after refused bundles: %+v, want nothing pending and A committed", fw)
		}
		_, parts, err := readGPT(disk)
		if err != nil {
			return err
		}
		for _, pt := range parts {
			if pt.Name == layout.RootB {
				zero, err := regionZero(disk, pt.Offset(), 4<<20)
				if err != nil {
					return err
				}
				if !zero {
					return errors.New("slot B was written by a refused bundle")
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}

	// 5. A good update: slot B, trial boot, committed.
	err = step("good update", func(sctx context.Context) error {
		mark := v.mark()
		var res struct{ Slot string }
		if err := bx.ctlJSON(sctx, &res, "firmware", "push", bundles.good); err != nil {
			return err
		}
		pushed, pushedAt := time.Now(), time.Since(v.started)
		if res.Slot != "B" {
			return fmt.Errorf("good bundle went to slot %q, want B", res.Slot)
		}
		if _, _, err := v.waitConsole(sctx, mark, regexp.MustCompile(`OUTPOST-BOOT slot=B trial=1`)); err != nil {
			return err
		}
		if err := waitSIP(sctx, bx.sip); err != nil {
			return err
		}
		rep.UpdateS = time.Since(pushed).Seconds()
		if rep.Phases["update"], err = v.bootPhases(sctx, mark, pushedAt, time.Since(v.started)); err != nil {
			return err
		}
		fw, err := bx.waitHealthy(sctx)
		if err != nil {
			return err
		}
		if fw.Slot != "B" || fw.Committed != "B" || fw.Version != bundles.goodVersion || fw.Pending != "" {
			return fmt.Errorf("after the good update: %+v, want slot B committed running %s", fw, bundles.goodVersion)
		}
		return bx.checkRegistered(sctx)
	})
	if err != nil {
		return err
	}

	// 6. A bad update: slot A on trial, outpostd exits, back to B.
	err = step("bad update rolls back", func(sctx context.Context) error {
		mark := v.mark()
		var res struct{ Slot string }
		if err := bx.ctlJSON(sctx, &res, "firmware", "push", bundles.bad); err != nil {
			return err
		}
		pushed := time.Now()
		if res.Slot != "A" {
			return fmt.Errorf("bad bundle went to slot %q, want A", res.Slot)
		}
		var failed int // the line reporting the failed trial: the rollback boot's clock starts there
		for _, re := range []string{`OUTPOST-BOOT slot=A trial=1`, `trial boot of slot A failed`, `OUTPOST-BOOT slot=B trial=0`} {
			i, _, err := v.waitConsole(sctx, mark, regexp.MustCompile(re))
			if err != nil {
				return err
			}
			if mark = i + 1; failed == 0 && strings.Contains(re, "failed") {
				failed = i
			}
		}
		if err := waitSIP(sctx, bx.sip); err != nil {
			return err
		}
		rep.RollbackS = time.Since(pushed).Seconds()
		if rep.Phases["rollback"], err = v.bootPhases(sctx, failed+1, v.lineAt(failed), time.Since(v.started)); err != nil {
			return err
		}
		fw, err := bx.waitHealthy(sctx)
		if err != nil {
			return err
		}
		if fw.Slot != "B" || fw.Committed != "B" || fw.Failed != "A" || fw.Version != bundles.goodVersion {
			return fmt.Errorf("after the bad update: %+v, want slot B committed running %s, A failed", fw, bundles.goodVersion)
		}
		return bx.checkRegistered(sctx)
	})
	if err != nil {
		return err
	}

	// 7. Power cut, the data partition wiped: formatted again, factory document.
	v.stop()
	v = nil
	if err := wipeData(disk); err != nil {
		return err
	}
	return step("wiped data partition formatted again", func(sctx context.Context) error {
		if _, err := boot(sctx, "reformat"); err != nil {
			return err
		}
		if !v.tailConsoleHas(formatLine) {
			return errors.New("the init did not format the wiped data partition")
		}
		var st struct {
			ConfigSource string `json:"config_source"`
		}
		if err := bx.ctlJSON(sctx, &st, "status"); err != nil {
			return err
		}
		if !strings.Contains(st.ConfigSource, FactoryDoc) {
			return fmt.Errorf("after the wipe: config %q, want the factory document", st.ConfigSource)
		}
		fw, err := bx.waitHealthy(sctx)
		if err != nil {
			return err
		}
		if fw.Slot != "B" || fw.Committed != "B" {
			return fmt.Errorf("after the wipe: %+v, want slot B committed (the ESP is not the data partition)", fw)
		}
		return nil
	})
}

// formatLine is what the init says when it formats the data partition.
const formatLine = "no ext4 on the data partition: creating the data filesystem"

// wipeData zeroes the start of the data partition of disk (its ext4
// superblock with it), as a damaged or replaced disk would present it.
func wipeData(disk string) error {
	_, parts, err := readGPT(disk)
	if err != nil {
		return err
	}
	for _, pt := range parts {
		if pt.Name != layout.Data {
			continue
		}
		f, err := os.OpenFile(disk, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteAt(make([]byte, 1<<20), pt.Offset())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return errors.New("no data partition in " + disk)
}

func (v *vm) tailConsoleHas(s string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, l := range v.lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// checkRegistered: extension 1001 has a binding.
func (b box) checkRegistered(ctx context.Context) error {
	var regs []struct {
		AOR string `json:"aor"`
	}
	if err := b.ctlJSON(ctx, &regs, "registrations"); err != nil {
		return err
	}
	for _, r := range regs {
		if strings.Contains(r.AOR, "1001") {
			return nil
		}
	}
	return fmt.Errorf("no registration of 1001 (registrations: %+v)", regs)
}

// metric reads one Prometheus gauge from GET /metrics over mutual TLS.
func (b box) metric(ctx context.Context, name string) (float64, error) {
	lab := b.p.LabDir()
	cert, err := tls.LoadX509KeyPair(filepath.Join(lab, LabClient+".pem"), filepath.Join(lab, LabClient+"-key.pem"))
	if err != nil {
		return 0, err
	}
	caPEM, err := os.ReadFile(filepath.Join(lab, LabCA))
	if err != nil {
		return 0, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+b.api+"/metrics", nil)
	res, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(res.Body, 8<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	return 0, fmt.Errorf("metric %s not in /metrics", name)
}

// testDocument is the factory document with a site name and a user: what
// HQ would push first (it keeps the management section, or HQ would lose
// the box).
func testDocument(factory string) ([]byte, error) {
	b, err := os.ReadFile(factory)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	doc["site"] = map[string]any{"name": "image-test", "domain": "outpost.local"}
	doc["users"] = []any{map[string]any{"extension": "1001", "password": "image-test-1001", "name": "Image Test"}}
	return json.MarshalIndent(doc, "", "  ")
}

// fileSizes is the apparent and the allocated size of a file.
func fileSizes(p string) (apparent, allocated int64) {
	fi, err := os.Stat(p)
	if err != nil {
		return 0, 0
	}
	return fi.Size(), allocatedBytes(fi)
}
