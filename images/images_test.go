package images

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outpost/outpost/images/layout"
	"github.com/outpost/outpost/internal/testenv"
)

// repo is the repository root: go test runs in images/, the compiled
// test binary of make test-images in the root.
var repo = func() string {
	dir, _ := os.Getwd()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	return ".."
}()

// The Buildroot board's genimage config and the offline builder share one
// layout: the numbers in the file must be layout's.
func TestGenimageMatchesLayout(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repo, Board, "genimage.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	if !strings.Contains(cfg, `disk-uuid = "`+layout.DiskUUID+`"`) {
		t.Errorf("genimage.cfg: disk-uuid is not %s", layout.DiskUUID)
	}
	blockRE := regexp.MustCompile(`(?s)partition (\w+) \{(.*?)\n\t\}`)
	blocks := blockRE.FindAllStringSubmatch(cfg, -1)
	if len(blocks) != len(layout.Partitions) {
		t.Fatalf("genimage.cfg has %d partitions, layout %d", len(blocks), len(layout.Partitions))
	}
	field := func(body, k string) string {
		m := regexp.MustCompile(`(?m)^\s*` + k + `\s*=\s*"?([^"\n]+)"?`).FindStringSubmatch(body)
		if m == nil {
			return ""
		}
		return m[1]
	}
	for i, p := range layout.Partitions {
		name, body := blocks[i][1], blocks[i][2]
		size := strconv.FormatInt(p.Size/layout.MiB, 10) + "M"
		if name != p.Name || field(body, "partition-uuid") != p.UUID || field(body, "partition-type-uuid") != p.Type || field(body, "size") != size {
			t.Errorf("genimage.cfg partition %d = %s {uuid %s type %s size %s}, layout %+v", i+1, name,
				field(body, "partition-uuid"), field(body, "partition-type-uuid"), field(body, "size"), p)
		}
	}
	if off := field(blocks[0][2], "offset"); off != strconv.Itoa(layout.FirstOffset/layout.MiB)+"M" {
		t.Errorf("first partition offset %s", off)
	}
	// The Raspberry Pi 4 variant differs only in what its ESP holds.
	rpi, err := os.ReadFile(filepath.Join(repo, Board, "genimage-rpi4.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := cfg[strings.Index(cfg, "image outpost.img"):], string(rpi[bytes.Index(rpi, []byte("image outpost.img")):]); a != b {
		t.Errorf("genimage-rpi4.cfg's disk differs from genimage.cfg's")
	}
}

// grub.cfg implements layout.Env.Boot: its keys and partition numbers.
func TestGrubCfgMatchesLayout(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repo, Board, "grub.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(b)
	gpt := func(name string) string {
		p, _ := layout.Lookup(name)
		return "gpt" + strconv.Itoa(p.Number)
	}
	for _, want := range []string{
		"set envfile=($disk," + gpt(layout.ESP) + ")/" + layout.EnvFile,
		`if [ "$` + layout.KeySlot + `" = "B" ]; then set boot=B; fi`,
		`if [ "$` + layout.KeyUpgrade + `" = "1" ]; then`,
		`if [ "$` + layout.KeyNext + `" = "A" ]; then set boot=A; set trial=1; fi`,
		`if [ "$` + layout.KeyNext + `" = "B" ]; then set boot=B; set trial=1; fi`,
		"set " + layout.KeyUpgrade + "=0\n  save_env --file $envfile " + layout.KeyUpgrade,
		"set part=" + gpt(layout.RootA),
		`if [ "$boot" = "B" ]; then set part=` + gpt(layout.RootB) + "; fi",
		"root=PARTLABEL=root$boot",
		layout.CmdlineSlot + "=$boot " + layout.CmdlineTrial + "=$trial",
		"$" + layout.KeyCmdline,
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("grub.cfg lacks %q", want)
		}
	}
	// save_env must come before the kernel is loaded: a trial consumes
	// itself even if the slot never boots.
	if strings.Index(cfg, "save_env") > strings.Index(cfg, "linux (") {
		t.Error("grub.cfg loads the kernel before it consumes the trial")
	}
}

