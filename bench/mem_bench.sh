#!/bin/bash
# Memory under load (issue 16, item 3): outpostd's RSS with 1000 bindings and 100 calls up, then through a flood
# of new INVITEs that admission refuses with 503, and how fast it comes back.
#
# Usage: bench/mem_bench.sh [RUNS=3] [FLOOD_RATE=10000] [FLOOD_S=10]
# Environment: OUTPOSTD_BIN (use this outpostd, outpostctl beside it), RUN [/tmp/outpost-membench], BENCH_IP
#   [127.0.0.51], PEERS_DIR [bench/peers], GOGC/GOMEMLIMIT (passed to outpostd, recorded when set).
#
# One run:
# 1. outpostd on udp:BENCH_IP:5060, uncapped, with a generated config (bench/call_bench.py config): 1000 users
#    (1000 + u0001..u0999), a PSTN gateway at BENCH_IP:5080 (the UACs' address: trusted) and the inbound DID rule.
# 2. 1000 bindings: user 1000 from BENCH_IP:5070 (where the SIPp UAS answers), u0001..u0999 from BENCH_IP:5090
#    (SIPp reg_auth.xml, 200/s).
# 3. 100 calls up: a SIPp UAC (uac_rr.xml) from BENCH_IP:5080 calls the DID at 10 calls/s, each held 10 s, for 20 s;
#    RSS sampled 15 s in (SIPp's CurrentCall and outpostctl's calls recorded beside it): "rss_calls100".
# 4. The flood, once those calls ended: a SIPp UAC (uac_flood.xml) offers FLOOD_RATE new calls/s for FLOOD_S s
#    (503, 480 and 486 accepted as final; an answered call is hung up at once), the UAS still answering what is
#    admitted. outpostd's VmRSS is sampled every 0.5 s from the flood's start until it is under 60 MiB again
#    (at most 90 s after the flood): peak, and seconds from the flood's end to under 60 MiB.
# Output: lines on stdout and in $RUN/results/mem-YYYYMMDD-HHMM.txt; the medians go into bench/RESULTS.md by hand.
# Bounded: every SIPp run has -m and a timeout; ~2 min a run. Loopback only. Needs root (SO_RCVBUFFORCE), sipp,
# python3, go (when building), curl.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;; esac
REPO=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$REPO/bench
PY=$BENCH/call_bench.py
PEERS_DIR=${PEERS_DIR:-$BENCH/peers}
export RUN=${RUN:-/tmp/outpost-membench}
RUNS=${1:-3} FLOOD_RATE=${2:-10000} FLOOD_S=${3:-10}
for n in "$RUNS" "$FLOOD_RATE" "$FLOOD_S"; do
  case "$n" in ''|*[!0-9]*|0) echo "mem_bench: RUNS, FLOOD_RATE and FLOOD_S must be positive integers" >&2; exit 2;; esac
