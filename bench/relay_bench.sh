#!/bin/bash
# Media relay benchmark: rtpengine (userspace, table=-1) vs media/relay (bench/relayd), driven by the same
# rtpblast generator (bench/rtpblast: ng offer/answer + paced 172-byte G.711 RTP, one shared clock for
# one-way latency), in one invocation, on loopback only.
#
# Usage: bench/relay_bench.sh [DUR_S=5] [CPU_CAP=0.5] [SESSION_STEPS...]
#   DUR_S          seconds of RTP per step (every rtpblast run is bounded by DUR_S + 2 s drain, timeout 3*DUR_S+60)
#   CPU_CAP        CPUs each relay may use in the capped phase (cgroup v1 cfs quota or v2 cpu.max)
#   SESSION_STEPS  sessions per max-rate step (x2 streams x 50 pps); default 250 500 1000 1500 2000 2500
# Environment: SERVERS="rtpengine relayd relayd-batch"  RUN=/tmp/outpost-relaybench  BENCH_IP=127.0.0.51  PEERS_DIR=bench/peers
#
# Per server: (1) memory: RSS of the idle server, then with 1000 sessions set up (rtpblast -keep), per call;
# (2) uncapped: latency at 100 sessions = 200 streams x 50 pps (10 kpps), and the max-rate steps;
# (3) capped at CPU_CAP: the same steps. relayd = media/relay with one ReadFromUDPAddrPort/WriteToUDPAddrPort per
# packet (the default); relayd-batch = the same with Config.Batch=16 (recvmmsg/sendmmsg). A direct A<->B run (no relay) gives the generator's own latency, which is
# subtracted ("added latency"). Pass = loss < 0.1 % and >= 97 % of the offered rate; steps stop after 2 failures.
# CPU figures are % of ONE core, measured on the server's process tree over the whole step (setup + drain included).
# relayd runs with GOMAXPROCS=1 under a cap below one CPU (as outpostd does), rtpengine with its 2 threads.
# Output: one line per step and a summary per server, also in bench/results/relay-DATE.txt.
# Time: about 8-9 minutes with the defaults (3 servers). Needs root (cgroups, renice), rtpengine (installed by bench/peers/install.sh when missing), go, python3.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;; esac
CMDLINE="bench/relay_bench.sh $*"
REPO=$(cd "$(dirname "$0")/.." && pwd)
PEERS_DIR=${PEERS_DIR:-$REPO/bench/peers}
[ -f "$PEERS_DIR/lib.sh" ] || { echo "relay_bench: peer harness not found in $PEERS_DIR (set PEERS_DIR)" >&2; exit 2; }
export RUN=${RUN:-/tmp/outpost-relaybench}
DUR=${1:-5}; CAP=${2:-0.5}; shift 2 2>/dev/null || shift $#
STEPS=${*:-"250 500 1000 1500 2000 2500"}
SERVERS=${SERVERS:-"rtpengine relayd relayd-batch"}
for s in $SERVERS; do case "$s" in rtpengine|relayd|relayd-batch) ;; *) echo "relay_bench: unknown server '$s'" >&2; exit 2;; esac; done
case "$DUR" in ''|*[!0-9]*|0) echo "relay_bench: DUR_S must be whole seconds" >&2; exit 2;; esac
for s in $STEPS; do case "$s" in ''|*[!0-9]*|0) echo "relay_bench: bad step '$s'" >&2; exit 2;; esac; [ "$s" -le 2500 ] || { echo "relay_bench: rtpblast allows at most 2500 sessions" >&2; exit 2; }; done
[ "$(id -u)" = 0 ] || { echo "relay_bench: needs root" >&2; exit 2; }
"$PEERS_DIR/install.sh" rtpengine-daemon || exit 2   # the peer, when missing
for t in rtpengine go python3 timeout; do command -v "$t" >/dev/null || { echo "relay_bench: $t not installed" >&2; exit 2; }; done
# shellcheck source=bench/peers/lib.sh
. "$PEERS_DIR/lib.sh"     # BENCH_IP, HZ, cpu_ticks, sys_busy_ticks, sys_sirq_ticks, wait_quiet; renices us
mkdir -p "$RUN" "$REPO/bench/results"
RAW=$REPO/bench/results/relay-$(date +%Y%m%d-%H%M%S).txt
log() { echo "$*" | tee -a "$RAW"; }
BLAST=$RUN/rtpblast RELAYD=$RUN/relayd
(cd "$REPO" && go build -o "$BLAST" ./bench/rtpblast) || exit 1
(cd "$REPO" && CGO_ENABLED=0 go build -tags relaybench -o "$RELAYD" ./bench/relayd) || exit 1

