#!/bin/bash
# Rate-step Kamailio as a transaction-stateful, record-routing proxy between a SIPp UAC and a SIPp UAS.
# Usage: sipp/proxy_step.sh [children=2] [dur_s=15] [call_ms=1000] [rates...]
# UAC runs with -default_behaviors all,-abortunexp: a 180 overtaken by its 200 (reordered by the proxy's parallel
# UDP workers) is ignored like a real UA would; real failures still surface as recv timeouts (5 s).
# Call = INVITE/100/180/200/ACK, pause call_ms, BYE/200 (13 messages through the proxy).
# Pass per step: (UAC failed + UAS failed) < 0.5 % of created calls and UAC reached >= 95 % of the target rate.
# CPU figures are % of ONE core (box has 2); other_cpu = whole-box busy minus the measured processes (approx., +-15 %,
# /proc/stat is tick-sampled); softirq_cpu is informational (loopback delivery; mostly already inside process sys time).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/peers/lib.sh
. "$HERE/../lib.sh"
CH=${1:-2}; DUR=${2:-15}; CALLMS=${3:-1000}; shift 3 || true
RATES=${*:-"250 500 750 1000 1250 1500 2000"}
"$PEERS_DIR/install.sh" sip-tester kamailio || exit 1
OUT=$RUN/proxy_ch$CH; mkdir -p "$OUT"; RES=$OUT/results.txt; : > "$RES"
kam_stop; kam_start "$PEERS_DIR/kamailio/proxy.cfg" "$CH" -A "UAS_URI=\"sip:$BENCH_IP:5070\"" || exit 1
KPID=$(cat "$RUN/kam.mainpid")
fails=0
for R in $RATES; do
 for attempt in 1 2; do
  wait_quiet 15 30
  M=$((R*DUR)); d=$OUT/r$R; rm -rf "$d"; mkdir -p "$d"; cd "$d" || exit 1
  timeout $((DUR*3+60)) sipp -sf "$HERE/uas_rr.xml" -i "$BENCH_IP" -p 5070 -m "$M" -buff_size 4194304 -nostdin \
      -timeout $((DUR*3+50)) -trace_stat -fd 1 -stf uas_stat.csv -trace_err > uas.out 2>&1 &
  UPID=$!; sleep 0.5
  k0=$(cpu_ticks "$KPID"); u0=$(cpu_ticks "$UPID"); b0=$(sys_busy_ticks); Q0=$(sys_sirq_ticks); export Q0; s0=$(date +%s.%N)
  /usr/bin/time -f '%U %S %e' -o sipp.time timeout $((DUR*3+40)) sipp "$BENCH_IP:5060" -sf "$HERE/uac_rr.xml" -s bench \
     -i "$BENCH_IP" -p 5080 -m "$M" -r "$R" -rp 1000 -d "$CALLMS" -l 100000 -buff_size 4194304 -nostdin \
     -recv_timeout 5000 -default_behaviors all,-abortunexp -timeout $((DUR*3+30)) -trace_stat -fd 1 -stf stat.csv -trace_rtt -rtt_freq 100 -trace_err > sipp.out 2>&1
  sleep 1
  k1=$(cpu_ticks "$KPID"); u1=$(cpu_ticks "$UPID"); b1=$(sys_busy_ticks); Q1=$(sys_sirq_ticks); export Q1; s1=$(date +%s.%N)
  for _ in $(seq 1 20); do kill -0 "$UPID" 2>/dev/null || break; sleep 0.25; done
  kill -TERM "$UPID" 2>/dev/null; wait "$UPID" 2>/dev/null
  read -r su ss se < <(tail -1 sipp.time)
  rttf=$(find . -maxdepth 1 -name '*_rtt.csv' | sort | head -1)
  sum=$(python3 "$PEERS_DIR/tools/sipp_summary.py" stat.csv "$rttf")
  usum=$(python3 "$PEERS_DIR/tools/sipp_summary.py" uas_stat.csv /dev/null)
  line=$(python3 - "$R" "$DUR" "$k0" "$k1" "$s0" "$s1" "$su" "$ss" "$se" "$HZ" "$sum" "$b0" "$b1" "$u0" "$u1" "$usum" <<'PY'
import sys, os
R, DUR, k0, k1, s0, s1, su, ss, se, hz = sys.argv[1:11]
kv = dict(x.split('=') for x in sys.argv[11].split()); b0, b1 = int(sys.argv[12]), int(sys.argv[13])
u0, u1 = int(sys.argv[14]), int(sys.argv[15]); uk = dict(x.split('=') for x in sys.argv[16].split())
R=int(R); wall=float(s1)-float(s0); hz=float(hz)
created=int(kv.get('TotalCallCreated',0)); ok=int(kv.get('SuccessfulCall',0)); bad=int(kv.get('FailedCall',0))
ubad=int(uk.get('FailedCall',0))
failpct=100.0*(created-ok+ubad)/max(1,created)

kcpu=100.0*(int(k1)-int(k0))/hz/wall; scpu=100.0*(float(su)+float(ss))/float(se); ucpu=100.0*(u1-u0)/hz/wall
sirq=100.0*(int(os.environ['Q1'])-int(os.environ['Q0']))/hz/wall
other=100.0*((b1-b0)/hz - (int(k1)-int(k0))/hz - (float(su)+float(ss)) - (u1-u0)/hz)/wall
ok_step = failpct<0.5 and created>=R*int(DUR) and created/float(DUR) >= 0.95*R and float(se) < int(DUR)+8
print(f"rate={R} created={created} ok={ok} uac_failed={bad} uas_failed={ubad} uas_ok={uk.get('SuccessfulCall')} fail%={failpct:.3f} "
      f"retrans={kv.get('Retransmissions','?')} setup_p50={kv.get('rtd1_p50')}ms setup_p99={kv.get('rtd1_p99')}ms bye_p50={kv.get('rtd2_p50')}ms bye_p99={kv.get('rtd2_p99')}ms "
      f"kam_cpu={kcpu:.0f}% uac_cpu={scpu:.0f}% uas_cpu={ucpu:.0f}% softirq_cpu={sirq:.0f}% other_cpu={other:.0f}% uac_wall={float(se):.1f}s {'PASS' if ok_step else 'FAIL'}")
PY
)
  echo "attempt=$attempt $line" | tee -a "$RES"
  cd "$OUT" || exit 1
  other=$(echo "$line" | sed -n 's/.*other_cpu=\(-\?[0-9]*\)%.*/\1/p')
  case "$line" in *FAIL) [ "${other:-0}" -gt 30 ] && [ $attempt -eq 1 ] && { sleep 5; continue; } ;; esac
  break
 done
  case "$line" in *FAIL) fails=$((fails+1)); [ $fails -ge 2 ] && break;; esac
done
kam_stop
echo "children=$CH call_ms=$CALLMS results in $RES"
