// Package images builds Outpost firmware without Buildroot and without the
// internet beyond Debian's archive: the "offline path" of docs/design.md §2,
// which runs here and in CI and is what the boot tests boot.
//
// Build assembles a flashable GPT disk image from Debian's kernel (package
// downloaded with apt-get download and unpacked with dpkg -x, never
// installed on the host; its ABI is resolved at build time because old ABIs
// leave the archive), busybox-static, Debian's GRUB EFI modules and the
// project's static binaries. It uses the Buildroot board's files as they
// are (buildroot/board/outpost: rootfs overlay with /sbin/init, grub.cfg,
// genimage.cfg), names its intermediate files as Buildroot names its
// outputs (efi-part/, grubenv, rootfs.squashfs) so that one genimage config
// serves both paths, and takes every number from images/layout.
//
// Differences from the Buildroot path, all forced by Debian's kernel: its
// block, squashfs and NIC drivers are modules, so each slot carries a small
// boot initrd (images/initrd/init) that loads them and switch_roots into the
// squashfs, and /sbin/init loads the rest from /etc/outpost/modules.load.
//
// Boot time under emulation (bench/RESULTS.md) decided three things: the
// slot is lzo (GRUB 2.06 reads zlib, lzo and xz only; xz cost seconds in
// GRUB on arm64 and in paging outpostd in), the disk image carries the data
// partition already formatted (the slot's gzip template stays, for a
// partition that holds no ext4), and the initrd starts seeding the kernel's
// RNG (outpostd's first random read, a package init in pion/rtp, blocks
// until it is seeded). Not done: Debian's amd64 kernel is xz-compressed and
// its decompression (~4-6 s under TCG) cannot change without building our
// own kernel (the Buildroot path can pick lz4 or gzip).
//
// Reproducible: fixed GUIDs (layout), SOURCE_DATE_EPOCH for every timestamp
// (squashfs, cpio, FAT, ext4 data filesystem, manifest), sorted directory walks,
// gzip without names or times. The factory document embeds a certificate
// and the bundle key, which are inputs: the same inputs give the same image.
//
// MakeBundle signs a slot image for the A/B update (layout.Bundle). BootTest
// boots an image in qemu (OVMF or AAVMF, user networking with forwards on
// 127.0.0.1 only, meant to run inside `unshare -n`) and walks a box through
// its life: first boot, config push over mutual TLS, a registration, a
// power cut, refused bundles, a good update, a bad one that rolls back and
// a wiped data partition; its report splits every boot into phases.
//
// This package drives host tools (apt-get, dpkg, depmod, modprobe,
// mksquashfs, mkfs.ext4, grub-mkimage, genimage, qemu) and imports nothing
// of ours but images/layout; it talks to the booted box with the outpostctl
// binary, like HQ's tooling would.
package images
