#!/bin/bash
# Registrar load benchmark: outpostd vs Kamailio at the same CPU cap, same SIPp load, one invocation.
#
# Usage: bench/reg_bench.sh [DUR_S=15] [CPU_CAP=0.5] [RATES...]
#   DUR_S    seconds per rate step (SIPp sends RATE*DUR_S registrations)
#   CPU_CAP  CPUs each server may use (cgroup cpu.max / cfs_quota; 0 = no cap, accounting only)
#   RATES    registration rates per second to step through (default 1000 2000 3000 4000 4500 5000 5500 6000 6500 7000 8000 10000 12000)
# Environment:
#   SERVERS="kamailio outpostd"  which servers, in this order     PEERS_DIR  peer harness (default bench/peers)
#   RUN=/tmp/outpost-bench       scratch dir (logs, SIPp files)   BENCH_IP   loopback address (127.0.0.51)
#   BUILD=1                      build bin/outpostd+outpostctl first (0 = use the existing binaries)
#   BENCH_NICE=-10               priority of the whole run (lib.sh); RESULTS=bench/RESULTS.md (- = do not write)
#
# For each server: start it on BENCH_IP:5060 inside a cgroup capped at CPU_CAP CPUs (Kamailio: 2 workers, the
# peers' registrar.cfg; outpostd: a generated config with the same 1000 users), register all 1000 users once,
# record memory, then step the rates exactly like bench/peers/sipp/reg_step.sh (same reg_auth.xml, -buff_size 4 MiB,
# pass = failed < 0.5 %, median registration < 50 ms, >= 95 % of the target rate; a failing step with
# other_cpu > 30 % is run again; stop after two failing steps). CPU figures are % of ONE core.
# Output: one line per step, a summary, bench/results/reg-YYYYMMDD-HHMM.txt (raw) and a row in bench/RESULTS.md.
# Time: each step is DUR_S of load plus up to 15 s waiting for a quiet box (wait_quiet); with the defaults a run
# is ~8-13 steps per server, about 10-15 min in all (bounded: every SIPp run has a timeout of 3*DUR_S+40 s).
# Needs root, sipp, kamailio (+ sqlite modules), sqlite3 (installed by bench/peers/install.sh when missing), python3; scratch files (logs, SIPp traces) in $RUN.
# shellcheck disable=SC2015  # the A && B || C lines are guards whose B is a test: C runs when A or B fails, as meant
set -u
case "${1:-}" in -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;; esac
CMDLINE="bench/reg_bench.sh $*"
for v in SERVERS BUILD RUN BENCH_IP BENCH_NICE PEERS_DIR GOGC GOMEMLIMIT GODEBUG; do   # record non-default environment
  [ -n "${!v+x}" ] && CMDLINE="$v=${!v} $CMDLINE"
done
REPO=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$REPO/bench
PEERS_DIR=${PEERS_DIR:-$BENCH/peers}
[ -f "$PEERS_DIR/lib.sh" ] || { echo "reg_bench: peer harness not found in $PEERS_DIR (set PEERS_DIR)" >&2; exit 2; }
export RUN=${RUN:-/tmp/outpost-bench}
DUR=${1:-15}; CAP=${2:-0.5}; shift 2 2>/dev/null || shift $#
RATES=${*:-"1000 2000 3000 4000 4500 5000 5500 6000 6500 7000 8000 10000 12000"}
SERVERS=${SERVERS:-"kamailio outpostd"}
BUILD=${BUILD:-1}
RESULTS=${RESULTS:-$BENCH/RESULTS.md}
USERS=1000 REALM=bench.local
case "$DUR" in ''|*[!0-9]*) echo "reg_bench: DUR_S must be whole seconds, got '$DUR'" >&2; exit 2;; esac
awk -v c="$CAP" 'BEGIN{exit !(c ~ /^[0-9]*\.?[0-9]+$/ && c >= 0)}' || { echo "reg_bench: bad CPU_CAP '$CAP'" >&2; exit 2; }
for r in $RATES; do case "$r" in ''|*[!0-9]*|0) echo "reg_bench: bad rate '$r'" >&2; exit 2;; esac; done
for s in $SERVERS; do case "$s" in kamailio|outpostd) ;; *) echo "reg_bench: unknown server '$s'" >&2; exit 2;; esac; done
"$PEERS_DIR/install.sh" sip-tester kamailio kamailio-sqlite-modules sqlite3 || exit 2   # the peers, when missing
for t in sipp kamailio sqlite3 python3 ss /usr/bin/time timeout; do
  command -v "$t" >/dev/null || { echo "reg_bench: $t is not installed" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "reg_bench: needs root (cgroups, SO_RCVBUFFORCE, renice)" >&2; exit 2; }
