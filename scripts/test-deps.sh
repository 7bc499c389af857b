#!/usr/bin/env bash
# Installs what the tests need when it is missing: SIPp (Debian package sip-tester),
# iproute2, Kamailio with its TLS module (HQ over TLS), linphonec (linphone-cli: a real
# softphone over TLS with SRTP), baresip (baresip-core: a second softphone), Chromium
# (the status page's headless browser test),
# promtool (prometheus: deploy/ rules) and ansible-playbook (ansible-core: deploy/ansible). Needs root and
# apt-get; without them it says what is missing and the tests that need it skip with
# that reason, except in CI (CI=true, set by .ci/run), where they fail. The tests know
# this list from internal/testenv (testDeps): keep the two in step (its test checks).
set -euo pipefail
need=()
command -v sipp >/dev/null 2>&1 || need+=(sip-tester)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v ansible-playbook >/dev/null 2>&1 || need+=(ansible-core)
command -v kamailio >/dev/null 2>&1 || need+=(kamailio)
# The TLS module is a separate package (HQ over TLS: cmd/outpostd/hqtls_e2e_test.go).
[ -e /usr/lib/x86_64-linux-gnu/kamailio/modules/tls.so ] || ls /usr/lib/*/kamailio/modules/tls.so >/dev/null 2>&1 || need+=(kamailio-tls-modules)
command -v linphonecsh >/dev/null 2>&1 || need+=(linphone-cli)
command -v baresip >/dev/null 2>&1 || need+=(baresip-core)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "test-deps: missing ${need[*]} and cannot install (need root and apt-get); dependent tests will skip" >&2
  exit 0
fi
echo "test-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1; then
  apt-get update >/dev/null
  if ! apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1; then
    # One at a time: a package this release lacks only skips the tests that need it
    # (in CI they fail).
    for p in "${need[@]}"; do
      apt-get install -y --no-install-recommends "$p" >/dev/null 2>&1 ||
        echo "test-deps: cannot install $p; the tests that need it will skip" >&2
    done
  fi
fi
# The prometheus package is here for promtool only: do not leave its server running
# (and listening on :9090) on a systemd host where it was just installed.
if [[ " ${need[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
