package images

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// debs downloads Debian packages of one architecture into a cache with
// apt-get download and unpacks them with dpkg -x; nothing is installed on
// the host. A package already in the cache is not downloaded again, so a
// rebuild works offline; the kernel's name carries its ABI, so a new ABI
// is a new name and is fetched.
type debs struct {
	r     runner
	cache string // downloaded .deb files; unpacked trees under unpacked/
	arch  string // Debian architecture: amd64, arm64
}

// kernelPackage resolves the kernel package of the running archive, e.g.
// linux-image-6.1.0-57-arm64, from the linux-image-ARCH metapackage. When
// apt knows nothing (no network, no apt-get update), the newest kernel in
// the cache is used.
func (d debs) kernelPackage(ctx context.Context) (string, error) {
	out, err := d.r.run(ctx, "", "apt-cache", "depends", "linux-image-"+d.arch+":"+d.arch)
	if err == nil {
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") {
				name, _, _ := strings.Cut(f[1], ":")
				return name, nil
			}
		}
	}
	cached, _ := filepath.Glob(filepath.Join(d.cache, "linux-image-*-"+d.arch+"_*_"+d.arch+".deb"))
	if len(cached) == 0 {
		return "", fmt.Errorf("images: no kernel package: apt-cache depends linux-image-%s:%s found none (run apt-get update; for arm64 first dpkg --add-architecture arm64) and the cache %s has none", d.arch, d.arch, d.cache)
	}
	sort.Strings(cached)
	name, _, _ := strings.Cut(filepath.Base(cached[len(cached)-1]), "_")
	return name, nil
}

// fetch returns the cached .deb of pkg, downloading it first if needed.
func (d debs) fetch(ctx context.Context, pkg string) (string, error) {
	glob := func() []string {
		var all []string
		for _, a := range []string{d.arch, "all"} {
			m, _ := filepath.Glob(filepath.Join(d.cache, pkg+"_*_"+a+".deb"))
			all = append(all, m...)
		}
		sort.Strings(all)
		return all
	}
	if m := glob(); len(m) > 0 {
		return m[len(m)-1], nil
	}
	if err := os.MkdirAll(d.cache, 0o755); err != nil {
		return "", err
	}
	d.r.log.Info("downloading", "package", pkg+":"+d.arch)
	if _, err := d.r.run(ctx, d.cache, "apt-get", "download", "-q", pkg+":"+d.arch); err != nil {
		// Stale package lists name versions the archive no longer has:
		// refresh them once (root only) and try again.
		if os.Geteuid() != 0 {
			return "", fmt.Errorf("images: %w", err)
		}
		d.r.log.Info("apt-get download failed; refreshing the package lists once", "package", pkg)
		if _, uerr := d.r.run(ctx, "", "apt-get", "-o", "DPkg::Lock::Timeout=900", "-q", "update"); uerr != nil {
			return "", fmt.Errorf("images: %w (then apt-get update: %v)", err, uerr)
		}
		if _, err := d.r.run(ctx, d.cache, "apt-get", "download", "-q", pkg+":"+d.arch); err != nil {
			return "", fmt.Errorf("images: %w", err)
		}
	}
	m := glob()
	if len(m) == 0 {
		return "", fmt.Errorf("images: apt-get download %s:%s left no .deb in %s", pkg, d.arch, d.cache)
	}
	return m[len(m)-1], nil
}

// unpack extracts deb once into the cache and returns the tree.
func (d debs) unpack(ctx context.Context, deb string) (string, error) {
	dir := filepath.Join(d.cache, "unpacked", strings.TrimSuffix(filepath.Base(deb), ".deb"))
	if _, err := os.Stat(filepath.Join(dir, ".unpacked")); err == nil {
		return dir, nil
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	if _, err := d.r.run(ctx, "", "dpkg", "-x", deb, dir); err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	return dir, os.WriteFile(filepath.Join(dir, ".unpacked"), nil, 0o644)
}

// get fetches and unpacks pkg.
func (d debs) get(ctx context.Context, pkg string) (string, error) {
	deb, err := d.fetch(ctx, pkg)
	if err != nil {
		return "", err
	}
	return d.unpack(ctx, deb)
}

// kernel is an unpacked Debian kernel.
type kernel struct {
	root    string // the unpacked package (boot/, lib/modules/)
	version string // KVER, e.g. 6.1.0-57-amd64
	image   string // boot/vmlinuz-KVER
}

var kverRE = regexp.MustCompile(`^\d+\.\d+\.\d+`)

// getKernel fetches the current kernel and runs depmod on it (the .deb
// ships no modules.dep).
func (d debs) getKernel(ctx context.Context) (kernel, error) {
	pkg, err := d.kernelPackage(ctx)
	if err != nil {
		return kernel{}, err
	}
	root, err := d.get(ctx, pkg)
	if err != nil {
		// fetch refreshed stale lists; the ABI may have moved on.
		if again, kerr := d.kernelPackage(ctx); kerr == nil && again != pkg {
			pkg = again
			root, err = d.get(ctx, pkg)
		}
	}
	if err != nil {
		return kernel{}, err
	}
	ents, err := os.ReadDir(filepath.Join(root, "lib", "modules"))
	if err != nil {
		return kernel{}, fmt.Errorf("images: kernel package %s: %w", pkg, err)
	}
	var k kernel
	for _, e := range ents {
		if e.IsDir() && kverRE.MatchString(e.Name()) {
			k = kernel{root: root, version: e.Name(), image: filepath.Join(root, "boot", "vmlinuz-"+e.Name())}
		}
	}
	if k.version == "" {
		return kernel{}, fmt.Errorf("images: kernel package %s has no lib/modules/VERSION", pkg)
	}
	if _, err := os.Stat(filepath.Join(root, "lib", "modules", k.version, "modules.dep")); err != nil {
		if _, err := d.r.run(ctx, "", "depmod", "-b", root, k.version); err != nil {
			return kernel{}, fmt.Errorf("images: %w", err)
		}
	}
	return k, nil
}