# shellcheck source=bench/peers/lib.sh
. "$PEERS_DIR/lib.sh"       # RUN, BENCH_IP, HZ, cpu_ticks, sys_busy_ticks, sys_sirq_ticks, wait_quiet, kam_start/kam_stop; renices us
SCEN=$PEERS_DIR/sipp/reg_auth.xml
CSV=$RUN/users.csv
CTL=$REPO/bin/outpostctl
SOCK=$RUN/outpost-data/outpostd.sock
# shellcheck source=bench/outpostd_lib.sh
. "$BENCH/outpostd_lib.sh"   # launch_outpostd, stop_outpostd (start_outpostd below is this script's own)
T_START=$(date +%s)

RAW=/dev/null                          # set in main, once the checks passed
log() { echo "$*" | tee -a "$RAW"; }   # everything in the raw file is also printed
note() { echo "$*" >&2; }             # progress, not recorded

# ---------------------------------------------------------------- cgroups (v2, or v1 "cpu" hierarchy)
CG_VER='' CG_ROOT='' CGS=()
cg_detect() {
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    CG_VER=2 CG_ROOT=/sys/fs/cgroup
    grep -qw cpu $CG_ROOT/cgroup.controllers || { note "cgroup v2 without the cpu controller"; return 1; }
    grep -qw cpu $CG_ROOT/cgroup.subtree_control || echo "+cpu" > $CG_ROOT/cgroup.subtree_control || return 1
  elif [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    CG_VER=1 CG_ROOT=/sys/fs/cgroup/cpu     # hybrid/legacy hierarchy: cpu controller on v1
  else
    note "no usable cpu cgroup controller"; return 1
  fi
}
cg_remove() { # cg_remove DIR: move leftovers (ours) to the root, then remove
  local d=$1 p
  [ -d "$d" ] || return 0
  local pids=(); mapfile -t pids 2>/dev/null < "$d/cgroup.procs"   # a snapshot: moving them changes the file
  for p in "${pids[@]}"; do echo "$p" > "$CG_ROOT/cgroup.procs" 2>/dev/null; done
  rmdir "$d" 2>/dev/null || note "WARNING: could not remove cgroup $d"
}
cg_create() { # cg_create NAME -> CG (path), capped at CAP CPUs
  CG=$CG_ROOT/outpost-bench-${BENCH_IP//./_}-$1   # per BENCH_IP: runs on other addresses may be going on
  if [ -d "$CG" ]; then
    [ -s "$CG/cgroup.procs" ] && { note "cgroup $CG still has processes ($(tr '\n' ' ' < "$CG/cgroup.procs")): another run?"; return 1; }
    rmdir "$CG" || return 1
  fi
  mkdir "$CG" || return 1
  CGS+=("$CG")
  local q; q=$(awk -v c="$CAP" 'BEGIN{printf "%d", c*100000}')
  if [ "$CG_VER" = 2 ]; then
    if [ "$q" -gt 0 ]; then echo "$q 100000" > "$CG/cpu.max"; else echo "max 100000" > "$CG/cpu.max"; fi || return 1
    CG_DESC="cgroup v2 $CG cpu.max='$(cat "$CG/cpu.max")'"
  else
    echo 100000 > "$CG/cpu.cfs_period_us" && { [ "$q" -gt 0 ] && echo "$q" > "$CG/cpu.cfs_quota_us" || echo -1 > "$CG/cpu.cfs_quota_us"; } || return 1
    CG_DESC="cgroup v1 $CG cpu.cfs_quota_us=$(cat "$CG/cpu.cfs_quota_us") cpu.cfs_period_us=$(cat "$CG/cpu.cfs_period_us")"
  fi
}
cg_throttle() { awk '/^nr_periods /{p=$2} /^nr_throttled /{t=$2} END{print p+0, t+0}' "$CG/cpu.stat"; }

# ---------------------------------------------------------------- small probes
udp_rcvbuf_errors() { awk '/^Udp: [0-9]/{print $6}' /proc/net/snmp; }
sock_skmem() { ss -uHamn "src $BENCH_IP:5060" 2>/dev/null | grep -o 'skmem:([^)]*)' | head -1; }
sock_drops() { sock_skmem | sed -n 's/.*,d\([0-9]*\)).*/\1/p'; }
port_busy() { ss -uHln "src $BENCH_IP:$1" 2>/dev/null | grep -q .; }
ctl_counters() { # registrar counters of outpostd: registered challenges auth_failures auth_blocked storm_refused bindings
  timeout 10 "$CTL" --socket "$SOCK" --timeout 5s --json status 2>/dev/null | python3 -c '
import json,sys
try:
    s=json.load(sys.stdin); r=s.get("registrar",{})
    print(r.get("registered",0), r.get("challenges",0), r.get("auth_failures",0), r.get("auth_blocked",0), r.get("storm_refused",0), s.get("bindings",0))
except Exception: print("? ? ? ? ? ?")'
}

# ---------------------------------------------------------------- servers
SRV='' SPID=''
start_kamailio() {
  # the peers' registrar.cfg reads its subscriber DB from /tmp/peers; point it at ours
  sed "s#sqlite:///tmp/peers/kamailio.sqlite#sqlite://$RUN/kamailio.sqlite#" "$PEERS_DIR/kamailio/registrar.cfg" > "$RUN/registrar.cfg"
  grep -q "sqlite://$RUN/kamailio.sqlite" "$RUN/registrar.cfg" || { note "registrar.cfg: DB URL not found"; return 1; }
  rm -f "$RUN/kam.pid" "$RUN/kam.mainpid"
  # join the capped cgroup first, then fork Kamailio: all its processes are born inside
  ( echo "$BASHPID" > "$CG/cgroup.procs" || exit 1; kam_start "$RUN/registrar.cfg" 2 ) || return 1
  SPID=$(cat "$RUN/kam.mainpid")
  local tree incg
  tree=$(ps -o pid= --ppid "$SPID" | wc -l); tree=$((tree+1)); incg=$(wc -l < "$CG/cgroup.procs")
  log "info server=kamailio workers=2 procs=$tree procs_in_cgroup=$incg version=$(kamailio -v 2>/dev/null | awk 'NR==1{print $3}')"
  [ "$tree" = "$incg" ] || { note "kamailio: only $incg of $tree processes are in $CG"; return 1; }
}
stop_kamailio() { kam_stop; }
start_outpostd() {
  rm -rf "$RUN/outpost-data"; mkdir -p "$RUN/outpost-data"
  python3 "$BENCH/reg_bench.py" config "$BENCH_IP" "$REALM" "$USERS" "$RUN/outpost-bench.json" || return 1
  launch_outpostd "$REPO/bin/outpostd" "$RUN/outpost-bench.json" "$RUN/outpostd.log" || return 1
  echo "$ST" > "$RUN/outpostd.status.json"
  local gmp rev
  # what the daemon runs with after start-up (it lowers GOMAXPROCS itself under a sub-CPU quota)
  gmp=$(python3 -c 'import json,sys; print(json.load(sys.stdin).get("gomaxprocs","?"))' < "$RUN/outpostd.status.json")
  rev=$(go version -m "$REPO/bin/outpostd" 2>/dev/null | awk '$2=="vcs.revision"{r=substr($3,1,12)} $2=="vcs.modified"{m=$3} END{print r (m=="true"?"+dirty":"")}')
  log "info server=outpostd gomaxprocs=${gmp:-?} GOGC=${GOGC:-unset(outpostd:200)} GOMEMLIMIT=${GOMEMLIMIT:-none} nproc=$(nproc)" \
      "rev=${rev:-none} bin_sha256=$(sha256sum "$REPO/bin/outpostd" | cut -c1-12) bin_mtime=$(date -r "$REPO/bin/outpostd" +%FT%H:%M)" \
      "$(go version "$REPO/bin/outpostd" 2>/dev/null | awk '{print "go=" $2}')"
}
stop_server() {
  case "$SRV" in kamailio) stop_kamailio;; outpostd) stop_outpostd;; esac
  SRV='' SPID=''
}
cleanup() {
  trap - EXIT INT TERM
  stop_server
  local c; for c in "${CGS[@]}"; do cg_remove "$c"; done
}
trap cleanup EXIT
trap 'note "interrupted"; echo "# interrupted after $(( $(date +%s) - T_START )) s" >> "$RAW" 2>/dev/null; exit 130' INT TERM

