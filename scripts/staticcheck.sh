#!/usr/bin/env bash
# Runs staticcheck (path in $1, then its arguments) and fails on any finding that is not listed
# in staticcheck.known. That file holds the findings in packages this change could not edit
# (other work in progress there), as "path: message (CHECK)" without line and column so that
# edits elsewhere in a file do not break the match; remove a line once its finding is fixed.
# staticcheck.conf (repo root) chooses the checks.
set -uo pipefail
sc=$1; shift
known=staticcheck.known
out=$("$sc" "$@" 2>&1); rc=$?
[ -n "$out" ] || exit $rc
norm() { sed -E 's/^([^:]+):[0-9]+:[0-9]+: /\1: /'; }
keys=$(grep -v '^#' "$known" 2>/dev/null | grep -v '^$' || true)
new=$(printf '%s\n' "$out" | while IFS= read -r line; do
  k=$(printf '%s\n' "$line" | norm)
  printf '%s\n' "$keys" | grep -qxF -- "$k" || printf '%s\n' "$line"
done)
nknown=$(( $(printf '%s\n' "$out" | wc -l) - $(printf '%s' "$new" | grep -c '^' || true) ))
[ "$nknown" -gt 0 ] && echo "staticcheck: $nknown known finding(s) in $known (packages owned by other work; not failing)"
gone=$(printf '%s\n' "$keys" | while IFS= read -r k; do
  [ -n "$k" ] && ! printf '%s\n' "$out" | norm | grep -qxF -- "$k" && printf '%s\n' "$k"; done)
[ -z "$gone" ] || { echo "staticcheck: fixed, remove from $known:"; printf '  %s\n' "$gone"; }
if [ -n "$new" ]; then
  printf '%s\n' "$new"
  exit 1
fi
exit 0
