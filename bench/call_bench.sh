#!/bin/bash
# Call benchmark: outpostd as a B2BUA vs Kamailio as a stateful proxy, same SIPp load, one invocation.
#
# Usage: bench/call_bench.sh [DUR_S=10] [CPU_CAP=0.5] [CALL_MS=1000]
#   DUR_S    seconds of call creation per rate step (the UAC makes RATE*DUR_S calls)
#   CPU_CAP  CPUs each server may use in the capped phase (cgroup v2 cpu.max / v1 cfs_quota)
#   CALL_MS  how long each call stays up between ACK and BYE (SIPp -d)
# Environment (defaults in brackets):
#   MEDIA [0]       1 = media anchored: RTP flows through each server for every call (see below); 0 = signalling only
#   PHASES ["cap uncapped"]   cap = every server capped at CPU_CAP; uncapped = a cgroup without a limit (accounting only)
#   SERVERS ["kamailio outpostd"]  order within each phase
#   CAP_RATES   ["1000 1200 1400 1600 1800 2000 2500"; MEDIA=1: "60 80 100 120 140 160 200 240 300 400"]  call rates
#               (calls/s) of the capped phase
#   FREE_RATES  ["1500 2000 2500 3000 3500 4000 5000"; MEDIA=1: "100 150 200 250 300 400 500 600"]  of the uncapped phase
#   KNEE_RUNS [2]   runs of each knee step (highest passing and lowest failing rate); verdict = median of the runs
#   WARMUP [1]      1 = each server's first run in a phase is a warm-up at the phase's first rate, logged as run=warmup
#                   and not counted (a fresh Kamailio's first run under the cap collapsed while its reruns at the same
#                   rate passed, so the climb stopped below its knee: bench/RESULTS.md issue 16 item 1); 0 = none
#   MEM [1]         measure memory at ~1000 concurrent calls (MEM_RATE [100] calls/s, each held MEM_HOLD_MS [10000] ms,
#                   MEM_DUR [20] s of creation; sampled MEM_HOLD_MS+5 s after the start) in phase MEM_PHASE [uncapped]
#                   outpostd's memory is also taken after the steps and 35 s later (sipgo transactions gone)
#   PROF [1]        10 s CPU profile of outpostd, and its allocations by site over the same 10 s, in an extra run at
#                   its knee rate (PROF_RATE if set) in each phase of PROF_PHASE ["cap uncapped"]
#   OUTPOSTD_BIN    use this outpostd (+ outpostctl beside it) instead of building one into $RUN/bin
#   BUILD_TRIES [3] build attempts, 120 s apart (the tree may be mid-change)
#   RUN [/tmp/outpost-callbench]  scratch (logs, SIPp files, raw results, profiles)
#   BENCH_IP [127.0.0.51]  BENCH_NICE [-10]  PEERS_DIR [bench/peers]  RESULTS [bench/RESULTS.md; - = do not write]
#
# What runs, and why (see bench/RESULTS.md for the figures):
# - Same generator and call as bench/peers/sipp/proxy_step.sh: SIPp UAC (uac_rr.xml, -default_behaviors all,-abortunexp,
#   -recv_timeout 5000, -rp 1000, 4 MiB buffers) on BENCH_IP:5080 calls a DID (+15550001000) on BENCH_IP:5060; a SIPp
#   UAS (uas_rr.xml) on BENCH_IP:5070 answers: INVITE/100/180/200/ACK, pause CALL_MS, BYE/200. A fresh UAS per step.
# - Kamailio 5.6: the peers' proxy.cfg (tm + rr, record-route, every initial request to the UAS), 2 workers, 4 MiB buffer.
# - outpostd: a generated config (bench/call_bench.py config): one user 1000, a PSTN gateway "sipp" with target
#   BENCH_IP:5080 (the UAC) and an inbound rule ^\+1555000(\d{4})$ -> $1. An INVITE from a PSTN gateway's ip:port is
#   trusted (no digest, like the proxy) and routed by the inbound rules to user 1000; user 1000 is REGISTERed once (digest, SIPp
#   reg_auth.xml) from BENCH_IP:5070 before any UAS starts, so its binding points at the UAS. Each call is then two
#   dialogs (A leg from the UAC, B leg to the UAS): full B2BUA work. outpostd's UDP socket has a 4 MiB buffer too.
# - MEDIA=1 (issue 16 item 1, "anchoring on"): outpostd gets media.relay = true (every call anchored: the relay
#   rewrites both legs' SDP to its own ports); Kamailio the same proxy.cfg with -A WITH_RTPENGINE: rtpengine_manage()
#   on the INVITE, its 200 and the BYE (delete also on a failed INVITE), towards a userspace rtpengine (peers'
#   rtpengine/rtpengine.conf, table=-1, 2 threads, ports 20000-29999 on BENCH_IP) started in Kamailio's cgroup, so
#   both servers get the same CPU for signalling + media (srv_cpu and memory then cover Kamailio + rtpengine).
#   SIPp plays RTP on both legs (scenarios generated from uac_rr.xml/uas_rr.xml by call_bench.py media into
#   $RUN/media: play_pcap_audio of a generated G.711 pcap, 50 packets/s, from the UAC after its ACK and from the UAS
#   when the ACK arrives, each call from its own port: -mi BENCH_IP, -mp 30000 (UAC) / 40000 (UAS) + 4 per call),
#   (CALL_MS-100)/20 packets per leg (ending 100 ms before the BYE so none races the session's deletion). A step
#   then also needs rtp% >= 98: RTP packets the server received (outpostd: outpost_relay_packets_total from /metrics;
#   rtpengine: rtpengine_packets_total{type="userspace"} from its listen-http /metrics) per packet SIPp played
#   (2 x packets per leg x UAC's successful calls); rtp_sessions_left = sessions still open after the step. Lower
#   default rates: each call is 2 x 50 packets/s into the server for CALL_MS (100 packets per 1-s call), so 200
#   calls/s is 20 kpps in + 20 kpps out of the relay, and SIPp's play (one thread and raw socket per call and leg)
#   costs CPU of the same shared box. The memory run (MEM) stays signalling-only: anchored calls without RTP.
# - Each server runs alone, in its own cgroup (capped phase: cpu.max/cfs_quota = CPU_CAP; uncapped: no limit), started
#   inside it; generators uncapped; the whole run at nice BENCH_NICE (peers' lib.sh).
# - Rate steps ascend up to the first failing rate. Pass (proxy_step.sh): UAC failed + UAS failed < 0.5 % of the
#   calls, all calls created, UAC done within DUR_S+8 s; plus >= 95 % of the target rate, measured as the rate at which
#   the UAC created its calls (a call failing on both sides counts twice: collapsed runs show fail% > 100). A failing
#   run with other_cpu > 30 % (the box is shared) is run again once, after waiting up to 30 s for a quiet box (peers'
#   wait_quiet; up to 20 s before a first attempt). Then the knee steps are run again until each has KNEE_RUNS runs
#   (at most 2 rounds); a rate passes when the median of its runs does (fail% < 0.5, achieved >= 95 %); sustained =
#   the highest rate with every lower rate passing; outpostd/Kamailio ratio = ratio of sustained rates, per phase.
# - outpostd's step lines also carry op_overload_503 = new calls its overload gate refused (503), by reason, from
#   /metrics (queue: call setups waited for the CPU; memory: live heap full of recent calls' transactions).
# - CPU: % of ONE core; srv_cpu = server process tree, other_cpu = rest of the box (incl. softirq; it reads
#   negative on this VM when the box is quiet: only large positive values mean other load).
# - Memory: Kamailio = sum over its processes (PSS counts shared memory once); outpostd = VmRSS + Go heap after a
#   forced GC (/debug/pprof/heap?gc=1) + calls listed by outpostctl; the live heap by allocation site is kept in
#   $RUN/results (*-calls1000.heap.pprof and .top.txt).
# Output: step lines on stdout and in $RUN/results/call-YYYYMMDD-HHMM.txt (raw, with the profiles; kept out of the
# repo); summary, a table row per phase, the latest run's raw lines and pprof tops into bench/RESULTS.md
# (between markers; text outside them is kept).
# Time: a run is DUR_S + CALL_MS + ~10 s (~30 s when failing); defaults: ~25 runs, 11-13 min measured on a quiet box,
# longer on a busy one (retries). Bounded: every SIPp run has -m and a timeout of 3*DUR_S+40..60 s; builds 900 s.
# MEDIA=1: ~40 runs, 24 min measured on a busy box.
# Needs root (cgroups, renice; SIPp's RTP playback uses raw sockets), sipp, kamailio, with MEDIA=1 rtpengine (all
# installed by bench/peers/install.sh when missing), python3, go (build, pprof), curl.
# shellcheck disable=SC2015  # the A && B || C lines are guards whose B is a test: C runs when A or B fails, as meant
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;; esac
CMDLINE="bench/call_bench.sh${*:+ $*}"
for v in MEDIA PHASES SERVERS CAP_RATES FREE_RATES KNEE_RUNS WARMUP MEM MEM_RATE MEM_HOLD_MS MEM_DUR MEM_PHASE PROF PROF_PHASE PROF_RATE \
         OUTPOSTD_BIN RUN BENCH_IP BENCH_NICE PEERS_DIR GOGC GOMEMLIMIT; do   # record non-default environment
  [ -n "${!v+x}" ] && CMDLINE="$v=\"${!v}\" $CMDLINE"
