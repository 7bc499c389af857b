// Package layout is the one description of an Outpost disk and of its A/B
// update state, shared by the host tools that build images and bundles
// (package images, the Buildroot board's genimage config, checked by a
// test) and by the box that installs updates (appliance/firmware).
//
// The disk is GPT with four partitions, always in this order so that GRUB
// can address them by number (GRUB 2.06 `search` has no --part-label):
//
//	1 esp    FAT, the standalone GRUB EFI binary and the GRUB environment block
//	2 rootA  read-only squashfs: /boot/vmlinuz, /boot/initrd.img, userland
//	3 rootB  the other slot, same form
//	4 data   ext4, created on first boot: outpost.db, certificates, spools
//
// A slot carries kernel, modules and userland together, so an update swaps
// them as one. The slot to boot lives in the GRUB environment block on the
// ESP (Env): "slot" is the committed slot; an update writes the other slot
// and sets "next" and "upgrade=1"; GRUB's embedded config (grub.cfg beside
// the Buildroot board) consumes "upgrade" before booting "next" once with
// outpost.trial=1; outpostd commits "next" as "slot" once it is healthy. A
// trial that never becomes healthy, for whatever reason (kernel panic,
// daemon exits, hang until the init's watchdog reboots), boots the
// committed slot again on the next boot: nothing has to run for a rollback.
//
// Update bundles (Bundle) carry one slot image and a manifest signed with
// ed25519; the box checks the signature before it reads the payload.
// A slot image records its build in ReleaseFile (Release); a bundle built
// before the installed release is a downgrade (Manifest.CheckDowngrade).
//
// The package is pure: it imports nothing of ours and does no I/O beyond
// the readers and writers it is given.
package layout