# ---------------------------------------------------------------- one server: warm-up, memory, rate steps
run_sipp_warmup() { # register every user once (as reg_step.sh), then check all got a 200
  local d=$RUN/reg/$SRV/warm; rm -rf "$d"; mkdir -p "$d"
  ( cd "$d" && timeout 60 sipp "$BENCH_IP:5060" -sf "$SCEN" -inf "$CSV" -i "$BENCH_IP" -p 5080 \
      -m $USERS -r 200 -l 20000 -nostdin -recv_timeout 5000 -timeout 50 -trace_stat -fd 1 -stf stat.csv >/dev/null 2>&1 )
  local ok; ok=$(python3 "$PEERS_DIR/tools/sipp_summary.py" "$d/stat.csv" /dev/null 2>/dev/null | sed -n 's/.*SuccessfulCall=\([0-9]*\).*/\1/p')
  echo "${ok:-0}"
}
bench_server() {
  SRV=$1
  cg_create "$SRV" || { log "info server=$SRV skipped=cgroup-setup-failed"; SRV=; return 1; }
  note "== $SRV: starting in $CG_DESC"
  port_busy 5060 && { log "info server=$SRV skipped=$BENCH_IP:5060-in-use"; SRV=; return 1; }
  "start_$SRV" || { log "info server=$SRV skipped=start-failed(see-$RUN)"; stop_server; return 1; }
  local skm; skm=$(sock_skmem)
  log "info server=$SRV cgroup_cap=$CAP socket=${skm:-?}"
  local warm_ok; warm_ok=$(run_sipp_warmup)
  sleep 2   # let write-behind/persistence settle before measuring memory
  local extra_mem=""
  [ "$SRV" = outpostd ] && extra_mem=" bindings=$(ctl_counters | awk '{print $6}')"
  log "mem server=$SRV phase=warm warmup_ok=$warm_ok/$USERS $(xargs python3 "$BENCH/reg_bench.py" mem < "$CG/cgroup.procs")$extra_mem"
  [ "$warm_ok" = "$USERS" ] || note "WARNING: warm-up registered $warm_ok of $USERS users (see $RUN/reg/$SRV/warm)"
  local fails=0 R attempt line other d M k0 k1 b0 b1 q0 q1 s0 s1 su ss se t0 t1 dr0 dr1 e0 e1 c0 c1 extra rttf sum
  for R in $RATES; do
    for attempt in 1 2; do
      wait_quiet 15 30
      M=$((R*DUR)); d=$RUN/reg/$SRV/r$R-a$attempt; rm -rf "$d"; mkdir -p "$d"
      [ "$SRV" = outpostd ] && c0=$(ctl_counters)
      read -r t0 tt0 < <(cg_throttle)
      dr0=$(sock_drops); e0=$(udp_rcvbuf_errors); q0=$(sys_sirq_ticks)
      k0=$(cpu_ticks "$SPID"); b0=$(sys_busy_ticks); s0=$(date +%s.%N)
      ( cd "$d" && /usr/bin/time -f '%U %S %e' -o sipp.time timeout $((DUR*3+40)) sipp "$BENCH_IP:5060" -sf "$SCEN" \
          -inf "$CSV" -i "$BENCH_IP" -p 5080 -m $M -r "$R" -rp 1000 -l 20000 -buff_size 4194304 \
          -nostdin -recv_timeout 5000 -timeout $((DUR*3+30)) -trace_stat -fd 1 -stf stat.csv \
          -trace_rtt -rtt_freq 100 -trace_err > sipp.out 2>&1 )
      k1=$(cpu_ticks "$SPID"); b1=$(sys_busy_ticks); s1=$(date +%s.%N)
      q1=$(sys_sirq_ticks); e1=$(udp_rcvbuf_errors); dr1=$(sock_drops)
      read -r t1 tt1 < <(cg_throttle)
      extra=""
      if [ "$SRV" = outpostd ]; then
        c1=$(ctl_counters)
        extra=$(python3 -c '
import sys
a, b = sys.argv[1].split(), sys.argv[2].split()
n = ("op_registered", "op_challenges", "op_auth_fail", "op_auth_blocked", "op_storm503")
print(" ".join(f"{k}=+{int(y)-int(x)}" if x.isdigit() and y.isdigit() else f"{k}=?" for k, x, y in zip(n, a, b)))' "$c0" "$c1")
      fi
      read -r su ss se < <(tail -1 "$d/sipp.time" 2>/dev/null); su=${su:-0} ss=${ss:-0} se=${se:-0}
      case "$se" in *[!0-9.]*|'') su=0 ss=0 se=0;; esac    # sipp killed by timeout: time(1) wrote a status line
      rttf=$(find "$d" -maxdepth 1 -name '*_rtt.csv' | sort | head -1)
      sum=$(python3 "$PEERS_DIR/tools/sipp_summary.py" "$d/stat.csv" "${rttf:-/dev/null}" 2>/dev/null)
      line=$(python3 "$BENCH/reg_bench.py" line server="$SRV" attempt=$attempt rate="$R" dur="$DUR" k0="$k0" k1="$k1" \
        s0="$s0" s1="$s1" su="$su" ss="$ss" se="$se" hz="$HZ" b0="$b0" b1="$b1" q0="$q0" q1="$q1" sum="$sum" \
        d0="${dr0:-x}" d1="${dr1:-x}" e0="$e0" e1="$e1" thr="$((tt1-tt0))/$((t1-t0))" extra="$extra") \
        || line="server=$SRV attempt=$attempt rate=$R error=summary-failed(see-$d) FAIL"
      log "$line"
      grep -q 'status 124' "$d/sipp.time" 2>/dev/null && note "WARNING: sipp hit its time limit (see $d)"
      kill -0 "$SPID" 2>/dev/null || { note "$SRV died during the step (see $RUN)"; log "info server=$SRV died_at_rate=$R"; stop_server; return 1; }
      other=$(echo "$line" | sed -n 's/.*other_cpu=\(-\?[0-9]*\)%.*/\1/p')
      case "$line" in *FAIL) [ "${other:-0}" -gt 30 ] && [ $attempt -eq 1 ] && { note "failing step with other_cpu=${other}%: once more"; sleep 5; continue; } ;; esac
      break
    done
    case "$line" in *FAIL) fails=$((fails+1)); [ $fails -ge 2 ] && break;; esac
  done
  sleep 1
  log "mem server=$SRV phase=after $(xargs python3 "$BENCH/reg_bench.py" mem < "$CG/cgroup.procs")"
  stop_server
}

