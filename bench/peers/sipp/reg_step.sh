#!/bin/bash
# Rate-step Kamailio registrar (digest auth, SQLite subscribers, usrloc in memory) with SIPp.
# Usage: sipp/reg_step.sh [children=2] [dur_s=15] [rates...]
# CPU figures are % of ONE core (machine has 2); other_cpu = everything else on the box during the step.
# Pass criterion per step: failed < 0.5 % of created, median full-registration time (RTD3) < 50 ms,
# and SIPp actually reached >= 95 % of the target rate. All traffic on 127.0.0.1.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/peers/lib.sh
. "$HERE/../lib.sh"
CH=${1:-2}; DUR=${2:-15}; shift 2 || true
RATES=${*:-"250 500 1000 1500 2000 2500 3000 4000"}
"$PEERS_DIR/install.sh" sip-tester kamailio kamailio-sqlite-modules sqlite3 || exit 1
[ -s "$RUN/kamailio.sqlite" ] || "$PEERS_DIR/kamailio/mkdb.sh" "$RUN"
OUT=$RUN/reg_ch$CH; mkdir -p "$OUT"; RES=$OUT/results.txt; : > "$RES"
kam_stop; kam_start "$PEERS_DIR/kamailio/registrar.cfg" "$CH" || exit 1
KPID=$(cat "$RUN/kam.mainpid")
# warm-up: register all 1000 users once
( cd "$OUT" && timeout 60 sipp "$BENCH_IP:5060" -sf "$HERE/reg_auth.xml" -inf "$RUN/users.csv" -i "$BENCH_IP" -p 5080 \
   -m 1000 -r 200 -l 20000 -nostdin -recv_timeout 5000 -timeout 50 >/dev/null 2>&1 )
fails=0
for R in $RATES; do
 for attempt in 1 2; do
  wait_quiet 15 30
  M=$((R*DUR)); d=$OUT/r$R; rm -rf "$d"; mkdir -p "$d"; cd "$d" || exit 1
  k0=$(cpu_ticks "$KPID"); b0=$(sys_busy_ticks); s0=$(date +%s.%N)
  /usr/bin/time -f '%U %S %e' -o sipp.time timeout $((DUR*3+40)) sipp "$BENCH_IP:5060" -sf "$HERE/reg_auth.xml" \
     -inf "$RUN/users.csv" -i "$BENCH_IP" -p 5080 -m "$M" -r "$R" -rp 1000 -l 20000 -buff_size 4194304 \
     -nostdin -recv_timeout 5000 -timeout $((DUR*3+30)) -trace_stat -fd 1 -stf stat.csv \
     -trace_rtt -rtt_freq 100 -trace_err > sipp.out 2>&1
  k1=$(cpu_ticks "$KPID"); b1=$(sys_busy_ticks); s1=$(date +%s.%N)
  read -r su ss se < <(tail -1 sipp.time)
  rttf=$(find . -maxdepth 1 -name '*_rtt.csv' | sort | head -1)
  sum=$(python3 "$PEERS_DIR/tools/sipp_summary.py" stat.csv "$rttf")
  line=$(python3 - "$R" "$DUR" "$k0" "$k1" "$s0" "$s1" "$su" "$ss" "$se" "$HZ" "$sum" "$b0" "$b1" <<'PY'
import sys
R, DUR, k0, k1, s0, s1, su, ss, se, hz = sys.argv[1:11]
kv = dict(x.split('=') for x in sys.argv[11].split()); b0, b1 = int(sys.argv[12]), int(sys.argv[13])
R=int(R); wall=float(s1)-float(s0); hz=float(hz)
created=int(kv.get('TotalCallCreated',0)); ok=int(kv.get('SuccessfulCall',0)); bad=int(kv.get('FailedCall',0))
failpct=100.0*(created-ok)/max(1,created)
ach=created/float(se) if float(se)>0 else 0
kcpu=100.0*(int(k1)-int(k0))/hz/wall; scpu=100.0*(float(su)+float(ss))/float(se)
other=100.0*((b1-b0)/hz - (int(k1)-int(k0))/hz - (float(su)+float(ss)))/wall
p50=float(kv.get('rtd3_p50','nan'))
ok_step = failpct<0.5 and p50<50 and ach>=0.95*R and created>=R*int(DUR)
print(f"rate={R} achieved={ach:.0f}/s created={created} ok={ok} failed={bad} fail%={failpct:.3f} "
      f"retrans={kv.get('Retransmissions','?')} reg_p50={kv.get('rtd3_p50')}ms reg_p90={kv.get('rtd3_p90')}ms reg_p99={kv.get('rtd3_p99')}ms "
      f"r401_p50={kv.get('rtd1_p50')} r200_p50={kv.get('rtd2_p50')} "
      f"kam_cpu={kcpu:.0f}% sipp_cpu={scpu:.0f}% other_cpu={other:.0f}% sipp_wall={float(se):.1f}s {'PASS' if ok_step else 'FAIL'}")
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
echo "children=$CH results in $RES"
