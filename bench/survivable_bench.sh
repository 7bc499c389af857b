#!/bin/bash
# Survivable-mode figures (issue 5 and the HQ survivability issue): runs the
# namespace end-to-end tests TestSurvivableInNamespaces, TestSurvivableBootOutage
# and TestHQCallFallback RUNS times and reports the median, min and max of
# every FIGURE they log: carrier-loss and silent-loss detection, the first
# fallback call (split into the test's own overhead and the call set-up
# through the box), failback after the hold, the peak upstream replay rate
# at HQ after failback, boot during an outage (SIP ready → first HQ-extension
# call answered at the PSTN gateway, silent WAN and no carrier; _mode: SIP
# ready → survivable) and the per-call fallback (HQ's last 503 → the answer
# at the PSTN gateway).
#
# Usage: bench/survivable_bench.sh [RUNS=5]
# Needs root (network namespaces), SIPp, iproute2. Each run is bounded by the
# tests' own timeouts (about 60 s); RESULTS=- prints without writing
# bench/RESULTS.md (the section between the survivable_bench markers).
set -eu
case "${1:-}" in -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;; esac
RUNS=${1:-5}
REPO=$(cd "$(dirname "$0")/.." && pwd)
RESULTS=${RESULTS:-$REPO/bench/RESULTS.md}
[ "$(id -u)" = 0 ] || { echo "survivable_bench: needs root (network namespaces)" >&2; exit 2; }
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
cd "$REPO"
for i in $(seq 1 "$RUNS"); do
  echo "run $i/$RUNS" >&2
  timeout 300 go test -count=1 -v -run '^(TestSurvivableInNamespaces|TestSurvivableBootOutage|TestHQCallFallback)$' ./cmd/outpostd > "$OUT/run$i.txt" 2>&1 || {
    echo "survivable_bench: run $i failed:" >&2; tail -30 "$OUT/run$i.txt" >&2; exit 1; }
done
python3 - "$OUT" "$RUNS" "$RESULTS" <<'PY'
import glob, os, re, statistics, subprocess, sys, time
out, runs, results = sys.argv[1], int(sys.argv[2]), sys.argv[3]
vals = {}
for f in sorted(glob.glob(os.path.join(out, "run*.txt"))):
    for m in re.finditer(r"FIGURE (\w+?)(?:_ms|_per_s)=(-?\d+)", open(f).read()):
        vals.setdefault(m.group(1), []).append(int(m.group(2)))
unit = {"upstream_replay_peak": "REGISTERs/s"}
target = {
    "carrier_loss_detect": "≤ 1000 ms",
    "silent_loss_detect": "≤ 3 × 300 + 1000 = 1900 ms",
    "carrier_loss_first_fallback_call": "≤ 1000 ms",
    "silent_loss_first_fallback_call": "≤ 1000 ms",
    "carrier_failback": "hold 2 s + up_after probes",
    "silent_failback": "hold 2 s + up_after probes",
    "upstream_replay_peak": "paced at 50/s",
    "boot_outage_silent_first_call": "≤ 6000 ms",
    "boot_outage_silent_first_call_mode": "≈ down_after × 300 ms",
    "boot_outage_no_carrier_first_call": "≤ 3000 ms",
    "boot_outage_no_carrier_first_call_mode": "≤ 0 (before SIP is ready)",
    "hq_call_fallback": "≤ 1000 ms",
}
cpu = open("/proc/cpuinfo").read()
model = re.search(r"model name\s*:\s*(.*)", cpu).group(1)
lines = [
    "<!-- survivable_bench:begin (written by bench/survivable_bench.sh) -->",
    f"Command: `bench/survivable_bench.sh {runs}` (root; runs `go test -run 'TestSurvivableInNamespaces|TestSurvivableBootOutage|TestHQCallFallback' ./cmd/outpostd` {runs} times). "
    f"Machine: {os.cpu_count()} × {model}, {os.uname().release}, {time.strftime('%Y-%m-%d %H:%M %Z')}. "
    "Topology of docs/design.md §5 in namespaces; hq.options_interval_ms 300, down_after 2, up_after 2, hold_s 2; 1000 phones refreshing throughout.",
    "",
    "| figure | median | min | max | runs | target |",
    "|---|---|---|---|---|---|",
]
for k in sorted(vals):
    v = vals[k]
    u = unit.get(k, "ms")
    lines.append(f"| {k} | {statistics.median(v):.0f} {u} | {min(v)} | {max(v)} | {len(v)} | {target.get(k, '')} |")
lines.append("<!-- survivable_bench:end -->")
block = "\n".join(lines)
print(block)
if results != "-":
    s = open(results).read()
    b, e = "<!-- survivable_bench:begin", "<!-- survivable_bench:end -->"
    if b in s:
        s = s[:s.index(b)] + block + s[s.index(e) + len(e):]
    else:
        s = s.rstrip() + "\n\n## Survivable mode: detection, fallback and failback (issue 5)\n" + block + "\n"
    open(results, "w").write(s)
PY
