package images

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// Kernel modules by Debian architecture. Debian builds these drivers as
// modules; a qemu virt machine needs the virtio ones, real boxes one of the
// others. A module missing from the kernel package fails the build.
var (
	// bootModules are loaded by the boot initrd: the disk and the root
	// filesystem.
	bootModules = map[string][]string{
		"amd64": {"virtio_pci", "virtio_blk", "nvme", "ahci", "sd_mod", "squashfs"},
		"arm64": {"virtio_pci", "virtio_mmio", "virtio_blk", "nvme", "ahci", "sd_mod", "squashfs"},
	}
	// systemModules are loaded by /sbin/init: the data and ESP filesystems
	// and the NICs (virtio, Intel e1000/e1000e/igb, Realtek r8169; the
	// Raspberry Pi 4's GENET with its MDIO and PHY drivers on arm64).
	systemModules = map[string][]string{
		"amd64": {"crc32c_generic", "ext4", "vfat", "nls_cp437", "nls_ascii", "virtio_net", "e1000", "e1000e", "igb", "r8169"},
		"arm64": {"crc32c_generic", "ext4", "vfat", "nls_cp437", "nls_ascii", "virtio_net", "e1000", "e1000e", "igb", "r8169", "genet", "mdio_bcm_unimac", "broadcom"},
	}
)

// moduleOrder resolves mods with their dependencies, in load order, as
// paths relative to lib/modules/KVER; skip lists paths already loaded.
func moduleOrder(ctx context.Context, r runner, k kernel, mods []string, skip map[string]bool) ([]string, error) {
	base := filepath.Join(k.root, "lib", "modules", k.version) + "/"
	seen := map[string]bool{}
	for p := range skip {
		seen[p] = true
	}
	var order []string
	for _, m := range mods {
		out, err := r.run(ctx, "", "modprobe", "-d", k.root, "-S", k.version, "--show-depends", m)
		if err != nil {
			return nil, fmt.Errorf("images: kernel %s: module %s: %w", k.version, m, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 2 || f[0] != "insmod" {
				continue // "builtin NAME"
			}
			rel, ok := strings.CutPrefix(f[1], base)
			if !ok {
				return nil, fmt.Errorf("images: modprobe named %s outside %s", f[1], base)
			}
			if !seen[rel] {
				seen[rel] = true
				order = append(order, rel)
			}
		}
	}
	return order, nil
}
