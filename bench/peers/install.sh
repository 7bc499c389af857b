#!/usr/bin/env bash
# Installs the benchmark peers when missing (Debian packages): SIPp (sip-tester), Kamailio with its
# SQLite modules, rtpengine (userspace daemon) and sqlite3. Usage: bench/peers/install.sh [PACKAGE...]
# (default: all of them; the bench scripts pass the ones they drive). Needs root and apt-get; without
# them it says what is missing and fails, since a benchmark cannot run without its peers.
# Same style as scripts/test-deps.sh: apt-get install, apt-get update first only when that fails.
set -euo pipefail
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(sip-tester kamailio kamailio-sqlite-modules rtpengine-daemon sqlite3)
need=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "peers: missing ${need[*]} and cannot install them (need root and apt-get)" >&2
  exit 1
fi
echo "peers: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt=(apt-get -o DPkg::Lock::Timeout=900 -q)
"${apt[@]}" install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1 || {
  "${apt[@]}" update >/dev/null && "${apt[@]}" install -y --no-install-recommends "${need[@]}" >/dev/null
}