func TestInitramfsIsReproducible(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "bin"), 0o755)
	os.MkdirAll(filepath.Join(root, "dev"), 0o755)
	os.WriteFile(filepath.Join(root, "init"), []byte("#!/bin/sh\n"), 0o755)
	os.Symlink("busybox", filepath.Join(root, "bin", "sh"))
	var sums []string
	for i := range 2 {
		p := filepath.Join(t.TempDir(), "initrd.img")
		if err := writeInitramfs(p, root, 1767225600); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		sums = append(sums, string(b))
		os.Chtimes(filepath.Join(root, "init"), time.Now(), time.Now()) // mtimes must not matter
		if i == 1 && sums[0] != sums[1] {
			t.Fatal("two archives of one tree differ")
		}
		if _, err := exec.LookPath("cpio"); err == nil {
			out, err := exec.Command("sh", "-c", "zcat "+p+" | cpio -itv 2>&1").CombinedOutput()
			if err != nil || !strings.Contains(string(out), "init") || !strings.Contains(string(out), "bin/sh -> busybox") || !strings.Contains(string(out), "dev/console") {
				t.Fatalf("cpio -t: %v\n%s", err, out)
			}
		} else if i == 0 {
			t.Log("cpio not installed (make image-deps installs it as root: Debian cpio): the archive's listing is not checked")
		}
	}
}

func TestNormalizeFAT(t *testing.T) {
	for _, tool := range []string{"mkfs.vfat", "mcopy", "mdir"} {
		testenv.NeedTool(t, tool)
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "esp.vfat")
	src := filepath.Join(dir, "EFI", "BOOT")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "grub.cfg"), []byte("set timeout=0\n"), 0o644)
	for _, c := range [][]string{{"mkfs.vfat", "-C", "-i", "4f505354", img, "32768"}, {"mcopy", "-s", "-i", img, filepath.Join(dir, "EFI"), "::"}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
	}
	if err := normalizeFAT(img, 0, time.Unix(1767225600, 0)); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mdir", "-i", img, "-/", "::").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "DIR>") || strings.Contains(l, "grub") {
			if !strings.Contains(l, "2026-01-01   0:00") {
				t.Errorf("not normalized: %q", l)
			}
		}
	}
}

