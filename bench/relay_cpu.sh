#!/bin/bash
# Relay CPU per packet, before/after: media/relay (bench/relayd) built from several git revisions and driven by
# bench/rtpblast on loopback, uncapped, the revisions' runs interleaved so that a busy box's noise falls on all
# of them alike. A quick check of a change to the relay's hot path (bench/relay_bench.sh is the full comparison
# with rtpengine, capped and uncapped).
#
# Usage: bench/relay_cpu.sh [REPS=3] [SESSIONS...]
#   REPS       runs per revision and step (the summary gives the median)
#   SESSIONS   sessions per step (x2 streams x 50 pps); default 100 500 = 10 and 50 kpps
# Environment: REVS="HEAD~1 HEAD" (git revisions; "." = the work tree as it is), DUR_S=10 (seconds of RTP per
#   run), RELAYD_FLAGS="" (more relayd flags, e.g. "-gomaxprocs 1" as under a CPU cap), BENCH_IP=127.0.0.77,
#   RUN=/tmp/outpost-relaycpu
# Per run: relayd's CPU (utime+stime from /proc, its own process) over the generator's whole run (setup, DUR_S of
# RTP, 2 s drain), as % of one core, and the generator's loss. Output: one line per run, then the medians; also
# in bench/results/relay-cpu-DATE.txt. Time: about REPS x steps x revisions x (DUR_S + 3) s. Needs go, git,
# python3; no root.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;; esac
REPO=$(cd "$(dirname "$0")/.." && pwd)
REPS=${1:-3}; shift 2>/dev/null
STEPS=${*:-"100 500"}
REVS=${REVS:-"HEAD~1 HEAD"}
DUR=${DUR_S:-10}
IP=${BENCH_IP:-127.0.0.77}
RUN=${RUN:-/tmp/outpost-relaycpu}
read -r -a XFLAGS <<< "${RELAYD_FLAGS:-}"
case "$REPS" in ''|*[!0-9]*|0) echo "relay_cpu: REPS must be a positive number" >&2; exit 2;; esac
for s in $STEPS; do case "$s" in ''|*[!0-9]*|0) echo "relay_cpu: bad step '$s'" >&2; exit 2;; esac; done
for t in go git python3 timeout; do command -v "$t" >/dev/null || { echo "relay_cpu: $t not installed" >&2; exit 2; }; done
mkdir -p "$RUN" "$REPO/bench/results"
RAW=$REPO/bench/results/relay-cpu-$(date +%Y%m%d-%H%M%S).txt
log() { echo "$*" | tee -a "$RAW"; }

(cd "$REPO" && go build -o "$RUN/rtpblast" ./bench/rtpblast) || exit 1
i=0
for rev in $REVS; do # relayd-N for the N-th revision
  i=$((i + 1))
  if [ "$rev" = . ]; then src=$REPO; else
    src=$RUN/src-$i; rm -rf "$src"; mkdir -p "$src"
    (cd "$REPO" && git archive "$rev") | tar -x -C "$src" || exit 1
  fi
  (cd "$src" && CGO_ENABLED=0 go build -tags relaybench -o "$RUN/relayd-$i" ./bench/relayd) || exit 1
done

log "# date: $(date -u '+%Y-%m-%d %H:%M UTC')  machine: $(nproc) x $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(uname -r)"
log "# command: bench/relay_cpu.sh $REPS $STEPS  REVS=\"$REVS\" RELAYD_FLAGS=\"${RELAYD_FLAGS:-}\" ($(cd "$REPO" && for r in $REVS; do [ "$r" = . ] && echo -n "work-tree " || echo -n "$(git rev-parse --short "$r") "; done))"
HZ=$(getconf CLK_TCK)
IFS=. read -r a b c d <<< "$IP"
NGHEX=$(printf '%02X%02X%02X%02X:%04X' "$d" "$c" "$b" "$a" 22299) # as /proc/net/udp shows local addresses
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for rep in $(seq "$REPS"); do
  for s in $STEPS; do
    i=0
    for rev in $REVS; do
      i=$((i + 1))
      "$RUN/relayd-$i" -ng "$IP:22299" -ip "$IP" -ports 52000-59999 "${XFLAGS[@]}" > "$RUN/relayd.log" 2>&1 &
      pid=$!
      for _ in $(seq 100); do grep -q " $NGHEX " /proc/net/udp && break; sleep 0.05; done # relayd's ng socket is bound
      t0=$(ticks $pid); w0=$(date +%s.%N)
      out=$(timeout $((3 * DUR + 60)) "$RUN/rtpblast" -ng "$IP:22299" -ip "$IP" -sessions "$s" -dur "${DUR}s" 2>&1 | tail -1)
      t1=$(ticks $pid); w1=$(date +%s.%N)
      kill "$pid"; wait "$pid" 2>/dev/null
      cpu=$(python3 -c "print(round(($t1 - $t0) * 100 / $HZ / ($w1 - $w0), 2))")
      loss=$(echo "$out" | grep -o '\bloss_pct=[^ ]*' | head -1)
      log "rev=$rev sessions=$s rep=$rep relayd_cpu_pct=$cpu $loss load=$(cut -d' ' -f1 /proc/loadavg)"
    done
  done
done
log "# medians (relayd CPU, % of one core; per kpps = / (sessions x 100 / 1000))"
grep '^rev=' "$RAW" | python3 -c '
import sys, statistics, collections
d = collections.defaultdict(list)
for line in sys.stdin:
    f = dict(kv.split("=", 1) for kv in line.split())
    d[(f["rev"], int(f["sessions"]))].append(float(f["relayd_cpu_pct"]))
for (rev, s), v in sorted(d.items(), key=lambda x: (x[0][1], x[0][0])):
    m = statistics.median(v)
    print(f"rev={rev} sessions={s} kpps={s * 100 / 1000:g} median_cpu_pct={m:.2f} per_kpps={m / (s * 100 / 1000):.3f} runs={v}")
' | tee -a "$RAW"