done
REPO=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$REPO/bench
PY=$BENCH/call_bench.py
PEERS_DIR=${PEERS_DIR:-$BENCH/peers}
[ -f "$PEERS_DIR/lib.sh" ] || { echo "call_bench: peer harness not found in $PEERS_DIR (set PEERS_DIR)" >&2; exit 2; }
export RUN=${RUN:-/tmp/outpost-callbench}
DUR=${1:-10}; CAP=${2:-0.5}; CALLMS=${3:-1000}
PHASES=${PHASES:-"cap uncapped"}
SERVERS=${SERVERS:-"kamailio outpostd"}
MEDIA=${MEDIA:-0}
case "$MEDIA" in 0|1) ;; *) echo "call_bench: MEDIA must be 0 or 1" >&2; exit 2;; esac
OP_MEDIA=$MEDIA   # outpostd_lib.sh: 1 = every call anchored on the relay
if [ "$MEDIA" = 1 ]; then
  CAP_RATES=${CAP_RATES:-"60 80 100 120 140 160 200 240 300 400"}
  FREE_RATES=${FREE_RATES:-"100 150 200 250 300 400 500 600"}
else
  CAP_RATES=${CAP_RATES:-"1000 1200 1400 1600 1800 2000 2500"}
  FREE_RATES=${FREE_RATES:-"1500 2000 2500 3000 3500 4000 5000"}