# ---------------------------------------------------------------- main
if [[ " $SERVERS " == *" outpostd "* ]] && [ "$BUILD" != 0 ]; then
  note "building outpostd and outpostctl"
  ( cd "$REPO" && CGO_ENABLED=0 timeout 900 go build -trimpath -o bin/ ./cmd/outpostd ./cmd/outpostctl ) || {
    note "reg_bench: build failed (others mid-change?); retry later, or run the peer alone: SERVERS=kamailio $0 $*"; exit 1; }
fi
if [[ " $SERVERS " == *" outpostd "* ]]; then
  [ -x "$REPO/bin/outpostd" ] && [ -x "$CTL" ] || { note "reg_bench: bin/outpostd or bin/outpostctl missing"; exit 1; }
fi
cg_detect || { note "reg_bench: cannot cap CPU with cgroups here"; exit 1; }
port_busy 5080 && { note "reg_bench: $BENCH_IP:5080 (SIPp) already in use: another benchmark running?"; exit 1; }
mkdir -p "$RUN" "$BENCH/results"
RAW=$BENCH/results/reg-$(date +%Y%m%d-%H%M).txt
[ -e "$RAW" ] && RAW=${RAW%.txt}-$$.txt
: > "$RAW"
[ -s "$RUN/kamailio.sqlite" ] && [ -s "$CSV" ] || "$PEERS_DIR/kamailio/mkdb.sh" "$RUN" >&2 || exit 1

