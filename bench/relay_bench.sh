#!/bin/bash
# Media relay benchmark: rtpengine (userspace, table=-1) vs media/relay (bench/relayd) and vs outpostd's real SIP
# path, driven by the same rtpblast generator (bench/rtpblast: paced 172-byte G.711 RTP, one shared clock for
# one-way latency), in one invocation, on loopback only.
#
# Usage: bench/relay_bench.sh [DUR_S=5] [CPU_CAP=0.5] [SESSION_STEPS...]
#   DUR_S          seconds of RTP per step (every rtpblast run is bounded by DUR_S + 2 s drain, timeout 3*DUR_S+60)
#   CPU_CAP        CPUs each relay may use in the capped phase (cgroup v1 cfs quota or v2 cpu.max)
#   SESSION_STEPS  sessions per uncapped max-rate step (x2 streams x 50 pps); default 250 500 1000 1500 2000 2500
# Environment: SERVERS="rtpengine relayd relayd-batch" (or outpostd)  CAP_STEPS=SESSION_STEPS (steps of the capped
#   phase)  REPS=1 (rounds: every server's phases once per round; the summary gives medians)  MEM=1 (memory phase,
#   first round, not for outpostd)  RUN=/tmp/outpost-relaybench  BENCH_IP=127.0.0.51  PEERS_DIR=bench/peers
#   OUTPOSTD_BIN (use this outpostd, outpostctl beside it; default: built from this tree)  SIP_RATE=250 (calls/s)
#   PERF_SESSIONS=N (perf record -g of the server, DUR_S-2 s inside its uncapped N-session step of round 1:
#   RUN/perf-SERVER-sN.data; that step's CPU figure then includes perf's overhead)
#
# Servers: rtpengine and relayd get their sessions from rtpblast over ng (offer/answer per session). outpostd gets
# them through its real SIP path: per step, SESSIONS calls SIPp UAC (BENCH_IP:5080, bench/sipp/relay_uac.xml) ->
# outpostd (BENCH_IP:5060, B2BUA, media.relay on, ports 40000-49999; config and REGISTER of user 1000 from the UAS
# as bench/call_bench.sh: bench/outpostd_lib.sh) -> SIPp UAS (BENCH_IP:5070, bench/sipp/relay_uas.xml), held for the
# step. The SDPs name the generator's sockets (A = BENCH_IP:38000 for every caller, B = BENCH_IP:38002 for every
# callee); each SIPp logs the relay address of the SDP it received, joined per call (From user) into a pairs file,
# and rtpblast -pairs sends the same streams through them. The CPU window is rtpblast's run for every server (for
# rtpengine/relayd it includes the ng setup, for outpostd the calls are up before it starts).
#
# Per server: (1) memory: RSS of the idle server, then with 1000 sessions set up (rtpblast -keep), per call;
# (2) uncapped: latency at 100 sessions = 200 streams x 50 pps (10 kpps; the 100-session step when STEPS has one),
# and the max-rate steps; (3) capped at CPU_CAP: CAP_STEPS. relayd = media/relay in its default configuration (on
# Linux the relay's pollers: package doc); relayd-batch = Config.Batch=16 (a goroutine per socket, recvmmsg/sendmmsg
# of up to 16). A direct A<->B run (no relay) gives the generator's own latency, which is subtracted ("added
# latency"). Pass = loss < 0.1 % and >= 97 % of the offered rate; steps stop after 2 failures (per round).
# CPU figures are % of ONE core, measured on the server's process tree over the generator's run (setup + drain
# included), and cpu_us_per_pkt = that CPU time / packets delivered; other_cpu = the rest of the box, load = loadavg.
# relayd runs with GOMAXPROCS=1 under a cap below one CPU (as outpostd does), rtpengine with its 2 threads.
# Output: one line per step and a summary per server, also in bench/results/relay-DATE.txt.
# Time: about 8-9 minutes with the defaults (3 servers). SIP path, rtpengine vs outpostd, 3 rounds (issue 16 item 5):
#   SERVERS="rtpengine outpostd" REPS=3 MEM=0 CAP_STEPS="250 375 500 625 750" bench/relay_bench.sh 5 0.5 100 500
# Needs root (cgroups, renice), rtpengine and sipp (installed by bench/peers/install.sh when missing), go, python3.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;; esac
CMDLINE="bench/relay_bench.sh $*"
REPO=$(cd "$(dirname "$0")/.." && pwd)
PEERS_DIR=${PEERS_DIR:-$REPO/bench/peers}
[ -f "$PEERS_DIR/lib.sh" ] || { echo "relay_bench: peer harness not found in $PEERS_DIR (set PEERS_DIR)" >&2; exit 2; }
export RUN=${RUN:-/tmp/outpost-relaybench}
DUR=${1:-5}; CAP=${2:-0.5}; shift 2 2>/dev/null || shift $#
STEPS=${*:-"250 500 1000 1500 2000 2500"}
CAP_STEPS=${CAP_STEPS:-$STEPS}
SERVERS=${SERVERS:-"rtpengine relayd relayd-batch"}
REPS=${REPS:-1} MEM=${MEM:-1} SIP_RATE=${SIP_RATE:-250}
for v in SERVERS CAP_STEPS REPS MEM OUTPOSTD_BIN SIP_RATE BENCH_IP; do [ -n "${!v+x}" ] && CMDLINE="$v=\"${!v}\" $CMDLINE"; done
for s in $SERVERS; do case "$s" in rtpengine|relayd|relayd-batch|outpostd) ;; *) echo "relay_bench: unknown server '$s'" >&2; exit 2;; esac; done
for n in "$DUR" "$REPS" "$SIP_RATE"; do case "$n" in ''|*[!0-9]*|0) echo "relay_bench: DUR_S, REPS and SIP_RATE must be positive integers" >&2; exit 2;; esac; done
for s in $STEPS $CAP_STEPS; do case "$s" in ''|*[!0-9]*|0) echo "relay_bench: bad step '$s'" >&2; exit 2;; esac; [ "$s" -le 2500 ] || { echo "relay_bench: rtpblast allows at most 2500 sessions" >&2; exit 2; }; done
[ "$(id -u)" = 0 ] || { echo "relay_bench: needs root" >&2; exit 2; }
"$PEERS_DIR/install.sh" rtpengine-daemon sip-tester || exit 2   # the peers, when missing
for t in rtpengine sipp ss go python3 timeout; do command -v "$t" >/dev/null || { echo "relay_bench: $t not installed" >&2; exit 2; }; done
# shellcheck source=bench/peers/lib.sh
. "$PEERS_DIR/lib.sh"     # BENCH_IP, HZ, cpu_ticks, sys_busy_ticks, sys_sirq_ticks, wait_quiet; renices us
mkdir -p "$RUN" "$REPO/bench/results"
RAW=$REPO/bench/results/relay-$(date +%Y%m%d-%H%M%S).txt
log() { echo "$*" | tee -a "$RAW"; }
note() { echo "$*" >&2; }
BLAST=$RUN/rtpblast RELAYD=$RUN/relayd
(cd "$REPO" && go build -o "$BLAST" ./bench/rtpblast) || exit 1
(cd "$REPO" && CGO_ENABLED=0 go build -tags relaybench -o "$RELAYD" ./bench/relayd) || exit 1
# outpostd through SIP (bench/outpostd_lib.sh): same user, DID and rule as bench/call_bench.sh
PY=$REPO/bench/call_bench.py SIPP_DIR=$REPO/bench/sipp
REALM=bench.local EXT=1000 EXT_PW=bench1000 DID=+15550001000 DID_RE='^\+1555000(\d{4})$'
OP_MEDIA=40000-49999 APORT=38000 BPORT=38002 PHASE=''
# shellcheck source=bench/outpostd_lib.sh
. "$REPO/bench/outpostd_lib.sh"
if [[ " $SERVERS " == *" outpostd "* ]]; then build_outpostd || exit 1; fi