func TestFactoryDocument(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"ca.pem", "box.pem", "box-key.pem"} {
		os.WriteFile(filepath.Join(dir, f), []byte("PEM of "+f), 0o600)
	}
	b, err := MakeFactory(FactoryOptions{HQCA: filepath.Join(dir, "ca.pem"), BoxCert: filepath.Join(dir, "box.pem"), BoxKey: filepath.Join(dir, "box-key.pem")})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SIP struct {
			Listen []string `json:"listen"`
		} `json:"sip"`
		Management struct {
			Listen      string `json:"listen"`
			ClientCAPEM string `json:"client_ca_pem"`
		} `json:"management"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if strings.Join(doc.SIP.Listen, ",") != "udp:0.0.0.0:5060,tcp:0.0.0.0:5060" || doc.Management.Listen != ":8443" || doc.Management.ClientCAPEM != "PEM of ca.pem" {
		t.Errorf("factory document: %+v", doc)
	}
}

// testProject is the repository's own image build (make image).
func testProject(t *testing.T, arch string, required bool) *Project {
	t.Helper()
	release, err := os.ReadFile(filepath.Join(repo, "images/out", arch, "rootfs/etc/outpost/release"))
	if err != nil && required {
		t.Fatalf("no %s image built (make image ARCH=%s): %v", arch, arch, err)
	}
	if err != nil {
		t.Skipf("no %s image built (make image ARCH=%s): %v", arch, arch, err)
	}
	kv := map[string]string{}
	for _, l := range strings.Split(string(release), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			kv[k] = v
		}
	}
	epoch, _ := strconv.ParseInt(kv["BUILD_EPOCH"], 10, 64)
	abs, _ := filepath.Abs(repo)
	return &Project{Repo: abs, Out: filepath.Join(abs, "images/out"), Keys: filepath.Join(abs, "images/keys"),
		Version: kv["VERSION"], Epoch: epoch, Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// A built image has layout's partitions, in order, with its GUIDs.
func TestBuiltImageLayout(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			p := testProject(t, arch, false)
			disk, parts, err := readGPT(p.ImagePath(arch))
			if err != nil {
				t.Fatal(err)
			}
			if disk != layout.DiskUUID || len(parts) != len(layout.Partitions) {
				t.Fatalf("disk %s with %d partitions", disk, len(parts))
			}
			for i, lp := range layout.Partitions {
				g := parts[i]
				if g.Name != lp.Name || g.UUID != lp.UUID || g.Type != lp.Type || g.Size() != lp.Size {
					t.Errorf("partition %d: image %+v (size %d), layout %+v", i+1, g, g.Size(), lp)
				}
			}
			if parts[0].Offset() != layout.FirstOffset {
				t.Errorf("ESP at %d", parts[0].Offset())
			}
		})
	}
}

// TestImageBoot runs the qemu boot tests of both images (BootTest). It
// needs root, the image tools and a private network namespace, so it runs
// only when make test-images (part of make test) starts it that way, with
// OUTPOST_IMAGE_BOOT=1 inside `scripts/image-netns.sh`.
func TestImageBoot(t *testing.T) {
	if os.Getenv("OUTPOST_IMAGE_BOOT") != "1" {
		t.Skip("qemu boot tests run from make test-images (make test does) inside a private network namespace; set OUTPOST_IMAGE_BOOT=1 there")
	}
	// make test-images, which sets OUTPOST_IMAGE_BOOT, runs make image-deps
	// first: a missing tool is a failure, not a skip.
	for _, tool := range []string{"qemu-system-x86_64", "qemu-system-aarch64", "mksquashfs", "genimage"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: not installed, but OUTPOST_IMAGE_BOOT=1 asks for the boot tests and make test-images, which sets it, runs make image-deps first, which installs it: the install step is broken", tool)
		}
	}
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			p := testProject(t, arch, true)
			rep, err := BootTest(t.Context(), BootTestOptions{Project: p, Arch: arch, Accel: os.Getenv("OUTPOST_QEMU_ACCEL")})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s (%s, attempts %d): boot to SIP ready %.1f s first boot, %.1f s after a power cut; "+
				"update push to SIP ready %.1f s, rollback %.1f s; idle RSS %.1f MiB; image %.0f MiB (%.1f MiB allocated), bundle %.1f MiB, outpostd %.1f MiB",
				arch, rep.Accel, rep.Attempts, rep.FirstBootS, rep.SecondBootS, rep.UpdateS, rep.RollbackS, mib(rep.IdleRSS),
				mib(rep.ImageBytes), mib(rep.ImageAlloc), mib(rep.BundleBytes), mib(rep.OutpostdBytes))
			for _, name := range []string{"first_boot", "second_boot", "update", "rollback", "reformat"} {
				ph := rep.Phases[name]
				t.Logf("%s %s: firmware %.2f s, GRUB %.2f s, kernel %.2f s (its clock %.2f s), init %.2f s, outpostd %.2f s: %.2f s",
					arch, name, ph.Firmware, ph.GRUB, ph.Kernel, ph.KernelClock, ph.Init, ph.Outpostd, ph.Total)
			}
		})
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// Both paths build GRUB with the same modules.
func TestDefconfigsMatchBuilder(t *testing.T) {
	want := `BR2_TARGET_GRUB2_BUILTIN_MODULES_EFI="` + strings.Join(grubModules, " ") + `"`
	for _, d := range []string{"outpost_x86_64_defconfig", "outpost_aarch64_virt_defconfig", "outpost_rpi4_defconfig"} {
		b, err := os.ReadFile(filepath.Join(repo, "buildroot/configs", d))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range []string{want, "BR2_INIT_NONE=y", "BR2_TARGET_ROOTFS_SQUASHFS4_LZO=y", "BR2_PACKAGE_OUTPOST=y",
			`BR2_ROOTFS_OVERLAY="$(BR2_EXTERNAL_OUTPOST_PATH)/board/outpost/rootfs-overlay"`} {
			if !strings.Contains(string(b), line+"\n") {
				t.Errorf("%s lacks %s", d, line)
			}
		}
	}
}
