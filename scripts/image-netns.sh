#!/bin/sh
# Runs a command in a private network namespace with only its loopback up:
# qemu's user networking and the boot test's probes then share a loopback
# that nothing else sees, and the guest can reach nothing beyond it.
# Root uses a plain network namespace; others try a user namespace.
set -e
if [ "$(id -u)" = 0 ]; then
  exec unshare -n sh -c 'ip link set lo up && exec "$@"' sh "$@"
fi
exec unshare -rn sh -c 'ip link set lo up && exec "$@"' sh "$@"