fi
KNEE_RUNS=${KNEE_RUNS:-2} WARMUP=${WARMUP:-1}
MEM=${MEM:-1} MEM_RATE=${MEM_RATE:-100} MEM_HOLD_MS=${MEM_HOLD_MS:-10000} MEM_DUR=${MEM_DUR:-20} MEM_PHASE=${MEM_PHASE:-uncapped}
PROF=${PROF:-1} PROF_PHASE=${PROF_PHASE:-"cap uncapped"}
BUILD_TRIES=${BUILD_TRIES:-3}
RESULTS=${RESULTS:-$BENCH/RESULTS.md}
DID=+15550001000 DID_RE='^\+1555000(\d{4})$' EXT=1000 EXT_PW=bench1000 REALM=bench.local
for n in "$DUR" "$CALLMS" "$KNEE_RUNS" "$MEM_RATE" "$MEM_HOLD_MS" "$MEM_DUR"; do
  case "$n" in ''|*[!0-9]*|0) echo "call_bench: DUR_S, CALL_MS, KNEE_RUNS and MEM_* must be positive integers" >&2; exit 2;; esac
done
awk -v c="$CAP" 'BEGIN{exit !(c ~ /^[0-9]*\.?[0-9]+$/ && c > 0)}' || { echo "call_bench: bad CPU_CAP '$CAP'" >&2; exit 2; }
for r in $CAP_RATES $FREE_RATES; do case "$r" in ''|*[!0-9]*|0) echo "call_bench: bad rate '$r'" >&2; exit 2;; esac; done
for s in $SERVERS; do case "$s" in kamailio|outpostd) ;; *) echo "call_bench: unknown server '$s'" >&2; exit 2;; esac; done
for p in $PHASES; do case "$p" in cap|uncapped) ;; *) echo "call_bench: unknown phase '$p'" >&2; exit 2;; esac; done
PEER_PKGS=(sip-tester kamailio); [ "$MEDIA" = 1 ] && PEER_PKGS+=(rtpengine-daemon)
"$PEERS_DIR/install.sh" "${PEER_PKGS[@]}" || exit 2   # the peers, when missing
[ "$MEDIA" = 1 ] && ! command -v rtpengine >/dev/null && { echo "call_bench: rtpengine is not installed" >&2; exit 2; }
for t in sipp kamailio python3 ss curl go /usr/bin/time timeout; do
  command -v "$t" >/dev/null || { echo "call_bench: $t is not installed" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "call_bench: needs root (cgroups, renice)" >&2; exit 2; }
# shellcheck source=bench/peers/lib.sh
. "$PEERS_DIR/lib.sh"       # RUN, BENCH_IP, HZ, cpu_ticks, sys_busy_ticks, sys_sirq_ticks, wait_quiet, kam_start/kam_stop; renices us
UAC_XML=$PEERS_DIR/sipp/uac_rr.xml
UAS_XML=$PEERS_DIR/sipp/uas_rr.xml
STEP_UAC_XML=$UAC_XML STEP_UAS_XML=$UAS_XML UAC_MEDIA=() UAS_MEDIA=()   # the rate steps' (MEDIA=1: RTP variants)
RTP_PKTS=0                           # MEDIA=1: RTP packets SIPp plays per call and leg
RTPE_PID='' RTPE_NG=$BENCH_IP:22223 RTPE_HTTP=$BENCH_IP:22224
T_START=$(date +%s)
OPBIN='' CTL=''

RAW=/dev/null                          # set in main, once the checks passed
log() { echo "$*" | tee -a "$RAW"; }   # everything in the raw file is also printed
note() { echo "$*" >&2; }             # progress, not recorded