done
"$PEERS_DIR/install.sh" sip-tester || exit 2
for t in sipp python3 ss curl timeout; do command -v "$t" >/dev/null || { echo "mem_bench: $t is not installed" >&2; exit 2; }; done
[ "$(id -u)" = 0 ] || { echo "mem_bench: needs root" >&2; exit 2; }
# shellcheck source=bench/peers/lib.sh
. "$PEERS_DIR/lib.sh"       # RUN, BENCH_IP, wait_quiet; renices us
DID=+15550001000 DID_RE='^\+1555000(\d{4})$' EXT=1000 EXT_PW=bench1000 REALM=bench.local USERS=999
SOCK=$RUN/data/outpostd.sock
RAW=/dev/null
log() { echo "$*" | tee -a "$RAW"; }
note() { echo "$*" >&2; }
rss_kb() { awk '/^VmRSS:/{print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

if [ -n "${OUTPOSTD_BIN:-}" ]; then
  OPBIN=$OUTPOSTD_BIN
else
  OPBIN=$RUN/bin/outpostd; mkdir -p "$RUN/bin"
  ( cd "$REPO" && CGO_ENABLED=0 timeout 900 go build -trimpath -o "$RUN/bin/" ./cmd/outpostd ./cmd/outpostctl ) || exit 1
fi
CTL=$(dirname "$OPBIN")/outpostctl
for p in 5060 5070 5080 5090; do
  ss -uHln "src $BENCH_IP:$p" | grep -q . && { note "mem_bench: $BENCH_IP:$p in use (another benchmark?)"; exit 1; }
done

SPID='' PIDS=()
cleanup() {
  trap - EXIT INT TERM
  local p; for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  [ -n "$SPID" ] && { kill -TERM "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; }
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_outpostd() {
  rm -rf "$RUN/data"; mkdir -p "$RUN/data"
  # shellcheck disable=SC2016  # '$1' is the rule's replacement
  python3 "$PY" config "$BENCH_IP" "$REALM" "$EXT" "$EXT_PW" "$BENCH_IP:5080" "$DID_RE" '$1' "$RUN/config.json" "$USERS" || return 1
  "$OPBIN" --data "$RUN/data" --config "$RUN/config.json" --log-level warn > "$RUN/outpostd.log" 2>&1 &
  SPID=$!
  local i; for i in $(seq 1 40); do
    sleep 0.5
    timeout 5 "$CTL" --socket "$SOCK" --timeout 2s status >/dev/null 2>&1 && return 0
    kill -0 "$SPID" 2>/dev/null || break
  done
  note "outpostd did not start"; tail -20 "$RUN/outpostd.log" >&2; return 1
}
stop_outpostd() { kill -TERM "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; SPID=''; }
bindings() { timeout 10 "$CTL" --socket "$SOCK" --timeout 5s --json registrations 2>/dev/null | grep -o '"contact"' | wc -l; }

register_all() { # user 1000 from :5070, the rest from :5090
  local d=$RUN/reg; rm -rf "$d"; mkdir -p "$d"
  printf 'SEQUENTIAL\n%s;[authentication username=%s password=%s]\n' "$EXT" "$EXT" "$EXT_PW" > "$d/one.csv"
  { echo SEQUENTIAL; for i in $(seq 1 "$USERS"); do printf 'u%04d;[authentication username=u%04d password=p%04d]\n' "$i" "$i" "$i"; done; } > "$d/users.csv"
  ( cd "$d" && timeout 30 sipp "$BENCH_IP:5060" -sf "$PEERS_DIR/sipp/reg_auth.xml" -inf one.csv -i "$BENCH_IP" -p 5070 -m 1 \
      -nostdin -recv_timeout 5000 -timeout 20 > one.out 2>&1 )
  ( cd "$d" && timeout 60 sipp "$BENCH_IP:5060" -sf "$PEERS_DIR/sipp/reg_auth.xml" -inf users.csv -i "$BENCH_IP" -p 5090 \
      -m "$USERS" -r 200 -l 1000 -nostdin -recv_timeout 5000 -timeout 50 > users.out 2>&1 )
}

one_run() {
  local run=$1
  local d=$RUN/run$run
  rm -rf "$d"; mkdir -p "$d"
  start_outpostd || return 1
  register_all
  local nb; nb=$(bindings)
  local idle; idle=$(rss_kb "$SPID")
  # 100 calls up
  ( cd "$d" && exec timeout 120 sipp -sf "$PEERS_DIR/sipp/uas_rr.xml" -i "$BENCH_IP" -p 5070 -m 1000000 -buff_size 4194304 \
      -nostdin -timeout 110 > uas.out 2>&1 ) &
  local uas=$!; PIDS+=("$uas"); sleep 0.5
  ( cd "$d" && exec timeout 60 sipp "$BENCH_IP:5060" -sf "$PEERS_DIR/sipp/uac_rr.xml" -s "$DID" -i "$BENCH_IP" -p 5080 -m 200 \
      -r 10 -d 10000 -l 1000 -nostdin -recv_timeout 5000 -default_behaviors all,-abortunexp -timeout 50 -trace_stat -fd 1 \
      -stf calls.csv > calls.out 2>&1 ) &
  local uac=$!; PIDS+=("$uac")
  sleep 15
  local rss100 cur listed
  rss100=$(rss_kb "$SPID"); cur=$(python3 "$PY" current "$d/calls.csv")
  listed=$(timeout 10 "$CTL" --socket "$SOCK" --timeout 5s --json calls 2>/dev/null | python3 "$PY" count)
  wait "$uac" 2>/dev/null
  # the flood
  local m=$((FLOOD_RATE*FLOOD_S)) t0 t1 peak=0 back='' r now
  t0=$(date +%s.%N)
  ( cd "$d" && exec timeout $((FLOOD_S*3+40)) sipp "$BENCH_IP:5060" -sf "$PEERS_DIR/sipp/uac_flood.xml" -s "$DID" -i "$BENCH_IP" \
      -p 5080 -m "$m" -r "$FLOOD_RATE" -rp 1000 -l 200000 -buff_size 4194304 -nostdin -recv_timeout 5000 \
      -default_behaviors all,-abortunexp -timeout $((FLOOD_S*3+30)) -trace_stat -fd 1 -stf flood.csv > flood.out 2>&1 ) &
  uac=$!; PIDS+=("$uac")
  local flood_end=''
  while :; do   # bounded: the flood's timeout, then 90 s
    r=$(rss_kb "$SPID"); [ "${r:-0}" -gt "$peak" ] && peak=$r
    now=$(date +%s.%N)
    if [ -z "$flood_end" ] && ! kill -0 "$uac" 2>/dev/null; then flood_end=$now; fi
    if [ -n "$flood_end" ]; then
      if [ "${r:-0}" -lt $((60*1024)) ]; then back=$(awk -v a="$flood_end" -v b="$now" 'BEGIN{printf "%.1f", b-a}'); break; fi
      awk -v a="$flood_end" -v b="$now" 'BEGIN{exit !(b-a > 90)}' && break
    fi
    sleep 0.5
  done
  t1=$flood_end
  wait "$uac" 2>/dev/null
  local sum; sum=$(python3 "$PEERS_DIR/tools/sipp_summary.py" "$d/flood.csv" /dev/null 2>/dev/null)
  local created ok failed refusals
  created=$(echo "$sum" | tr ' ' '\n' | sed -n 's/^TotalCallCreated=//p')
  ok=$(echo "$sum" | tr ' ' '\n' | sed -n 's/^SuccessfulCall=//p'); failed=$(echo "$sum" | tr ' ' '\n' | sed -n 's/^FailedCall=//p')
  refusals=$(timeout 10 curl -s --max-time 5 --unix-socket "$SOCK" http://x/metrics 2>/dev/null |
    awk '/^outpost_sip_overload_refusals_total\{/{split($1, k, "\""); r = r k[2] ":" $2 " "} END{print r}' | sed 's/ $//; s/ /,/')
  log "run=$run bindings=$nb rss_idle_kb=$idle rss_calls100_kb=$rss100 calls_uac=$cur calls_listed=$listed" \
      "flood_rate=$FLOOD_RATE flood_s=$FLOOD_S flood_wall_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')" \
      "created=${created:-?} done=${ok:-?} failed=${failed:-?} overload_503=${refusals:-?}" \
      "rss_peak_kb=$peak back_under_60MiB_s=${back:-never(90s)} rss_end_kb=$(rss_kb "$SPID")"
  kill -TERM "$uas" 2>/dev/null; wait "$uas" 2>/dev/null
  PIDS=()
  stop_outpostd
}

mkdir -p "$RUN/results"
RAW=$RUN/results/mem-$(date +%Y%m%d-%H%M).txt
: > "$RAW"
log "# date: $(date '+%Y-%m-%d %H:%M %Z')"
log "# machine: $(nproc) x $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(uname -r)"
log "# command: bench/mem_bench.sh $RUNS $FLOOD_RATE $FLOOD_S${GOGC:+ GOGC=$GOGC}${GOMEMLIMIT:+ GOMEMLIMIT=$GOMEMLIMIT}"
log "# outpostd: $OPBIN $(go version "$OPBIN" 2>/dev/null | awk '{print $2}')"
for run in $(seq 1 "$RUNS"); do
  wait_quiet 20 30 || true
  one_run "$run" || log "run=$run failed (see $RUN)"
done
