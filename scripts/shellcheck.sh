#!/usr/bin/env bash
# Runs shellcheck over the given scripts (make check passes the repository's shell scripts),
# installing it first when missing (Debian package shellcheck; needs root and apt-get, like
# scripts/test-deps.sh). Without shellcheck and without a way to install it, it fails: a check
# that cannot run must not pass. Run from the repository root: the scripts' "shellcheck source="
# directives name files relative to it.
set -euo pipefail
if ! command -v shellcheck >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "shellcheck: not installed and cannot install it (need root and apt-get): apt-get install shellcheck" >&2
    exit 1
  fi
  echo "shellcheck: installing the Debian package shellcheck" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends shellcheck >/dev/null 2>&1 || {
    apt-get update >/dev/null && apt-get install -y --no-install-recommends shellcheck >/dev/null
  }
fi
exec shellcheck -x "$@"