# ---------------------------------------------------------------- cgroups (v2, or v1 "cpu" hierarchy), as reg_bench.sh
CG_VER='' CG_ROOT='' CGS=() CG='' CG_DESC=''
cg_detect() {
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    CG_VER=2 CG_ROOT=/sys/fs/cgroup
    grep -qw cpu $CG_ROOT/cgroup.controllers || { note "cgroup v2 without the cpu controller"; return 1; }
    grep -qw cpu $CG_ROOT/cgroup.subtree_control || echo "+cpu" > $CG_ROOT/cgroup.subtree_control || return 1
  elif [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    CG_VER=1 CG_ROOT=/sys/fs/cgroup/cpu
  else
    note "no usable cpu cgroup controller"; return 1
  fi
}
cg_remove() {
  local d=$1 p
  [ -d "$d" ] || return 0
  local pids=(); mapfile -t pids 2>/dev/null < "$d/cgroup.procs"   # a snapshot: moving them changes the file
  for p in "${pids[@]}"; do echo "$p" > "$CG_ROOT/cgroup.procs" 2>/dev/null; done
  rmdir "$d" 2>/dev/null || note "WARNING: could not remove cgroup $d"
}
cg_create() { # cg_create NAME CPUS (0 = no limit) -> CG
  local cpus=$2
  CG=$CG_ROOT/outpost-callbench-${BENCH_IP//./_}-$1   # per BENCH_IP: runs on other addresses may be going on
  if [ -d "$CG" ]; then
    [ -s "$CG/cgroup.procs" ] && { note "cgroup $CG still has processes ($(tr '\n' ' ' < "$CG/cgroup.procs")): another run?"; return 1; }
    rmdir "$CG" || return 1
  fi
  mkdir "$CG" || return 1
  CGS+=("$CG")
  local q; q=$(awk -v c="$cpus" 'BEGIN{printf "%d", c*100000}')
  if [ "$CG_VER" = 2 ]; then
    if [ "$q" -gt 0 ]; then echo "$q 100000" > "$CG/cpu.max"; else echo "max 100000" > "$CG/cpu.max"; fi || return 1
    CG_DESC="cgroup-v2:cpu.max='$(cat "$CG/cpu.max")'"
  else
    echo 100000 > "$CG/cpu.cfs_period_us" && { [ "$q" -gt 0 ] && echo "$q" > "$CG/cpu.cfs_quota_us" || echo -1 > "$CG/cpu.cfs_quota_us"; } || return 1
    CG_DESC="cgroup-v1:cfs_quota_us=$(cat "$CG/cpu.cfs_quota_us")/cfs_period_us=$(cat "$CG/cpu.cfs_period_us")"
  fi
}
cg_throttle() { awk '/^nr_periods /{p=$2} /^nr_throttled /{t=$2} END{print p+0, t+0}' "$CG/cpu.stat"; }

# ---------------------------------------------------------------- small probes
udp_rcvbuf_errors() { awk '/^Udp: [0-9]/{print $6}' /proc/net/snmp; }
sock_skmem() { ss -uHamn "src $BENCH_IP:5060" 2>/dev/null | grep -o 'skmem:([^)]*)' | head -1; }
sock_drops() { sock_skmem | sed -n 's/.*,d\([0-9]*\)).*/\1/p'; }
port_busy() { ss -uHln "src $BENCH_IP:$1" 2>/dev/null | grep -q .; }
op_calls() { timeout 10 "$CTL" --socket "$SOCK" --timeout 5s --json calls 2>/dev/null | python3 "$PY" count; }
op_heap() { # Go heap after a forced GC (the pprof heap endpoint's gc=1)
  timeout 20 curl -s --max-time 15 --unix-socket "$SOCK" 'http://x/debug/pprof/heap?gc=1&debug=1' 2>/dev/null | python3 "$PY" heap
}
op_heap_profile() { # op_heap_profile FILE: the live heap by allocation site (FILE.pprof) and its top (FILE.top.txt)
  timeout 20 curl -s --max-time 15 --unix-socket "$SOCK" 'http://x/debug/pprof/heap' > "$1.pprof" 2>/dev/null &&
    go tool pprof -top -sample_index=inuse_space -nodecount=40 "$OPBIN" "$1.pprof" > "$1.top.txt" 2>/dev/null
}
op_metrics() { timeout 10 curl -s --max-time 5 --unix-socket "$SOCK" http://x/metrics 2>/dev/null; }
# MEDIA=1: RTP packets the server's relay received so far, and its open sessions ("?" when unreadable)
media_metrics() {
  case "$SRV" in
    outpostd) op_metrics;;
    kamailio) timeout 10 curl -s --max-time 5 "http://$RTPE_HTTP/metrics" 2>/dev/null;;
  esac
}
media_pkts() {
  case "$SRV" in
    outpostd) media_metrics | python3 "$PY" metric outpost_relay_packets_total;;
    kamailio) media_metrics | python3 "$PY" metric rtpengine_packets_total type=userspace;;
  esac
}
media_sessions() {
  case "$SRV" in
    outpostd) media_metrics | python3 "$PY" metric outpost_relay_sessions;;
    kamailio) media_metrics | python3 "$PY" metric rtpengine_sessions type=own;;
  esac
}
op_overload() { # "QUEUE MEMORY": new calls outpostd refused with its overload gate's 503, by reason (gateway/overload.go)
  local m; m=$(op_metrics)
  echo "$(echo "$m" | python3 "$PY" metric outpost_sip_overload_refusals_total reason=queue)" \
       "$(echo "$m" | python3 "$PY" metric outpost_sip_overload_refusals_total reason=memory)"
}
op_dropped() { timeout 10 "$CTL" --socket "$SOCK" --timeout 5s --json status 2>/dev/null |
  python3 -c 'import json,sys
try: print(json.load(sys.stdin).get("sip_dropped","?"))
except Exception: print("?")'; }
mem_line() { # mem_line WHAT [extra...]: memory of the server's processes (everything in its cgroup)
  local what=$1; shift
  local h=""
  [ "$SRV" = outpostd ] && h=" $(op_heap) calls_listed=$(op_calls)"
  log "mem server=$SRV phase=$PHASE what=$what $(xargs python3 "$PY" mem < "$CG/cgroup.procs")$h $*"
}

# ---------------------------------------------------------------- servers
SRV='' SPID='' PHASE=''
start_rtpengine() { # MEDIA=1: userspace rtpengine in the server's cgroup, ng on RTPE_NG, /metrics on RTPE_HTTP;
  # warnings only (--log-level=4: its notice level logs every call; Kamailio logs errors only, outpostd warnings)
  port_busy "${RTPE_NG##*:}" && { note "rtpengine: udp:$RTPE_NG in use"; return 1; }   # (a busy HTTP port: it exits)
  ( echo "$BASHPID" > "$CG/cgroup.procs" || exit 97
    exec rtpengine --config-file="$PEERS_DIR/rtpengine/rtpengine.conf" --config-section=bench --interface="$BENCH_IP" \
      --listen-ng="$RTPE_NG" --listen-http="$RTPE_HTTP" --pidfile="$RUN/rtpengine.pid" --log-level=4
  ) > "$RUN/rtpengine.$PHASE.log" 2>&1 &
  RTPE_PID=$!
  local i; for i in $(seq 1 40); do   # bounded: 10 s
    sleep 0.25
    kill -0 "$RTPE_PID" 2>/dev/null || { note "rtpengine exited:"; tail -20 "$RUN/rtpengine.$PHASE.log" >&2; RTPE_PID=; return 1; }
    [ "$(media_pkts)" != "?" ] && return 0
  done
  note "rtpengine: no /metrics on $RTPE_HTTP after 10 s"; return 1
}
stop_rtpengine() {
  [ -n "$RTPE_PID" ] || return 0
  kill -TERM "$RTPE_PID" 2>/dev/null
  local i; for i in $(seq 1 50); do kill -0 "$RTPE_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$RTPE_PID" 2>/dev/null && kill -KILL "$RTPE_PID"
  wait "$RTPE_PID" 2>/dev/null; RTPE_PID=
}
# shellcheck source=bench/outpostd_lib.sh
. "$BENCH/outpostd_lib.sh"   # build_outpostd, start_outpostd, register_uas_binding, stop_outpostd; sets REG_XML, SOCK
start_kamailio() {
  rm -f "$RUN/kam.pid" "$RUN/kam.mainpid"
  local media=() extra=0 rv=''
  if [ "$MEDIA" = 1 ]; then
    start_rtpengine || return 1
    media=(-A WITH_RTPENGINE -A "RTPENGINE_SOCK=\"udp:$RTPE_NG\"")
    extra=1 rv=" rtpengine=$(rtpengine --version 2>&1 | awk '{print $2; exit}') rtpengine_pid=$RTPE_PID"
  fi
  ( echo "$BASHPID" > "$CG/cgroup.procs" || exit 1
    kam_start "$PEERS_DIR/kamailio/proxy.cfg" 2 -A "UAS_URI=\"sip:$BENCH_IP:5070\"" "${media[@]}" ) || return 1
  SPID=$(cat "$RUN/kam.mainpid")
  local tree incg
  tree=$(ps -o pid= --ppid "$SPID" | wc -l); tree=$((tree+1+extra)); incg=$(wc -l < "$CG/cgroup.procs")
  log "info server=kamailio phase=$PHASE cfg=proxy.cfg${media[*]:+ ${media[*]}} workers=2 procs=$tree procs_in_cgroup=$incg version=$(kamailio -v 2>/dev/null | awk 'NR==1{print $3}')$rv"
  [ "$tree" = "$incg" ] || { note "kamailio: only $incg of $tree processes are in $CG"; return 1; }
}
stop_kamailio() { kam_stop; stop_rtpengine; }
stop_server() {
  case "$SRV" in kamailio) stop_kamailio;; outpostd) stop_outpostd;; esac
  SRV='' SPID=''
}
SIPP_PIDS=()
kill_sipps() { local p; for p in "${SIPP_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done; SIPP_PIDS=(); }
cleanup() {
  trap - EXIT INT TERM
  kill_sipps
  stop_server
  local c; for c in "${CGS[@]}"; do cg_remove "$c"; done
}
trap cleanup EXIT
trap 'note "interrupted"; echo "# interrupted after $(( $(date +%s) - T_START )) s" >> "$RAW" 2>/dev/null; exit 130' INT TERM

# ---------------------------------------------------------------- one run of a rate step
start_uas() { # start_uas DIR M -> UPID (/usr/bin/time > timeout > sipp; time(1) gives the UAS's whole CPU in uas.time)
  ( cd "$1" && exec /usr/bin/time -f '%U %S %e' -o uas.time timeout $((DUR*3+60)) sipp -sf "$STEP_UAS_XML" "${UAS_MEDIA[@]}" -i "$BENCH_IP" -p 5070 \
      -m "$2" -buff_size 4194304 -nostdin -timeout $((DUR*3+50)) -trace_stat -fd 1 -stf uas_stat.csv -trace_err > uas.out 2>&1 ) &
  UPID=$!; SIPP_PIDS+=("$UPID")
  sleep 0.5
}
stop_uas() { # let the UAS finish its calls (timewait 4 s after the last BYE), at most 6 s, then TERM its timeout(1)
  local i c; for i in $(seq 1 24); do kill -0 "$UPID" 2>/dev/null || break; sleep 0.25; done
  if kill -0 "$UPID" 2>/dev/null; then
    for c in $(ps -o pid= --ppid "$UPID"); do kill -TERM "$c" 2>/dev/null; done   # timeout passes it on to sipp
    for i in $(seq 1 20); do kill -0 "$UPID" 2>/dev/null || break; sleep 0.25; done
    kill -TERM "$UPID" 2>/dev/null
  fi
  wait "$UPID" 2>/dev/null; SIPP_PIDS=()
}
uas_cpu_ticks() { # CPU ticks of the whole UAS run, from uas.time
  awk -v hz="$HZ" 'END{ if ($1 ~ /^[0-9.]+$/ && $2 ~ /^[0-9.]+$/) printf "%d", ($1+$2)*hz; else print 0 }' "$1/uas.time" 2>/dev/null || echo 0
}
LINE=
run_step() { # run_step RATE RUN ATTEMPT [profile-file]: one run at RATE, result line in LINE
  local R=$1 run=$2 attempt=$3 pfile=${4:-} M d k0 k1 u0 u1 b0 b1 q0 q1 s0 s1 su ss se t0 t1 tt0 tt1 dr0 dr1 e0 e1 rttf sum usum extra
  local -a ppids=()
  local m0='' m1='' pids=("$SPID"); [ -n "$RTPE_PID" ] && pids+=("$RTPE_PID")   # MEDIA=1: rtpengine is part of the server
  M=$((R*DUR)); d=$RUN/calls/$PHASE/$SRV/r$R-run$run-a$attempt; rm -rf "$d"; mkdir -p "$d"
  start_uas "$d" "$M"
  local od0='' oq0='' om0='' oq1 om1; [ "$SRV" = outpostd ] && { od0=$(op_dropped); read -r oq0 om0 < <(op_overload); }
  read -r t0 tt0 < <(cg_throttle)
  dr0=$(sock_drops); e0=$(udp_rcvbuf_errors); q0=$(sys_sirq_ticks)
  [ "$MEDIA" = 1 ] && m0=$(media_pkts)
  k0=$(cpu_ticks "${pids[@]}"); b0=$(sys_busy_ticks); s0=$(date +%s.%N)
  if [ -n "$pfile" ]; then   # profile 10 s, starting 1.5 s into the run
    ( sleep 1.5; timeout 30 curl -s --max-time 25 --unix-socket "$SOCK" 'http://x/debug/pprof/profile?seconds=10' > "$pfile" ) &
    ppids+=($!)
    ( sleep 1.5; timeout 30 curl -s --max-time 25 --unix-socket "$SOCK" 'http://x/debug/pprof/allocs?seconds=10' \
        > "${pfile%.pprof}.allocs.pprof" ) &   # what was allocated in the same window, by site
    ppids+=($!)
  fi
  ( cd "$d" && /usr/bin/time -f '%U %S %e' -o sipp.time timeout $((DUR*3+40)) sipp "$BENCH_IP:5060" -sf "$STEP_UAC_XML" -s "$DID" \
      "${UAC_MEDIA[@]}" -i "$BENCH_IP" -p 5080 -m "$M" -r "$R" -rp 1000 -d "$CALLMS" -l 100000 -buff_size 4194304 -nostdin \
      -recv_timeout 5000 -default_behaviors all,-abortunexp -timeout $((DUR*3+30)) -trace_stat -fd 1 -stf stat.csv \
      -trace_rtt -rtt_freq 100 -trace_err > sipp.out 2>&1 )
  sleep 1
  k1=$(cpu_ticks "${pids[@]}"); b1=$(sys_busy_ticks); s1=$(date +%s.%N)
  q1=$(sys_sirq_ticks); e1=$(udp_rcvbuf_errors); dr1=$(sock_drops)
  read -r t1 tt1 < <(cg_throttle)
  stop_uas
  u0=0 u1=$(uas_cpu_ticks "$d")   # nearly all of it falls inside [s0, s1]: the UAS idles in its 4 s timewait after
  [ ${#ppids[@]} -gt 0 ] && wait "${ppids[@]}" 2>/dev/null
  extra=""
  [ "$MEDIA" = 1 ] && { m1=$(media_pkts); extra="rtp_sessions_left=$(media_sessions)"; }   # after the UAS: all RTP is in
  if [ "$SRV" = outpostd ]; then
    read -r oq1 om1 < <(op_overload)
    extra="$extra${extra:+ }op_sip_dropped=+$(( $(op_dropped) - od0 )) op_calls_left=$(op_calls)"   # calls still listed after the UAS ended
    case "$oq0$oq1$om0$om1" in *[!0-9]*) extra="$extra op_overload_503=?";;
      *) extra="$extra op_overload_503=queue+$((oq1-oq0)),memory+$((om1-om0))";; esac
  fi
  read -r su ss se < <(tail -1 "$d/sipp.time" 2>/dev/null); su=${su:-0} ss=${ss:-0} se=${se:-0}
  case "$se" in *[!0-9.]*|'') su=0 ss=0 se=999;; esac    # sipp killed by timeout: time(1) wrote a status line
  rttf=$(find "$d" -maxdepth 1 -name '*_rtt.csv' | sort | head -1)
  sum=$(python3 "$PEERS_DIR/tools/sipp_summary.py" "$d/stat.csv" "${rttf:-/dev/null}" 2>/dev/null)
  usum=$(python3 "$PEERS_DIR/tools/sipp_summary.py" "$d/uas_stat.csv" /dev/null 2>/dev/null)
  LINE=$(python3 "$PY" line server="$SRV" phase="$PHASE" run="$run" attempt="$attempt" rate="$R" dur="$DUR" \
    k0="$k0" k1="$k1" u0="$u0" u1="$u1" s0="$s0" s1="$s1" su="$su" ss="$ss" se="$se" hz="$HZ" b0="$b0" b1="$b1" \
    q0="$q0" q1="$q1" sum="$sum" usum="$usum" stat="$d/stat.csv" d0="${dr0:-x}" d1="${dr1:-x}" e0="$e0" e1="$e1" \
    thr="$((tt1-tt0))/$((t1-t0))" extra="$extra" rtp0="$m0" rtp1="$m1" rtp_per_call="$((2*RTP_PKTS))") \
    || LINE="server=$SRV phase=$PHASE run=$run attempt=$attempt rate=$R error=summary-failed(see-$d) FAIL"
  log "$LINE"
  grep -q 'status 124' "$d/sipp.time" 2>/dev/null && note "WARNING: sipp hit its time limit (see $d)"
}
run_rate() { # run_rate RATE RUN: one run, once more if it failed on a busy box; returns 1 if the server died
  local R=$1 run=$2 attempt other
  for attempt in 1 2; do
    if [ "$attempt" = 1 ]; then wait_quiet 20 30; else wait_quiet 30 30; fi
    run_step "$R" "$run" "$attempt"
    kill -0 "$SPID" 2>/dev/null || { note "$SRV died during the step (see $RUN)"; log "info server=$SRV phase=$PHASE died_at_rate=$R"; return 1; }
    other=$(echo "$LINE" | sed -n 's/.*other_cpu=\(-\?[0-9]*\)%.*/\1/p')
    case "$LINE" in *FAIL) [ "${other:-0}" -gt 30 ] && [ $attempt -lt 2 ] && { note "failing run with other_cpu=${other}%: once more"; continue; } ;; esac
    break
  done
}

