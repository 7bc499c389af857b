#!/bin/sh
# Buildroot post-build script (BR2_ROOTFS_POST_BUILD_SCRIPT): completes the
# slot's tree as the offline builder (images.Options.stageRootfs) does:
# mount points, the kernel at /boot/vmlinuz (where grub.cfg loads it), the
# build epoch for the init's clock floor, and the empty data filesystem:
# $BINARIES_DIR/data.ext4 for genimage's data partition, and its gzip copy
# in the slot that the init writes over a data partition holding no ext4.
# $1 = TARGET_DIR; HOST_DIR, BUILD_DIR and BINARIES_DIR come from Buildroot.
set -eu
TARGET_DIR=$1
BOARD=$(dirname "$0")
# The build epoch: Buildroot's SOURCE_DATE_EPOCH (set with BR2_REPRODUCIBLE),
# checked; without one, now, and the log says so.
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
	case $SOURCE_DATE_EPOCH in
	*[!0-9]*)
		echo "post-build: SOURCE_DATE_EPOCH='$SOURCE_DATE_EPOCH' is not a number of seconds" >&2
		exit 1
		;;
	esac
	EPOCH=$SOURCE_DATE_EPOCH
else
	EPOCH=$(date +%s)
	echo "post-build: SOURCE_DATE_EPOCH is not set (BR2_REPRODUCIBLE off): build epoch = now ($EPOCH)" >&2
fi

mkdir -p "$TARGET_DIR/boot/efi" "$TARGET_DIR/var/lib/outpost" "$TARGET_DIR/run" "$TARGET_DIR/tmp" \
	"$TARGET_DIR/usr/share/outpost"
chmod 700 "$TARGET_DIR/var/lib/outpost"

for k in bzImage Image; do
	if [ -f "$TARGET_DIR/boot/$k" ]; then mv "$TARGET_DIR/boot/$k" "$TARGET_DIR/boot/vmlinuz"; fi
done
if [ ! -f "$TARGET_DIR/boot/vmlinuz" ]; then
	echo "post-build: no kernel in $TARGET_DIR/boot (set BR2_LINUX_KERNEL_INSTALL_TARGET=y)" >&2
	exit 1
fi

sed -i "s/^BUILD_EPOCH=.*/BUILD_EPOCH=$EPOCH/" "$TARGET_DIR/etc/outpost/init.conf"
grep -q '^BUILD_EPOCH=' "$TARGET_DIR/etc/outpost/release" 2>/dev/null ||
	echo "BUILD_EPOCH=$EPOCH" >>"$TARGET_DIR/etc/outpost/release"

# The data partition's size and GUID are genimage.cfg's (= images/layout).
part() { sed -n "/partition data {/,/}/s/.*$1 = \"\\{0,1\\}\\([^\"]*\\)\"\\{0,1\\}$/\\1/p" "$BOARD/genimage.cfg"; }
SIZE=$(part size)
UUID=$(part partition-uuid)
mkdir -p "$BINARIES_DIR"
rm -f "$BINARIES_DIR/data.ext4"
E2FSPROGS_FAKE_TIME=$EPOCH "$HOST_DIR/sbin/mkfs.ext4" -q -F -L outpost-data -U "$UUID" \
	-E "hash_seed=$UUID,lazy_itable_init=0,lazy_journal_init=0,root_owner=0:0" -m 1 \
	"$BINARIES_DIR/data.ext4" "$SIZE"
gzip -n -9 -c "$BINARIES_DIR/data.ext4" >"$TARGET_DIR/usr/share/outpost/data.ext4.gz"
