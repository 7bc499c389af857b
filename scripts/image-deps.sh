#!/usr/bin/env bash
# Installs what image builds and boot tests need (Debian packages; IMAGES.md)
# when missing, and enables the arm64 architecture for apt-get download.
# Without root or apt-get it says what is missing; the image targets then fail
# and the image tests skip with that reason. internal/testenv (imageDeps) names
# the package of each tool a test looks for: keep it in step (its test checks).
set -euo pipefail
pkgs=(qemu-system-x86 qemu-system-arm qemu-user-static busybox-static squashfs-tools genimage mtools
      dosfstools grub-efi-amd64-bin ovmf qemu-efi-aarch64 cpio e2fsprogs fdisk kmod iproute2)
need=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
arm64=yes
dpkg --print-foreign-architectures 2>/dev/null | grep -qx arm64 || arm64=no
[ ${#need[@]} -eq 0 ] && [ $arm64 = yes ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "image-deps: missing packages: ${need[*]:-none}; arm64 apt architecture enabled: $arm64; cannot install (need root and apt-get)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt=(apt-get -o DPkg::Lock::Timeout=900 -q)
if [ $arm64 = no ]; then
  echo "image-deps: adding the arm64 architecture (for apt-get download of the arm64 kernel, busybox and GRUB)"
  dpkg --add-architecture arm64
fi
echo "image-deps: apt-get update"
"${apt[@]}" update >/dev/null
if [ ${#need[@]} -gt 0 ]; then
  echo "image-deps: installing ${need[*]}"
  "${apt[@]}" install -y --no-install-recommends "${need[@]}" >/dev/null
fi