mem_at_1000_calls() { # ~MEM_RATE*MEM_HOLD_MS/1000 concurrent calls; sample MEM_HOLD_MS+5 s after the start
  local M=$((MEM_RATE*MEM_DUR)) d=$RUN/calls/$PHASE/$SRV/mem1000 held=$((MEM_HOLD_MS/1000+5)) uac cur listed sum usum
  rm -rf "$d"; mkdir -p "$d"
  wait_quiet 15 30
  mem_line idle
  ( cd "$d" && exec timeout $((MEM_DUR+MEM_HOLD_MS/1000+60)) sipp -sf "$UAS_XML" -i "$BENCH_IP" -p 5070 -m "$M" \
      -buff_size 4194304 -nostdin -timeout $((MEM_DUR+MEM_HOLD_MS/1000+50)) -trace_stat -fd 1 -stf uas_stat.csv > uas.out 2>&1 ) &
  UPID=$!; SIPP_PIDS+=("$UPID"); sleep 0.5
  ( cd "$d" && exec timeout $((MEM_DUR+MEM_HOLD_MS/1000+40)) sipp "$BENCH_IP:5060" -sf "$UAC_XML" -s "$DID" -i "$BENCH_IP" \
      -p 5080 -m "$M" -r "$MEM_RATE" -rp 1000 -d "$MEM_HOLD_MS" -l 100000 -buff_size 4194304 -nostdin -recv_timeout 5000 \
      -default_behaviors all,-abortunexp -timeout $((MEM_DUR+MEM_HOLD_MS/1000+30)) -trace_stat -fd 1 -stf stat.csv > sipp.out 2>&1 ) &
  uac=$!; SIPP_PIDS+=("$uac")
  sleep "$held"
  cur=$(python3 "$PY" current "$d/stat.csv")
  listed=; [ "$SRV" = outpostd ] && listed=" calls_listed=$(op_calls)"
  local m; m=$(xargs python3 "$PY" mem < "$CG/cgroup.procs")
  local h=""; [ "$SRV" = outpostd ] && h=" $(op_heap)"   # after the RSS sample: the forced GC must not shrink it first
  [ "$SRV" = outpostd ] && op_heap_profile "$RUN/results/$(basename "${RAW%.txt}")-outpostd-$PHASE-calls1000.heap"
  wait "$uac" 2>/dev/null
  stop_uas
  sum=$(python3 "$PEERS_DIR/tools/sipp_summary.py" "$d/stat.csv" /dev/null 2>/dev/null)
  usum=$(python3 "$PEERS_DIR/tools/sipp_summary.py" "$d/uas_stat.csv" /dev/null 2>/dev/null)
  log "mem server=$SRV phase=$PHASE what=calls1000 $m$h concurrent_uac=$cur$listed rate=$MEM_RATE hold_ms=$MEM_HOLD_MS" \
      "uac:$(echo "$sum" | tr ' ' '\n' | grep -E '^(TotalCallCreated|SuccessfulCall|FailedCall)=' | tr '\n' ' ')" \
      "uas:$(echo "$usum" | tr ' ' '\n' | grep -E '^(SuccessfulCall|FailedCall)=' | tr '\n' ' ')"
}

