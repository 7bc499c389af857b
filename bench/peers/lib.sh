# shellcheck shell=bash
# Common helpers for the peer benchmarks. Source it: . "$(dirname "$0")/../lib.sh"
PEERS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUN=${RUN:-/tmp/peers}
# dedicated loopback address (127.0.0.0/8 is all loopback) to avoid port clashes with other users of 127.0.0.1
BENCH_IP=${BENCH_IP:-127.0.0.51}
mkdir -p "$RUN"
# cpu_ticks PID -> utime+stime (clock ticks) summed over PID and all its descendants
cpu_ticks() { python3 "$PEERS_DIR/tools/proctree_cpu.py" "$@"; }
HZ=$(getconf CLK_TCK)
# The box may be shared with other workloads (seen: qemu VMs, Go builds eating 1-2 cores). Run the whole
# benchmark (servers + load generators, which inherit it) at raised priority so they win most CPU contention;
# set BENCH_NICE=0 to disable. other_cpu in every result line shows what the rest of the box still used.
BENCH_NICE=${BENCH_NICE:--10}
renice -n "$BENCH_NICE" -p $$ >/dev/null 2>&1 || true
kam_start() { # kam_start CFG CHILDREN [extra args]
  local cfg=$1 n=$2; shift 2
  kamailio -DD -E -f "$cfg" -l "udp:$BENCH_IP:5060" -n "$n" -m 512 -M 16 -P "$RUN/kam.pid" "$@" >"$RUN/kamailio.log" 2>&1 &
  echo $! > "$RUN/kam.mainpid"
  local _
  for _ in $(seq 1 50); do sleep 0.1; [ -s "$RUN/kam.pid" ] && break; done
  sleep 0.5
  kill -0 "$(cat "$RUN/kam.mainpid")" || { echo "kamailio failed"; tail -20 "$RUN/kamailio.log"; return 1; }
}
kam_stop() {
  local p; p=$(cat "$RUN/kam.mainpid" 2>/dev/null) || return 0
  kill -TERM "$p" 2>/dev/null
  local _
  for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  rm -f "$RUN/kam.pid" "$RUN/kam.mainpid"
}
# busy ticks of the whole machine (all CPUs): user+nice+system+irq+softirq+steal
sys_busy_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
# irq+softirq ticks: loopback UDP delivery is largely accounted here, not to any process, so it is
# reported separately (it is part of the cost of the traffic under test, not another tenant's load)
sys_sirq_ticks() { awk '/^cpu /{print $7+$8}' /proc/stat; }
# wait_quiet [max_wait_s=60] [max_other_pct=30]: the box is shared with other workloads; wait until the
# whole-machine busy CPU over a 3 s window is below max_other_pct (% of one core), or give up after max_wait_s.
wait_quiet() {
  local maxw=${1:-60} thr=${2:-30} t=0 a b pct
  while :; do
    a=$(sys_busy_ticks); sleep 3; b=$(sys_busy_ticks); t=$((t+3))
    pct=$(( (b-a)*100/(3*HZ) ))
    [ "$pct" -lt "$thr" ] && { echo "quiet: ${pct}% busy before step (waited ${t}s)" >&2; return 0; }
    [ "$t" -ge "$maxw" ] && { echo "WARNING: box still ${pct}% busy after ${t}s; running anyway" >&2; return 1; }
  done
}