# ---- cgroups (v2 cpu.max, or the v1 cpu hierarchy as on this machine)
CG=
cg_make() { # cg_make NAME CAP -> CG
  local q; q=$(awk -v c="$2" 'BEGIN{printf "%d", c*100000}')
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu > /sys/fs/cgroup/cgroup.subtree_control
    CG=/sys/fs/cgroup/outpost-relaybench-${BENCH_IP//./_}-$1; mkdir -p "$CG"
    if [ "$q" -gt 0 ]; then echo "$q 100000" > "$CG/cpu.max"; else echo "max 100000" > "$CG/cpu.max"; fi
  else
    CG=/sys/fs/cgroup/cpu/outpost-relaybench-${BENCH_IP//./_}-$1; mkdir -p "$CG"
    echo 100000 > "$CG/cpu.cfs_period_us"
    if [ "$q" -gt 0 ]; then echo "$q" > "$CG/cpu.cfs_quota_us"; else echo -1 > "$CG/cpu.cfs_quota_us"; fi
  fi
}
cg_drop() { [ -n "$CG" ] && [ -d "$CG" ] && rmdir "$CG" 2>/dev/null; CG=; }

# ---- servers: started inside cgroup $CG; SPID = the server's pid
SPID='' NG=''
start_server() { # start_server NAME CAP
  cg_make "$1" "$2"
  case $1 in
    rtpengine)
      NG=$BENCH_IP:22223
      ( echo "$BASHPID" > "$CG/cgroup.procs" || exit 97
        exec timeout 1800 rtpengine --config-file="$PEERS_DIR/rtpengine/rtpengine.conf" --config-section=bench \
          --interface="$BENCH_IP" --listen-ng="$NG" --pidfile="$RUN/rtpengine.pid" ) > "$RUN/rtpengine.log" 2>&1 &
      ;;
    outpostd)
      NG=''; PHASE=$1-cap$2
      start_outpostd || { stop_outpostd; return 1; }
      return 0
      ;;
    relayd|relayd-batch)
      NG=$BENCH_IP:22224
      local gmp=0 batch=0; awk -v c="$2" 'BEGIN{exit !(c > 0 && c < 1)}' && gmp=1
      [ "$1" = relayd-batch ] && batch=16
      ( echo "$BASHPID" > "$CG/cgroup.procs" || exit 97
        exec timeout 1800 "$RELAYD" -ng "$NG" -ip "$BENCH_IP" -ports 30000-49999 -gomaxprocs $gmp -batch $batch ) > "$RUN/$1.log" 2>&1 &
      ;;
  esac
  SPID=$!
  local _
  for _ in $(seq 1 50); do   # bounded: 5 s; timeout(1) execs into the server, so SPID is its parent
    sleep 0.1; kill -0 "$SPID" 2>/dev/null || { echo "$1 exited:"; tail -5 "$RUN/$1.log"; return 1; }
    python3 - "$NG" <<'PY' 2>/dev/null && return 0
