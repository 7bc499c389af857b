#!/bin/bash
# rtpengine (userspace only, table=-1) relay benchmark driven by rtpblast (ng offer/answer + paced RTP).
# Usage: rtpengine/rtp_step.sh [dur_s=10] [sessions steps...]
#  1) latency at moderate load: 100 sessions x 2 directions = 200 streams x 50 pps (10 kpps), 172-byte packets,
#     first straight A<->B (generator baseline, -direct), then through rtpengine; added latency = difference.
#  2) max sustained relayed pps: sessions steps (x2 streams x 50 pps), pass = loss < 0.1 %.
# CPU figures are % of ONE core (box has 2); other_cpu = whole-box busy minus the measured processes (approx., +-15 %,
# /proc/stat is tick-sampled); softirq_cpu is informational (loopback delivery; mostly already inside process sys time).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/peers/lib.sh
. "$HERE/../lib.sh"
DUR=${1:-10}; shift || true
STEPS=${*:-"250 500 750 1000 1250 1500 2000 2500"}
OUT=$RUN/rtp; mkdir -p "$OUT"; RES=$OUT/results.txt; : > "$RES"
BLAST=$RUN/rtpblast
"$PEERS_DIR/install.sh" rtpengine-daemon || exit 1
# the generator is bench/rtpblast of this repository (module github.com/outpost/outpost)
[ -x "$BLAST" ] || (cd "$HERE/../../.." && go build -o "$BLAST" ./bench/rtpblast) || exit 1
rtp_start() {
  timeout 1800 rtpengine --config-file="$HERE/rtpengine.conf" --config-section=bench --interface="$BENCH_IP" \
     --listen-ng="$BENCH_IP:22223" --pidfile="$RUN/rtpengine.pid" > "$OUT/rtpengine.log" 2>&1 &
  RPID_T=$!; sleep 1.5
  RPID=$(pgrep -P "$RPID_T" rtpengine | head -1)
  [ -n "$RPID" ] || { echo "rtpengine did not start:"; cat "$OUT/rtpengine.log"; exit 1; }
}
rtp_stop() { kill -TERM "$RPID" 2>/dev/null; wait "$RPID_T" 2>/dev/null; }
run_one() { # label, rtpblast args...
  local label=$1; shift
  wait_quiet 15 30
  local r0 b0 s0 r1 b1 s1 j
  r0=$(cpu_ticks "$RPID"); b0=$(sys_busy_ticks); Q0=$(sys_sirq_ticks); export Q0; s0=$(date +%s.%N)
  j=$("$BLAST" -ip "$BENCH_IP" -ng "$BENCH_IP:22223" -dur "${DUR}s" -json "$@")
  r1=$(cpu_ticks "$RPID"); b1=$(sys_busy_ticks); Q1=$(sys_sirq_ticks); export Q1; s1=$(date +%s.%N)
  python3 - "$label" "$j" "$r0" "$r1" "$b0" "$b1" "$s0" "$s1" "$HZ" <<'PY' | tee -a "$RES"
import json, sys, os
label, j = sys.argv[1], json.loads(sys.argv[2]); r0, r1, b0, b1 = map(int, sys.argv[3:7]); s0, s1, hz = map(float, sys.argv[7:10])
wall = s1 - s0
eng = 100.0 * (r1 - r0) / hz / wall if j['mode'] == 'rtpengine' else 0.0
gen_s = j['gen_cpu_pct_of_core'] / 100.0 * (j['send_s'] + 2)
sirq = 100.0 * (int(os.environ['Q1']) - int(os.environ['Q0'])) / hz / wall
other = 100.0 * ((b1 - b0) / hz - (r1 - r0) / hz - gen_s) / wall
ok = j['loss_pct'] < 0.1 and j['offered_pps'] >= 0.97 * j['streams'] * j['pps_per_stream']
print(f"{label} mode={j['mode']} sessions={j['sessions']} streams={j['streams']} offered_pps={j['offered_pps']:.0f} "
      f"relayed_pps={j['received']/j['send_s']:.0f} loss%={j['loss_pct']:.4f} worst_stream_loss%={j['worst_stream_loss_pct']:.3f} "
      f"lat_p50={j['lat_p50_ms']:.3f}ms lat_p90={j['lat_p90_ms']:.3f}ms lat_p99={j['lat_p99_ms']:.3f}ms lat_p999={j['lat_p999_ms']:.3f}ms "
      f"late_ticks={j['late_ticks']} rtpengine_cpu={eng:.0f}% gen_cpu={j['gen_cpu_pct_of_core']:.0f}% softirq_cpu={sirq:.0f}% other_cpu={other:.0f}% "
      f"(rtpengine cpu is averaged over the whole step incl. ng setup and 2 s drain) {'PASS' if ok else 'FAIL'}")
PY
}
rtp_start
echo "rtpengine $(rtpengine --version 2>&1 | head -1), pid $RPID, threads: $(find "/proc/$RPID/task" -mindepth 1 -maxdepth 1 | wc -l)" | tee -a "$RES"
run_one "baseline200" -direct -sessions 100 -bidir
run_one "moderate200" -sessions 100 -bidir
run_one "baseline200b" -direct -sessions 100 -bidir
run_one "moderate200b" -sessions 100 -bidir
fails=0
for S in $STEPS; do
  for attempt in 1 2; do
    line=$(run_one "max_s$S attempt=$attempt" -sessions "$S" -bidir)
    other=$(echo "$line" | sed -n 's/.*other_cpu=\(-\?[0-9]*\)%.*/\1/p')
    case "$line" in *FAIL) [ "${other:-0}" -gt 30 ] && [ $attempt -eq 1 ] && continue ;; esac
    break
  done
  case "$line" in *FAIL) fails=$((fails+1)); [ $fails -ge 2 ] && break;; esac
done
rtp_stop
echo "results in $RES"
