#!/bin/bash
# SIP fuzzing against the running daemon (security issue, item 10): outpostd on its embedded default
# document, attacked by bench/sipfuzz with mutated real messages over UDP and TCP while a monitor
# registers user 1001 (digest) every second; the figures go into bench/RESULTS.md.
#
# Usage: bench/fuzz_bench.sh            (no arguments; tune with the environment below)
# Environment (defaults in brackets):
#   N [1000000]        messages to send
#   DURATION [8m]      sipfuzz stops sending after this long even if N is not reached
#   RATE [5000]        messages per second (0 = as fast as sipfuzz goes: most of a flood then dies in the
#                      kernel's receive buffer instead of reaching the parser)
#   SETTLE [30]        seconds to wait after the run before reading RSS again
#   MAX_S [900]        hard limit for the whole run (then everything is stopped and removed)
#   RESULTS [bench/RESULTS.md]  file whose "## SIP fuzzing against the running daemon" section is
#                      replaced by this run's ("-" = only print it)
#   KEEP [0]           1: keep the scratch dir (daemon log, sipfuzz report) instead of removing it
#
# Isolation: outpostd and sipfuzz run in a network namespace of their own holding only lo. The
# embedded default listens on 127.0.0.1:5060 there, so it never meets `make run` (127.0.0.1:5060 of
# the host), and nothing the daemon does for a mutated message (answering to a Via, resolving a Via
# host name) can leave the machine: the namespace has no route and no DNS.
# Crash = the outpostd process is gone (checked with kill -0 and /proc after the run).
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;; esac
[ $# -eq 0 ] || { echo "fuzz_bench: takes no arguments (see --help)" >&2; exit 2; }
MAX_S=${MAX_S:-900}
case "$MAX_S" in ''|*[!0-9]*) echo "fuzz_bench: MAX_S must be whole seconds" >&2; exit 2;; esac
# The whole run is bounded: re-run under timeout(1); TERM lets the EXIT trap clean up.
if [ -z "${FUZZ_BENCH_INNER:-}" ]; then
  FUZZ_BENCH_INNER=1 exec timeout -k 30 "$MAX_S" "$0"
fi
[ "$(id -u)" -eq 0 ] || { echo "fuzz_bench: needs root (network namespace)" >&2; exit 2; }

REPO=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-1000000} DURATION=${DURATION:-8m} RATE=${RATE:-5000} SETTLE=${SETTLE:-30} KEEP=${KEEP:-0}
RESULTS=${RESULTS:-$REPO/bench/RESULTS.md}
WORK=$(mktemp -d /tmp/fuzz_bench.XXXXXX)
NS=outpost-fuzz-$$
PID=

cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PID" 2>/dev/null
  fi
  ip netns del "$NS" 2>/dev/null
  if [ "$KEEP" = 1 ]; then echo "fuzz_bench: scratch dir kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "fuzz_bench: building into $WORK" >&2
(cd "$REPO" && timeout 300 go build -o "$WORK/" ./cmd/outpostd ./cmd/outpostctl ./bench/sipfuzz) || exit 1
ip netns add "$NS" && ip -n "$NS" link set lo up || exit 1

mkdir -p "$WORK/data"
# ip netns exec execs outpostd: $! is the daemon's own pid.
ip netns exec "$NS" "$WORK/outpostd" --data "$WORK/data" --log-level warn >"$WORK/outpostd.log" 2>&1 &
PID=$!
ready=0
for _ in $(seq 1 300); do
  if timeout 2 "$WORK/outpostctl" --socket "$WORK/data/outpostd.sock" status >/dev/null 2>&1; then ready=1; break; fi
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
[ "$ready" = 1 ] || { echo "fuzz_bench: outpostd not ready" >&2; cat "$WORK/outpostd.log" >&2; exit 1; }
sleep 2 # let the start-up garbage settle before the RSS baseline