# ---- cgroups (v2 cpu.max, or the v1 cpu hierarchy as on this machine)
CG=
cg_make() { # cg_make NAME CAP -> CG
  local q; q=$(awk -v c="$2" 'BEGIN{printf "%d", c*100000}')
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu > /sys/fs/cgroup/cgroup.subtree_control
    CG=/sys/fs/cgroup/outpost-relaybench-$1; mkdir -p "$CG"
    if [ "$q" -gt 0 ]; then echo "$q 100000" > "$CG/cpu.max"; else echo "max 100000" > "$CG/cpu.max"; fi
  else
    CG=/sys/fs/cgroup/cpu/outpost-relaybench-$1; mkdir -p "$CG"
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
rss_kib() { local t=0 p; for p in $SPID $(pgrep -P "$SPID"); do t=$((t + $(awk '/^VmRSS/{print $2}' "/proc/$p/status" 2>/dev/null || echo 0))); done; echo $t; }

# run_one LABEL SERVER ARGS...: one rtpblast run, prints a result line
run_one() {
  local label=$1 srv=$2; shift 2
  wait_quiet 6 30 2>/dev/null
  local r0 b0 s0 r1 b1 s1 j
  r0=$(cpu_ticks "$SPID"); b0=$(sys_busy_ticks); s0=$(date +%s.%N)
  j=$(timeout $((3*DUR+60)) "$BLAST" -ip "$BENCH_IP" -ng "$NG" -dur "${DUR}s" -json "$@") || j='{"error":1}'
  r1=$(cpu_ticks "$SPID"); b1=$(sys_busy_ticks); s1=$(date +%s.%N)
  python3 - "$label" "$srv" "$j" "$r0" "$r1" "$b0" "$b1" "$s0" "$s1" "$HZ" <<'PY' | tee -a "$RAW"
import json, sys
label, srv, j = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
r0, r1, b0, b1 = map(int, sys.argv[4:8]); s0, s1, hz = map(float, sys.argv[8:11])
if 'error' in j:
    print(f"{label} server={srv} ERROR FAIL"); sys.exit()
wall = s1 - s0
srv_cpu = 100.0 * (r1 - r0) / hz / wall if j['mode'] != 'direct' else 0.0
gen = j['gen_cpu_pct_of_core']
other = 100.0 * ((b1 - b0) / hz - (r1 - r0) / hz - gen / 100.0 * (j['send_s'] + 2)) / wall
relayed = j['received'] / j['send_s']
ok = j['loss_pct'] < 0.1 and j['offered_pps'] >= 0.97 * j['streams'] * j['pps_per_stream']
print(f"{label} server={srv} sessions={j['sessions']} offered_pps={j['offered_pps']:.0f} relayed_pps={relayed:.0f} "
      f"loss%={j['loss_pct']:.4f} p50={j['lat_p50_ms']:.3f}ms p99={j['lat_p99_ms']:.3f}ms p999={j['lat_p999_ms']:.3f}ms "
      f"server_cpu={srv_cpu:.1f}% gen_cpu={gen:.0f}% other_cpu={other:.0f}% late_ticks={j['late_ticks']} {'PASS' if ok else 'FAIL'}")
PY
}
steps() { # steps PHASE SERVER
  local fails=0 S line
  for S in $STEPS; do
    line=$(run_one "$1 s=$S" "$2" -sessions "$S" -bidir)
    echo "$line"
    case "$line" in *FAIL) fails=$((fails+1)); [ $fails -ge 2 ] && break;; esac
  done
}

trap 'kill -TERM $SPID 2>/dev/null; cg_drop' EXIT
log "# $CMDLINE  $(date -Is)  $(nproc) CPU $(awk -F: '/model name/{print $2; exit}' /proc/cpuinfo)  kernel $(uname -r)  go $(go env GOVERSION)  rtpengine $(rtpengine --version 2>&1 | head -1)"
log "# DUR=${DUR}s CAP=$CAP steps=[$STEPS] BENCH_IP=$BENCH_IP"
for srv in $SERVERS; do
  # (1) memory per call
  start_server "$srv" 0 || exit 1
  sleep 0.5; m0=$(rss_kib)
  timeout 120 "$BLAST" -ip "$BENCH_IP" -ng "$NG" -sessions 1000 -dur 1s -keep -json >/dev/null
  m1=$(rss_kib)
  log "memory server=$srv idle_rss=${m0}KiB rss_1000_calls=${m1}KiB per_call_KiB=$(awk -v a="$m0" -v b="$m1" 'BEGIN{printf "%.1f", (b-a)/1000}')"
  stop_server
  # (2) uncapped
  start_server "$srv" 0 || exit 1
  run_one "baseline200" direct -direct -sessions 100 -bidir
  run_one "latency200" "$srv" -sessions 100 -bidir
  steps uncapped "$srv"
  stop_server
  # (3) capped
  start_server "$srv" "$CAP" || exit 1
  steps "cap$CAP" "$srv"
  stop_server
done
python3 - "$RAW" <<'PY' | tee -a "$RAW"
import re, sys
rows = [l.rstrip() for l in open(sys.argv[1]) if not l.startswith('#')]
def f(l, k):
    m = re.search(k + r'=([-0-9.]+)', l); return float(m.group(1)) if m else None
def srv_of(l):
    m = re.search(r'server=(\S+)', l); return m.group(1) if m else None
base, by = {}, {}
last_base = None
for l in rows:
    s = srv_of(l)
    if l.startswith('baseline200'): last_base = l; continue
    if s is None or s == 'direct': continue
    by.setdefault(s, []).append(l)
    if l.startswith('latency200'): base[s] = last_base
for srv, mine in by.items():
    out = [f"summary server={srv}"]
    lat = [l for l in mine if l.startswith('latency200')]
    if lat and base.get(srv):
        b = base[srv]
        out.append(f"added_p50={f(lat[0],'p50')-f(b,'p50'):.3f}ms added_p99={f(lat[0],'p99')-f(b,'p99'):.3f}ms "
                   f"cpu_per_kpps={f(lat[0],'server_cpu')/(f(lat[0],'relayed_pps')/1000):.2f}%")
    for ph in ('uncapped', 'cap'):
        st = [l for l in mine if l.startswith(ph)]
        p99 = [f(l,'relayed_pps') for l in st if f(l,'p99') < 10 and l.endswith('PASS')]
        loss = [f(l,'relayed_pps') for l in st if l.endswith('PASS')]
        out.append(f"{ph}: max_pps_p99<10ms={max(p99) if p99 else 0:.0f} max_pps_loss<0.1%={max(loss) if loss else 0:.0f}")
    mem = [l for l in mine if l.startswith('memory')]
    if mem: out.append(f"mem_per_call={f(mem[0],'per_call_KiB'):.1f}KiB")
    print(' '.join(out))
PY
log "raw results: $RAW"
