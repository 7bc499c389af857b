#!/bin/sh
# Buildroot post-image script (BR2_ROOTFS_POST_IMAGE_SCRIPT): assembles the
# disk exactly as the offline builder does (images.Options.assembleDisk):
# grub.cfg beside the GRUB EFI binary, the factory GRUB environment block,
# then genimage with the board's config. With a bundle signing key set,
# also signs the slot image as an update bundle.
# $1 = BINARIES_DIR; $2 (BR2_ROOTFS_POST_SCRIPT_ARGS) = genimage config,
# default genimage.cfg (genimage-rpi4.cfg for the Raspberry Pi 4).
set -eu
BINARIES_DIR=$1
BOARD=$(dirname "$0")
CFG=${2:-$BOARD/genimage.cfg}
case "$CFG" in /*) ;; *) CFG=$BOARD/$CFG ;; esac
config() { sed -n "s/^$1=\"\\(.*\\)\"\$/\\1/p" "$BR2_CONFIG"; }

mkdir -p "$BINARIES_DIR/efi-part/EFI/BOOT"
install -m 0644 "$BOARD/grub.cfg" "$BINARIES_DIR/efi-part/EFI/BOOT/grub.cfg"
"$HOST_DIR/bin/outpost-image" grubenv -out-file "$BINARIES_DIR/grubenv"

slot=$(sed -n '/partition rootA {/,/}/s/.*size = \([0-9]*\)M$/\1/p' "$CFG")
size=$(stat -c %s "$BINARIES_DIR/rootfs.squashfs")
if [ "$size" -gt $((slot * 1024 * 1024)) ]; then
	echo "post-image: rootfs.squashfs is $size bytes, a slot holds ${slot} MiB" >&2
	exit 1
fi

support/scripts/genimage.sh -c "$CFG"

key=$(config BR2_PACKAGE_OUTPOST_BUNDLE_KEY)
if [ -n "$key" ]; then
	# shellcheck source=/dev/null  # written by the outpost package (VERSION, ARCH)
	. "$TARGET_DIR/etc/outpost/release"
	"$HOST_DIR/bin/outpost-image" sign -rootfs "$BINARIES_DIR/rootfs.squashfs" -key "$key" \
		-arch "$ARCH" -version "$VERSION" -epoch "${SOURCE_DATE_EPOCH:-$BUILD_EPOCH}" \
		-out-file "$BINARIES_DIR/outpost-$VERSION-$ARCH.bundle"
fi