START=$(date -u +%Y-%m-%dT%H:%MZ)
CMD="sipfuzz -target 127.0.0.1:5060 -n $N -duration $DURATION -rate $RATE -user 1001 -password demo1001 -domain outpost.local -pid PID -settle ${SETTLE}s"
echo "fuzz_bench: $CMD" >&2
timeout $((MAX_S - 60)) ip netns exec "$NS" "$WORK/sipfuzz" -seeds "$REPO/bench/sipfuzz/seeds" \
  -target 127.0.0.1:5060 -n "$N" -duration "$DURATION" -rate "$RATE" \
  -user 1001 -password demo1001 -domain outpost.local -pid "$PID" -settle "${SETTLE}s" >"$WORK/fuzz.out" 2>&1
rc=$?
cat "$WORK/fuzz.out"
crashes=0
if ! kill -0 "$PID" 2>/dev/null || [ ! -e "/proc/$PID/status" ]; then crashes=1; fi
# The registrar still answers after the run: the monitor's figures cover the run itself.
dropped=$(timeout 5 "$WORK/outpostctl" --socket "$WORK/data/outpostd.sock" status --json 2>/dev/null |
  sed -n 's/.*"sip_dropped": *\([0-9]*\).*/\1/p' | head -1)
panics=$(grep -c -i 'panic\|fatal error' "$WORK/outpostd.log")

val() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" "$WORK/fuzz.out" | head -1; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
ncpu=$(nproc)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
section=$(cat <<EOF
## SIP fuzzing against the running daemon (security issue, item 10)

Command: \`bench/fuzz_bench.sh\` (N=$N DURATION=$DURATION RATE=$RATE SETTLE=$SETTLE), run $START:
outpostd on its embedded default document in a network namespace of its own (only lo; 127.0.0.1:5060),
attacked by \`$CMD\` in the same namespace.
Machine: $ncpu × $cpu, $(uname -r), $(go version | cut -d' ' -f3).
Seeds: \`bench/sipfuzz/seeds/\` (REGISTER with credentials, INVITE with SDP, re-INVITE, ACK, BYE,
OPTIONS, 180 and 200 responses); mutations: byte flips, header duplication (up to 3000×) and
deletion, truncation, huge values (to 60 KiB, 40-digit numbers, negatives), CR/LF injection,
random/negative/huge/second Content-Length, splicing of two messages; one to three per message.
Every 10th message goes over TCP (50 per connection).

| figure | value |
|---|---|
| messages sent (UDP / TCP) | $(val messages) ($(val udp) / $(val tcp)); refused by the kernel or a closed connection: $(val unsent) |
| time, rate | $(val elapsed_s) s, $(val rate) messages/s |
| crashes (outpostd process gone) | $crashes; panics in its log: $panics; sipfuzz exit $rc |
| REGISTER with digest every second (1001) during the run | $(val register_ok) of $(val register_attempts) succeeded (401 then 200); longest gap between successes $(val register_max_gap_s) s |
| datagrams outpostd sent back to the fuzz socket | $(val answers) |
| datagrams outpostd dropped as unparseable (status sip_dropped) | ${dropped:-?} |
| VmRSS before / right after / ${SETTLE} s after | $(mib "$(val rss_before_kib)") / $(mib "$(val rss_after_kib)") / $(mib "$(sed -n 's/.*rss_after_[^=]*_kib=\([0-9]*\).*/\1/p' "$WORK/fuzz.out" | head -1)") |
EOF
)
failures=$(sed -n 's/^register_failure=//p' "$WORK/fuzz.out")
if [ -n "$failures" ]; then
  section+=$'\n\nMonitor failures (first ten):\n\n'$(printf '%s\n' "$failures" | sed 's/^/    /')
fi
echo
echo "$section"
if [ "$RESULTS" != "-" ]; then
  python3 - "$RESULTS" "$section" <<'PY'
import re, sys
path, section = sys.argv[1], sys.argv[2].rstrip() + "\n"
text = open(path).read()
head = "## SIP fuzzing against the running daemon"
m = re.search(r"^" + re.escape(head) + r".*?(?=^## |\Z)", text, flags=re.S | re.M)
text = text[:m.start()] + section + "\n" + text[m.end():] if m else text.rstrip() + "\n\n" + section
open(path, "w").write(text)
PY
  echo "fuzz_bench: figures written to $RESULTS" >&2
fi
[ "$crashes" = 0 ] && [ "$rc" = 0 ]
