#!/usr/bin/env bash
# Runs every Fuzz target of the module for the given time each (default 20s).
set -euo pipefail
t=${1:-20s}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  mapfile -t fuzzers < <(grep -ho '^func \(Fuzz[A-Za-z0-9_]*\)' "$dir"/*_test.go 2>/dev/null | awk '{print $2}')
  for f in "${fuzzers[@]}"; do
    echo "== $pkg $f"
    go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$pkg"
  done
done
