package images

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/outpost/outpost/images/layout"
)

// Options are the inputs of one image build.
type Options struct {
	Arch       string // amd64 or arm64 (the Go and the Debian names agree)
	Repo       string // repository root: buildroot/board/outpost, images/initrd
	Out        string // build directory of this image, e.g. images/out/amd64
	Cache      string // downloaded packages, shared by builds: images/out/cache
	Version    string // stamped into /etc/outpost/release and bundles
	Epoch      int64  // SOURCE_DATE_EPOCH: every timestamp in the image
	Outpostd   string // static outpostd for Arch
	Outpostctl string // static outpostctl for Arch
	Factory    string // factory document (MakeFactory)
	BundlePub  string // ed25519 public key that updates must verify with (PEM)
	// RootfsOnly stops after rootfs.squashfs (for bundles: no ESP, no disk).
	RootfsOnly bool
	Log        *slog.Logger
}

// Result names what Build made.
type Result struct {
	Image   string // the GPT disk image (Out/outpost.img), "" with RootfsOnly
	Rootfs  string // the slot image (Out/binaries/rootfs.squashfs)
	Kernel  string // kernel version, e.g. 6.1.0-57-amd64
	Elapsed time.Duration
}

// Board is where the shared board files live, relative to the repository.
const Board = "buildroot/board/outpost"

var grubTarget = map[string]struct{ format, efi string }{
	"amd64": {"x86_64-efi", "BOOTX64.EFI"},
	"arm64": {"arm64-efi", "BOOTAA64.EFI"},
}

// grubModules are built into the standalone GRUB EFI binary: enough to
// read the ESP (fat) and a slot (squash4, lzo inside), evaluate grub.cfg
// (EFI/BOOT/grub.cfg beside the binary) and boot Linux; no /boot/grub.
var grubModules = []string{"part_gpt", "fat", "squash4", "lzopio", "xzio", "gzio", "linux", "normal", "configfile",
	"loadenv", "regexp", "test", "echo", "sleep", "reboot", "efi_gop"}