# ---------------------------------------------------------------- one server in one phase
bench_server() { # bench_server SERVER PHASE
  SRV=$1 PHASE=$2
  local cpus=0 rates=$FREE_RATES
  [ "$PHASE" = cap ] && { cpus=$CAP rates=$CAP_RATES; PHASE=cap$CAP; }
  cg_create "$SRV-$PHASE" "$cpus" || { log "info server=$SRV phase=$PHASE skipped=cgroup-setup-failed"; SRV=; return 1; }
  note "== $SRV, phase $PHASE: starting in $CG_DESC"
  local p; for p in 5060 5070 5080; do
    for _ in $(seq 20); do port_busy $p || break; sleep 0.5; done   # the server before may still be exiting (10 s at most)
    port_busy $p && { log "info server=$SRV phase=$PHASE skipped=$BENCH_IP:$p-in-use"; SRV=; return 1; }
  done
  "start_$SRV" || { log "info server=$SRV phase=$PHASE skipped=start-failed(see-$RUN)"; stop_server; return 1; }
  log "info server=$SRV phase=$PHASE cgroup=$CG_DESC socket=$(sock_skmem)"
  if [ "$MEM" = 1 ] && [ "$2" = "$MEM_PHASE" ]; then mem_at_1000_calls; fi
  local R
  if [ "$WARMUP" = 1 ]; then run_rate "${rates%% *}" warmup || { stop_server; return 1; }; fi
  for R in $rates; do   # up to the first failing rate: the knee runs below test it (and the rate under it) again
    run_rate "$R" 1 || { stop_server; return 1; }
    case "$LINE" in *FAIL) break;; esac
  done
  # knee steps again until each has KNEE_RUNS runs (bounded: 2 rounds; a rerun may move the knee down)
  local round todo
  for round in 1 2; do
    todo=$(python3 "$PY" knee "$RAW" "$PHASE" "$SRV" "$KNEE_RUNS")
    [ -n "$todo" ] || break
    for R in $todo; do
      note "knee: $SRV $PHASE $R/s once more"
      run_rate "$R" "k$round" || { stop_server; return 1; }
    done
  done
  if [ "$PROF" = 1 ] && [ "$SRV" = outpostd ] && [[ " $PROF_PHASE " == *" $2 "* ]]; then
    local knee; knee=$(python3 -B -c 'import sys; sys.path.insert(0, sys.argv[1]); import call_bench as c
s, *_ = c.load(sys.argv[2]); b, f, t = c.knee_of(s, sys.argv[3], "outpostd"); print(b or "")' "$BENCH" "$RAW" "$PHASE")
    knee=${PROF_RATE:-$knee}
    if [ -n "$knee" ]; then
      local pf top
      pf=$RUN/results/$(basename "${RAW%.txt}")-outpostd-$PHASE-r$knee.pprof
      top=${pf%.pprof}.top.txt
      wait_quiet 15 30
      run_step "$knee" prof 1 "$pf"
      if [ -s "$pf" ] && go tool pprof -top -nodecount=25 "$OPBIN" "$pf" > "$top" 2>/dev/null; then
        { echo; echo "--- same profile by cumulative time (go tool pprof -top -cum -nodecount=40) ---"
          go tool pprof -top -cum -nodecount=40 "$OPBIN" "$pf" 2>/dev/null | sed -n '/flat%/,$p'; } >> "$top"
        { echo; echo "--- allocations in the same 10 s by site (go tool pprof -top -sample_index=alloc_space -nodecount=40) ---"
          go tool pprof -top -sample_index=alloc_space -nodecount=40 "$OPBIN" "${pf%.pprof}.allocs.pprof" 2>/dev/null |
            sed -n '/flat%/,$p'; } >> "$top"
        log "prof server=outpostd phase=$PHASE rate=$knee seconds=10 file=$pf allocs=${pf%.pprof}.allocs.pprof top=$top"
      else
        note "WARNING: no usable profile in $pf"
      fi
    fi
  fi
  sleep 1
  mem_line after
  # outpostd: again once sipgo's transactions (Timer J/H, 32 s) are gone: what is still held then is per-call state
  [ "$SRV" = outpostd ] && { sleep 35; mem_line after35s; }
  stop_server
}

