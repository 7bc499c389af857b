#!/usr/bin/env bash
# Installs what the tests need when it is missing: SIPp (Debian package sip-tester),
# iproute2 and Chromium (the status page's headless browser test). Needs root and
# apt-get; without them it says what is missing and the tests that need it skip with
# that reason.
set -euo pipefail
need=()
command -v sipp >/dev/null 2>&1 || need+=(sip-tester)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "test-deps: missing ${need[*]} and cannot install (need root and apt-get); dependent tests will skip" >&2
  exit 0
fi
echo "test-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1 || {
  apt-get update >/dev/null && apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
}