func (o *Options) check() error {
	if _, ok := grubTarget[o.Arch]; !ok {
		return fmt.Errorf("images: arch %q: want amd64 or arm64", o.Arch)
	}
	for name, p := range map[string]string{"outpostd": o.Outpostd, "outpostctl": o.Outpostctl, "factory document": o.Factory, "bundle public key": o.BundlePub} {
		if p == "" {
			return fmt.Errorf("images: %s not given", name)
		}
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("images: %s: %w", name, err)
		}
	}
	if o.Epoch <= 0 {
		return errors.New("images: SOURCE_DATE_EPOCH not set")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Build assembles the slot image and, unless RootfsOnly, the disk image.
func Build(ctx context.Context, o Options) (Result, error) {
	start := time.Now()
	if err := o.check(); err != nil {
		return Result{}, err
	}
	r := runner{log: o.Log, env: []string{"SOURCE_DATE_EPOCH=" + strconv.FormatInt(o.Epoch, 10), "LC_ALL=C", "TZ=UTC"}}
	d := debs{r: r, cache: o.Cache, arch: o.Arch}
	k, err := d.getKernel(ctx)
	if err != nil {
		return Result{}, err
	}
	bb, err := d.get(ctx, "busybox-static")
	if err != nil {
		return Result{}, err
	}
	o.Log.Info("building", "arch", o.Arch, "kernel", k.version, "version", o.Version)

	bin := filepath.Join(o.Out, "binaries") // named as Buildroot's BINARIES_DIR
	rootfs := filepath.Join(o.Out, "rootfs")
	for _, dir := range []string{bin, rootfs, filepath.Join(o.Out, "initrd")} {
		if err := os.RemoveAll(dir); err != nil {
			return Result{}, err
		}
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return Result{}, err
	}
	if err := o.stageRootfs(ctx, r, k, filepath.Join(bb, "bin", "busybox"), rootfs); err != nil {
		return Result{}, err
	}
	res := Result{Rootfs: filepath.Join(bin, "rootfs.squashfs"), Kernel: k.version}
	if err := touchTree(rootfs, o.Epoch); err != nil {
		return Result{}, err
	}
	// mksquashfs takes every timestamp from SOURCE_DATE_EPOCH (runner.env)
	// and refuses -mkfs-time/-all-time beside it. lzo, not xz: GRUB 2.06's
	// squash4 reads zlib, lzo and xz only (no lz4, no zstd), and lzo is the
	// fastest of them to decompress: under emulation GRUB and the kernel
	// paging outpostd in spent about a second less per boot; the slot grows
	// from 20 to 24 MiB (bench/RESULTS.md, Firmware images).
	if _, err := r.run(ctx, "", "mksquashfs", rootfs, res.Rootfs, "-noappend", "-all-root", "-no-xattrs",
		"-comp", "lzo", "-b", "256K", "-quiet", "-no-progress"); err != nil {
		return Result{}, fmt.Errorf("images: %w", err)
	}
	if fi, err := os.Stat(res.Rootfs); err != nil {
		return Result{}, err
	} else if fi.Size() > layout.SlotSize() {
		return Result{}, fmt.Errorf("images: rootfs.squashfs is %d bytes, a slot holds %d", fi.Size(), layout.SlotSize())
	}
	if o.RootfsOnly {
		res.Elapsed = time.Since(start)
		return res, nil
	}
	if res.Image, err = o.assembleDisk(ctx, r, d, bin); err != nil {
		return Result{}, err
	}
	res.Elapsed = time.Since(start)
	o.Log.Info("image built", "image", res.Image, "elapsed", res.Elapsed.Round(time.Millisecond))
	return res, nil
}

// stageRootfs fills the slot's tree: busybox and its applet links, the
// board overlay, the binaries, the kernel and its boot initrd, modules,
// the factory document, the bundle key and the data filesystem template.
func (o *Options) stageRootfs(ctx context.Context, r runner, k kernel, busybox, root string) error {
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "lib/modules", "boot/efi", "dev", "proc", "sys",
		"run", "tmp", "root", "var/lib/outpost", "usr/share/outpost", "etc/outpost"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	os.Chmod(filepath.Join(root, "tmp"), 0o1777)
	os.Chmod(filepath.Join(root, "var/lib/outpost"), 0o700)
	if err := copyTree(filepath.Join(o.Repo, Board, "rootfs-overlay"), root); err != nil {
		return err
	}
	applets, err := busyboxApplets(ctx, r, o.Arch, busybox)
	if err != nil {
		return err
	}
	if err := copyFile(busybox, filepath.Join(root, "bin", "busybox"), 0o755); err != nil {
		return err
	}
	for _, a := range applets {
		dst := filepath.Join(root, a)
		if _, err := os.Lstat(dst); err == nil {
			continue // the overlay provides it (sbin/init)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.Symlink("/bin/busybox", dst); err != nil {
			return err
		}
	}
	for src, dst := range map[string]string{o.Outpostd: "usr/bin/outpostd", o.Outpostctl: "usr/bin/outpostctl", k.image: "boot/vmlinuz"} {
		if err := copyFile(src, filepath.Join(root, dst), 0o755); err != nil {
			return err
		}
	}
	if err := copyFile(o.Factory, filepath.Join(root, "etc/outpost/factory.json"), 0o600); err != nil {
		return err
	}
	if err := copyFile(o.BundlePub, filepath.Join(root, "etc/outpost/bundle.pub"), 0o644); err != nil {
		return err
	}
	// BUILD_EPOCH is also what the box's anti-rollback check compares with a bundle's.
	release := layout.Release{Version: o.Version, Arch: o.Arch, Kernel: k.version, Epoch: o.Epoch}
	if err := os.WriteFile(filepath.Join(root, layout.ReleaseFile), release.Encode(), 0o644); err != nil {
		return err
	}
	if err := setConf(filepath.Join(root, "etc/outpost/init.conf"), "BUILD_EPOCH", strconv.FormatInt(o.Epoch, 10)); err != nil {
		return err
	}

	// Modules: the boot initrd's set, then the rest for /sbin/init.
	boot, err := moduleOrder(ctx, r, k, bootModules[o.Arch], nil)
	if err != nil {
		return err
	}
	skip := map[string]bool{}
	for _, m := range boot {
		skip[m] = true
	}
	system, err := moduleOrder(ctx, r, k, systemModules[o.Arch], skip)
	if err != nil {
		return err
	}
	kmods := filepath.Join(k.root, "lib", "modules", k.version)
	for _, m := range append(append([]string{}, boot...), system...) {
		if err := copyFile(filepath.Join(kmods, m), filepath.Join(root, "lib/modules", k.version, m), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/outpost/modules.load"), []byte(strings.Join(system, "\n")+"\n"), 0o644); err != nil {
		return err
	}

	// The boot initrd: busybox, the boot modules and images/initrd/init.
	ird := filepath.Join(o.Out, "initrd")
	for _, d := range []string{"bin", "dev", "proc", "sys", "newroot", "etc"} {
		if err := os.MkdirAll(filepath.Join(ird, d), 0o755); err != nil {
			return err
		}
	}
	if err := copyFile(busybox, filepath.Join(ird, "bin", "busybox"), 0o755); err != nil {
		return err
	}
	for _, a := range applets {
		if dst := filepath.Join(ird, "bin", filepath.Base(a)); filepath.Base(a) != "busybox" {
			if _, err := os.Lstat(dst); err != nil {
				if err := os.Symlink("busybox", dst); err != nil {
					return err
				}
			}
		}
	}
	if err := copyFile(filepath.Join(o.Repo, "images", "initrd", "init"), filepath.Join(ird, "init"), 0o755); err != nil {
		return err
	}
	for _, m := range boot {
		if err := copyFile(filepath.Join(kmods, m), filepath.Join(ird, "lib/modules", k.version, m), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(ird, "etc", "modules.load"), []byte(strings.Join(boot, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	if err := writeInitramfs(filepath.Join(root, "boot", "initrd.img"), ird, o.Epoch); err != nil {
		return err
	}
	return o.dataTemplate(ctx, r, filepath.Join(o.Out, "binaries", DataImage), filepath.Join(root, "usr/share/outpost/data.ext4.gz"))
}

// DataImage is the empty data filesystem genimage writes into the data
// partition (in BINARIES_DIR, as Buildroot's post-build.sh names it).
const DataImage = "data.ext4"

// busyboxApplets lists the applets of the target busybox with their full
// paths (bin/sh, usr/bin/awk, ...), running it under qemu-user when it is
// not the host's architecture.
func busyboxApplets(ctx context.Context, r runner, arch, busybox string) ([]string, error) {
	name, args := busybox, []string{"--list-full"}
	if arch != hostArch() {
		name, args = "qemu-"+qemuArch(arch)+"-static", []string{busybox, "--list-full"}
	}
	out, err := r.run(ctx, "", name, args...)
	if err != nil {
		return nil, fmt.Errorf("images: busybox applets: %w", err)
	}
	var list []string
	for _, l := range strings.Fields(string(out)) {
		if l != "" && !strings.Contains(l, "..") {
			list = append(list, l)
		}
	}
	if len(list) < 50 {
		return nil, fmt.Errorf("images: busybox lists only %d applets", len(list))
	}
	return list, nil
}

// dataTemplate makes the empty data filesystem: ext4 with a journal, the
// partition's size, fixed UUID and hash seed. The disk image carries it in
// the data partition (img: formatting 128 MiB at the first boot took 4.5 s
// under emulation); the slot keeps it gzip-compressed (gz, mostly zeros:
// ~100 KB) for the init to write over a data partition that holds no ext4.
func (o *Options) dataTemplate(ctx context.Context, r runner, img, gz string) error {
	p, _ := layout.Lookup(layout.Data)
	os.Remove(img)
	if _, err := r.runEnv(ctx, "", []string{"E2FSPROGS_FAKE_TIME=" + strconv.FormatInt(o.Epoch, 10)}, "mkfs.ext4", "-q", "-F",
		"-L", "outpost-data", "-U", p.UUID, "-E", "hash_seed="+p.UUID+",lazy_itable_init=0,lazy_journal_init=0,root_owner=0:0",
		"-m", "1", img, strconv.FormatInt(p.Size/1024, 10)+"k"); err != nil {
		return fmt.Errorf("images: data template: %w", err)
	}
	// mkfs allocated the journal and inode tables (zeros): a sparse copy
	// keeps the disk image small (genimage copies holes as holes;
	// fallocate --dig-holes leaves mkfs's unwritten extents alone).
	if _, err := r.run(ctx, "", "cp", "--sparse=always", img, img+".sparse"); err != nil {
		return fmt.Errorf("images: data template: %w", err)
	}
	if err := os.Rename(img+".sparse", img); err != nil {
		return err
	}
	in, err := os.Open(img)
	if err != nil {
		return err
	}
	defer in.Close()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := io.Copy(zw, in); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(gz, buf.Bytes(), 0o644)
}

// assembleDisk builds the ESP inputs and runs genimage with the board's
// config, exactly as Buildroot's post-image.sh does.
func (o *Options) assembleDisk(ctx context.Context, r runner, d debs, bin string) (string, error) {
	gt := grubTarget[o.Arch]
	grub, err := d.get(ctx, "grub-efi-"+o.Arch+"-bin")
	if err != nil {
		return "", err
	}
	efiDir := filepath.Join(bin, "efi-part", "EFI", "BOOT")
	if err := os.MkdirAll(efiDir, 0o755); err != nil {
		return "", err
	}
	args := []string{"-d", filepath.Join(grub, "usr/lib/grub", gt.format), "-O", gt.format, "-o", filepath.Join(efiDir, gt.efi),
		"-p", "/EFI/BOOT"}
	if _, err := r.run(ctx, "", "grub-mkimage", append(args, grubModules...)...); err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	if err := copyFile(filepath.Join(o.Repo, Board, "grub.cfg"), filepath.Join(efiDir, "grub.cfg"), 0o644); err != nil {
		return "", err
	}
	env, err := layout.FactoryEnv().Encode()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(bin, layout.EnvFile), env, 0o644); err != nil {
		return "", err
	}
	if err := touchTree(filepath.Join(bin, "efi-part"), o.Epoch); err != nil {
		return "", err
	}
	if err := touchTree(filepath.Join(bin, layout.EnvFile), o.Epoch); err != nil {
		return "", err
	}
	tmp := filepath.Join(o.Out, "genimage.tmp")
	empty := filepath.Join(o.Out, "genimage.root")
	os.RemoveAll(tmp)
	os.RemoveAll(empty)
	if err := os.MkdirAll(empty, 0o755); err != nil {
		return "", err
	}
	img := filepath.Join(o.Out, "outpost.img")
	os.Remove(img)
	if _, err := r.run(ctx, "", "genimage", "--config", filepath.Join(o.Repo, Board, "genimage.cfg"),
		"--inputpath", bin, "--outputpath", o.Out, "--rootpath", empty, "--tmppath", tmp); err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	os.RemoveAll(tmp)
	os.RemoveAll(empty)
	esp := filepath.Join(bin, "esp.vfat")
	os.Rename(filepath.Join(o.Out, "esp.vfat"), esp)
	// The ESP's directories carry mtools' clock: stamp them with the epoch,
	// in the ESP image and in the disk.
	if err := normalizeFAT(esp, 0, time.Unix(o.Epoch, 0)); err != nil {
		return "", err
	}
	p, _ := layout.Lookup(layout.ESP)
	_, parts, err := readGPT(img)
	if err != nil {
		return "", err
	}
	if len(parts) != len(layout.Partitions) || parts[0].Name != p.Name {
		return "", fmt.Errorf("images: genimage made %d partitions, layout has %d", len(parts), len(layout.Partitions))
	}
	if err := normalizeFAT(img, parts[0].Offset(), time.Unix(o.Epoch, 0)); err != nil {
		return "", err
	}
	return img, nil
}

// copyTree copies src into dst: files with their modes, symlinks as
// symlinks, directories merged.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			os.Remove(to)
			return os.Symlink(t, to)
		case d.IsDir():
			return os.MkdirAll(to, info.Mode().Perm())
		default:
			return copyFile(p, to, info.Mode().Perm())
		}
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	os.Remove(dst)
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, mode) // not subject to the umask
}

// touchTree sets every mtime under root (not following symlinks) to epoch.
func touchTree(root string, epoch int64) error {
	t := time.Unix(epoch, 0)
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return lchtimes(p, t)
		}
		return os.Chtimes(p, t, t)
	})
}

// setConf replaces the line KEY=... of a sourced shell file.
func setConf(path, key, value string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	found := false
	for i, l := range lines {
		if strings.HasPrefix(l, key+"=") {
			lines[i], found = key+"="+value, true
		}
	}
	if !found {
		return fmt.Errorf("images: %s has no %s= line", path, key)
	}
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644)
}