# ---------------------------------------------------------------- main
need_outpostd() { [[ " $SERVERS " == *" outpostd "* ]]; }
if need_outpostd; then
  build_outpostd || exit 1
fi
cg_detect || { note "call_bench: cannot cap CPU with cgroups here"; exit 1; }
for p in 5060 5070 5080; do port_busy $p && { note "call_bench: $BENCH_IP:$p already in use: another benchmark running? (BENCH_IP=127.0.0.5x)"; exit 1; }; done
mkdir -p "$RUN/results"
RAW=$RUN/results/call-$(date +%Y%m%d-%H%M).txt
[ -e "$RAW" ] && RAW=${RAW%.txt}-$$.txt
: > "$RAW"

if [ "$MEDIA" = 1 ]; then
  RTP_PKTS=$(python3 "$PY" media "$UAC_XML" "$UAS_XML" "$CALLMS" "$RUN/media") || { note "call_bench: cannot make the RTP scenarios"; exit 1; }
  STEP_UAC_XML=$RUN/media/uac_rtp.xml STEP_UAS_XML=$RUN/media/uas_rtp.xml
  UAC_MEDIA=(-mi "$BENCH_IP" -mp 30000) UAS_MEDIA=(-mi "$BENCH_IP" -mp 40000)
fi

log "# date: $(date '+%Y-%m-%d %H:%M %Z')"
log "# machine: $(nproc) x $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(uname -r), $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
log "# command: $CMDLINE"
log "# phases: $PHASES (cap = $CAP CPU per server; uncapped = cgroup without a limit)"
log "# step: $DUR s of call creation per run, calls held $CALLMS ms"
if [ "$MEDIA" = 1 ]; then
  log "# media: anchoring on: outpostd media.relay=true; kamailio proxy.cfg WITH_RTPENGINE + rtpengine (userspace, table=-1) in its cgroup; SIPp play_pcap_audio $RTP_PKTS RTP packets per leg and call (50 pps, G.711 PCMU, 172-byte RTP) from UAC and UAS, step needs rtp% >= 98"