log "# date: $(date '+%Y-%m-%d %H:%M %Z')"
log "# machine: $(nproc) x $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(uname -r), $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
log "# command: $CMDLINE"
log "# cap: $CAP CPU$(awk -v c="$CAP" 'BEGIN{if (c == 0) print " (no cap, accounting only)"}')"
log "# step duration: $DUR s"
log "# rates: $RATES"
log "# servers: $SERVERS (each alone on udp:$BENCH_IP:5060, SIPp on $BENCH_IP:5080, $USERS users, realm $REALM)"
log "# sipp: $(sipp -v 2>/dev/null | grep -o 'v[0-9][0-9.]*' | head -1), scenario $SCEN, -buff_size 4194304 -rp 1000 -l 20000, uncapped, nice $BENCH_NICE"
log "# cpu: % of one core; srv_cpu = server process tree, other_cpu = rest of the box (incl. softirq), sirq_cpu = irq+softirq of the box"

for s in $SERVERS; do
  bench_server "$s"
  note "== $s done after $(( $(date +%s) - T_START )) s"
done
trap - INT TERM
cleanup
log "# elapsed: $(( $(date +%s) - T_START )) s"
echo
python3 "$BENCH/reg_bench.py" report "$RAW" "$RESULTS" "$CMDLINE" | tee -a "$RAW"
echo "raw step lines: $RAW"