import socket,sys
h,p=sys.argv[1].rsplit(':',1); s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.settimeout(0.2)
s.sendto(b"1 d7:command4:pinge",(h,int(p))); d=s.recv(100); sys.exit(0 if b"pong" in d else 1)
PY
  done
  echo "$1 not answering ng ping"; return 1
}
stop_server() { kill -TERM "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; sleep 0.3; cg_drop; }

# ---- outpostd: the step's calls through SIP (SIPp UAC -> outpostd -> SIPp UAS), held while rtpblast runs
SIP_UAC='' SIP_UAS=''
bound() { ss -uHln "src $BENCH_IP:$1" 2>/dev/null | grep -q .; }
lines() { if [ -f "$1" ]; then wc -l < "$1"; else echo 0; fi; }
sip_up() { # sip_up SESSIONS DIR: SESSIONS calls up, DIR/pairs = one "TO_B TO_A" line per call; 1 if not all came up
  local n=$1 d=$2 hold i
  rm -rf "$d"; mkdir -p "$d"
  hold=$(( (n + SIP_RATE - 1) / SIP_RATE + DUR + 4 ))   # set-up, then the step's DUR s of RTP, with margin
  ( cd "$d" && exec timeout $((hold + 60)) sipp -sf "$SIPP_DIR/relay_uas.xml" -i "$BENCH_IP" -p 5070 -mp 16100 \
      -key bport "$BPORT" -m "$n" -buff_size 4194304 -nostdin -timeout $((hold + 50)) -trace_logs -log_file uas.log \
      -trace_err > uas.out 2>&1 ) &
  SIP_UAS=$!
  for i in $(seq 1 50); do bound 5070 && break; sleep 0.1; done   # bounded: 5 s
  ( cd "$d" && exec timeout $((hold + 60)) sipp "$BENCH_IP:5060" -sf "$SIPP_DIR/relay_uac.xml" -s "$DID" -i "$BENCH_IP" \
      -p 5080 -mp 16000 -key aport "$APORT" -m "$n" -l "$n" -r "$SIP_RATE" -rp 1000 -d $((hold * 1000)) \
      -buff_size 4194304 -nostdin -recv_timeout 10000 -default_behaviors all,-abortunexp -timeout $((hold + 50)) \
      -trace_logs -log_file uac.log -trace_err > uac.out 2>&1 ) &
  SIP_UAC=$!
  for i in $(seq 1 $(( (n / SIP_RATE + 20) * 10 ))); do   # bounded: set-up time + 20 s
    [ "$(lines "$d/uac.log")" -ge "$n" ] && [ "$(lines "$d/uas.log")" -ge "$n" ] && break
    kill -0 "$SIP_UAC" 2>/dev/null || break
    sleep 0.1
  done
  join <(awk '$1 == "a" {print $2, $3}' "$d/uac.log" 2>/dev/null | sort) \
       <(awk '$1 == "b" {print $2, $3}' "$d/uas.log" 2>/dev/null | sort) | awk '{print $2, $3}' > "$d/pairs"
  [ "$(wc -l < "$d/pairs")" -eq "$n" ] || { note "outpostd: $(wc -l < "$d/pairs") of $n calls up (see $d)"; return 1; }
}
sip_down() { # the calls end by themselves (BYE after the hold); wait for both SIPps (bounded by their timeout(1))
  [ -n "$SIP_UAC" ] && wait "$SIP_UAC" 2>/dev/null
  [ -n "$SIP_UAS" ] && wait "$SIP_UAS" 2>/dev/null
  SIP_UAC='' SIP_UAS=''
}
rss_kib() { local t=0 p; for p in $SPID $(pgrep -P "$SPID"); do t=$((t + $(awk '/^VmRSS/{print $2}' "/proc/$p/status" 2>/dev/null || echo 0))); done; echo $t; }

# run_one LABEL SERVER SESSIONS ARGS...: one rtpblast run (outpostd: through SESSIONS calls set up by SIP), prints a
# result line
REP=1
run_one() {
  local label=$1 srv=$2 n=$3; shift 3
  wait_quiet 6 30 2>/dev/null
  local r0 b0 s0 r1 b1 s1 j load src=(-ng "$NG" -sessions "$n")
  if [ "$srv" = outpostd ]; then
    local d; d=$RUN/sip/r$REP-${label// /-}
    if sip_up "$n" "$d"; then src=(-pairs "$d/pairs" -aport "$APORT" -bport "$BPORT"); else src=(); fi
  fi
  load=$(cut -d' ' -f1 /proc/loadavg)
  local perf=''
  if [ -n "${PERF_SESSIONS:-}" ] && [ "$REP" = 1 ] && [ "$label" = "uncapped s=$PERF_SESSIONS" ] && [ "$srv" != direct ]; then
    ( sleep 1; exec timeout $((DUR + 10)) perf record -q -g -p "$SPID" -o "$RUN/perf-$srv-s$n.data" -- sleep $((DUR - 2)) ) >/dev/null 2>&1 &
    perf=$!
  fi
  r0=$(cpu_ticks "$SPID"); b0=$(sys_busy_ticks); s0=$(date +%s.%N)
  j='{"error":1}'
  [ ${#src[@]} -gt 0 ] && { j=$(timeout $((3*DUR+60)) "$BLAST" -ip "$BENCH_IP" "${src[@]}" -dur "${DUR}s" -json "$@") || j='{"error":1}'; }
  r1=$(cpu_ticks "$SPID"); b1=$(sys_busy_ticks); s1=$(date +%s.%N)
  [ "$srv" = outpostd ] && sip_down
  [ -n "$perf" ] && { wait "$perf"; echo "perf server=$srv sessions=$n file=$RUN/perf-$srv-s$n.data (perf report -i FILE --no-children)" >> "$RAW"; }
  python3 - "$label" "$srv" "$j" "$r0" "$r1" "$b0" "$b1" "$s0" "$s1" "$HZ" "$REP" "$load" <<'PY' | tee -a "$RAW"
import json, sys
label, srv, j = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
r0, r1, b0, b1 = map(int, sys.argv[4:8]); s0, s1, hz = map(float, sys.argv[8:11]); rep, load = sys.argv[11], sys.argv[12]
if 'error' in j:
    print(f"{label} server={srv} rep={rep} ERROR FAIL"); sys.exit()
wall = s1 - s0
srv_cpu = 100.0 * (r1 - r0) / hz / wall if srv != 'direct' else 0.0
us_pkt = 1e6 * (r1 - r0) / hz / j['received'] if srv != 'direct' and j['received'] else 0.0
gen = j['gen_cpu_pct_of_core']
other = 100.0 * ((b1 - b0) / hz - (r1 - r0) / hz - gen / 100.0 * (j['send_s'] + 2)) / wall
relayed = j['received'] / j['send_s']
ok = j['loss_pct'] < 0.1 and j['offered_pps'] >= 0.97 * j['streams'] * j['pps_per_stream']
print(f"{label} server={srv} rep={rep} sessions={j['sessions']} offered_pps={j['offered_pps']:.0f} relayed_pps={relayed:.0f} "
      f"loss%={j['loss_pct']:.4f} p50={j['lat_p50_ms']:.3f}ms p99={j['lat_p99_ms']:.3f}ms p999={j['lat_p999_ms']:.3f}ms "
      f"server_cpu={srv_cpu:.1f}% cpu_us_per_pkt={us_pkt:.2f} gen_cpu={gen:.0f}% other_cpu={other:.0f}% load={load} "
      f"late_ticks={j['late_ticks']} {'PASS' if ok else 'FAIL'}")
PY
}
steps() { # steps PHASE SERVER SESSIONS...
  local fails=0 S line ph=$1 srv=$2; shift 2
  for S in "$@"; do
    line=$(run_one "$ph s=$S" "$srv" "$S" -bidir)
    echo "$line"
    case "$line" in *FAIL) fails=$((fails+1)); [ $fails -ge 2 ] && break;; esac
  done
}

trap 'sip_down_now; kill -TERM $SPID 2>/dev/null; cg_drop' EXIT
sip_down_now() { local p; for p in $SIP_UAC $SIP_UAS; do kill -TERM "$p" 2>/dev/null; done; }
log "# $CMDLINE  $(date -Is)  $(nproc) CPU $(awk -F: '/model name/{print $2; exit}' /proc/cpuinfo)  kernel $(uname -r)  go $(go env GOVERSION)  rtpengine $(rtpengine --version 2>&1 | head -1)"
log "# DUR=${DUR}s CAP=$CAP steps=[$STEPS] cap_steps=[$CAP_STEPS] REPS=$REPS BENCH_IP=$BENCH_IP load=$(cut -d' ' -f1-3 /proc/loadavg)"
for REP in $(seq 1 "$REPS"); do
 for srv in $SERVERS; do
  # (1) memory per call (first round; not for outpostd: bench/mem_bench.sh measures its calls)
  if [ "$MEM" = 1 ] && [ "$REP" = 1 ] && [ "$srv" != outpostd ]; then
    start_server "$srv" 0 || exit 1
    sleep 0.5; m0=$(rss_kib)
    timeout 120 "$BLAST" -ip "$BENCH_IP" -ng "$NG" -sessions 1000 -dur 1s -keep -json >/dev/null
    m1=$(rss_kib)
    log "memory server=$srv idle_rss=${m0}KiB rss_1000_calls=${m1}KiB per_call_KiB=$(awk -v a="$m0" -v b="$m1" 'BEGIN{printf "%.1f", (b-a)/1000}')"
    stop_server
  fi
  # (2) uncapped; the latency run is the 100-session step when there is one
  start_server "$srv" 0 || exit 1
  run_one "baseline200" direct 100 -direct -bidir
  case " $STEPS " in *" 100 "*) ;; *) run_one "latency200" "$srv" 100 -bidir;; esac
  # shellcheck disable=SC2086  # word splitting of the step lists is meant
  steps uncapped "$srv" $STEPS
  stop_server
  # (3) capped
  start_server "$srv" "$CAP" || exit 1
  # shellcheck disable=SC2086
  steps "cap$CAP" "$srv" $CAP_STEPS
  stop_server
 done
done
python3 - "$RAW" "$CAP" <<'PY' | tee -a "$RAW"
import re, sys, statistics as st
rows = [l.rstrip() for l in open(sys.argv[1]) if not l.startswith('#')]
cap = sys.argv[2]
def f(l, k):
    m = re.search(r'\b' + k + r'=([-0-9.]+)', l); return float(m.group(1)) if m else None
def srv_of(l):
    m = re.search(r'server=(\S+)', l); return m.group(1) if m else None
med = lambda v: st.median(v) if v else float('nan')
base, by, mem = {}, {}, {}
last_base = None
for l in rows:
    s = srv_of(l)
    if l.startswith('baseline200'): last_base = l; continue
    if s is None or s == 'direct': continue
    if l.startswith('memory'): mem[s] = l; continue
    if l.startswith(('latency200', 'uncapped s=100 ')) and last_base: base.setdefault(s, []).append((l, last_base))
    m = re.match(r'(uncapped|cap\S*) s=(\d+) ', l)
    if m: by.setdefault((s, m.group(1), int(m.group(2))), []).append(l)
servers = sorted({k[0] for k in by} | set(base), key=lambda s: (s != 'rtpengine', s))
res = {}
for srv in servers:
    out = [f"summary server={srv} (medians over rounds)"]
    b = base.get(srv, [])
    if b:
        out.append(f"added_p50={med([f(l,'p50') - f(x,'p50') for l, x in b]):.3f}ms added_p99={med([f(l,'p99') - f(x,'p99') for l, x in b]):.3f}ms")
    for ph in ('uncapped', 'cap' + cap):
        best = 0
        for (s2, p2, n), ls in sorted(by.items()):
            if s2 != srv or p2 != ph: continue
            us = med([f(l, 'cpu_us_per_pkt') for l in ls if 'ERROR' not in l])
            passed = sum(l.endswith('PASS') for l in ls) * 2 > len(ls)
            pps = med([f(l, 'relayed_pps') for l in ls if 'ERROR' not in l])
            res[(srv, ph, n)] = us
            out.append(f"{ph} s={n}: cpu_us_per_pkt={us:.2f} relayed_pps={pps:.0f} loss%={med([f(l,'loss%') for l in ls if 'ERROR' not in l]):.4f} "
                       f"p99={med([f(l,'p99') for l in ls if 'ERROR' not in l]):.2f}ms pass={sum(l.endswith('PASS') for l in ls)}/{len(ls)}")
            if passed: best = max(best, pps)
        res[(srv, ph, 'max')] = best
        out.append(f"{ph}: max_pps_loss<0.1%={best:.0f}")
    if srv in mem: out.append(f"mem_per_call={f(mem[srv],'per_call_KiB'):.1f}KiB")
    print('\n  '.join(out))
for srv in servers:
    if srv == 'rtpengine' or 'rtpengine' not in servers: continue
    out = [f"ratio {srv}/rtpengine:"]
    for (s2, ph, n), v in sorted((k, v) for k, v in res.items() if k[0] == srv and k[1] == 'uncapped' and k[2] != 'max'):
        r = res.get(('rtpengine', ph, n))
        if r: out.append(f"cpu_per_pkt@{n * 100 / 1000:g}kpps={v / r:.2f}x")
    r, v = res.get(('rtpengine', 'cap' + cap, 'max')), res.get((srv, 'cap' + cap, 'max'))
    if r and v is not None: out.append(f"cap{cap}_max_pps_loss<0.1%={v / r:.2f}x")
    print(' '.join(out))
PY
log "raw results: $RAW"