else
  log "# media: anchoring off (signalling only: the servers never see RTP)"
fi
log "# rates: capped $CAP_RATES; uncapped $FREE_RATES; knee steps $KNEE_RUNS runs"
log "# servers: $SERVERS (each alone on udp:$BENCH_IP:5060; SIPp UAC $BENCH_IP:5080 dials $DID, UAS $BENCH_IP:5070)"
log "# sipp: $(sipp -v 2>/dev/null | grep -o 'v[0-9][0-9.]*' | head -1), $STEP_UAC_XML${UAC_MEDIA[*]:+ ${UAC_MEDIA[*]}} + $STEP_UAS_XML${UAS_MEDIA[*]:+ ${UAS_MEDIA[*]}}, -buff_size 4194304 -rp 1000 -recv_timeout 5000 -default_behaviors all,-abortunexp, uncapped, nice $BENCH_NICE"
log "# cpu: % of one core; srv_cpu = server process tree, other_cpu = rest of the box (incl. softirq), sirq_cpu = irq+softirq of the box"

for ph in $PHASES; do
  for s in $SERVERS; do
    bench_server "$s" "$ph"
    note "== $s ($ph) done after $(( $(date +%s) - T_START )) s"
  done
done
trap - INT TERM
cleanup
log "# elapsed: $(( $(date +%s) - T_START )) s"
echo
python3 "$PY" report "$RAW" "$RESULTS" "$CMDLINE"
echo "raw step lines: $RAW"
