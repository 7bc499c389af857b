#!/bin/bash
# TLS against UDP registration rate: starts outpostd on 127.0.0.77 (UDP 5060 and TLS 5061, a
# generated config with USERS users, its own certificate made at first boot) and runs
# bench/regload against it RUNS times per transport, alternating UDP and TLS, each run
# registering every user once (REGISTER, 401, REGISTER with digest, 200) with WORKERS workers
# (one UDP socket or one kept TLS connection each). Prints each run and the medians.
# Usage: bench/regload.sh [USERS [WORKERS [RUNS]]]   (defaults 2000 16 3; bounded: 20 s per run)
set -u
USERS=${1:-2000} WORKERS=${2:-16} RUNS=${3:-3}
REPO=$(cd "$(dirname "$0")/.." && pwd)
RUN=$(mktemp -d /tmp/outpost-regload.XXXXXX)
IP=127.0.0.77 REALM=bench.local
trap 'kill $SPID 2>/dev/null; wait $SPID 2>/dev/null; rm -rf "$RUN"' EXIT
( cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$RUN/" ./cmd/outpostd ./bench/regload ) || exit 1
{
  printf '{"schema":1,"site":{"name":"bench","domain":"%s"},"sip":{"listen":["udp:%s:5060","tls:%s:5061"],' "$REALM" "$IP" "$IP"
  printf '"realm":"%s","min_expires":60,"max_expires":3600,"registrar":{"storm_rate":-1}},"users":[' "$REALM"
  for ((i = 0; i < USERS; i++)); do
    [ $i -gt 0 ] && printf ','
    printf '{"extension":"user%04d","password":"pw%04d"}' $i $i
  done
  printf ']}\n'
} > "$RUN/config.json"
mkdir -p "$RUN/data"
"$RUN/outpostd" --data "$RUN/data" --config "$RUN/config.json" --log-level warn > "$RUN/outpostd.log" 2>&1 &
SPID=$!
for ((t = 0; t < 100; t++)); do   # up to 20 s for the listeners
  (exec 3<>/dev/tcp/$IP/5061) 2>/dev/null && break
  kill -0 $SPID 2>/dev/null || { echo "outpostd exited:"; tail -20 "$RUN/outpostd.log"; exit 1; }
  sleep 0.2
done
echo "# bench/regload.sh $USERS $WORKERS $RUNS  $(date -u +%FT%TZ)  $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A rates
for ((r = 1; r <= RUNS; r++)); do
  for tr in udp tls; do
    port=5060; [ $tr = tls ] && port=5061
    line=$("$RUN/regload" -transport $tr -addr $IP:$port -realm $REALM -users "$USERS" -workers "$WORKERS" -timeout 20s) || echo "run $r $tr failed"
    echo "run $r $line"
    rates[$tr]+="$(sed -n 's/.* rate=\([0-9.]*\).*/\1/p' <<<"$line") "
  done
done
for tr in udp tls; do
  echo "median $tr $(tr ' ' '\n' <<<"${rates[$tr]}" | sed '/^$/d' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)] "/s"}')"
done
