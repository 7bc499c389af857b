# shellcheck shell=bash
# outpostd as a benchmark server, shared by bench/call_bench.sh and bench/relay_bench.sh. Source it after setting:
#   REPO RUN BENCH_IP PEERS_DIR, PY (bench/call_bench.py), REALM EXT EXT_PW DID DID_RE, PHASE (log and file names),
#   CG (the cgroup directory outpostd is started in), log/note functions; optional OUTPOSTD_BIN, BUILD_TRIES [3],
#   OP_MEDIA ("1": anchor every call's media on the relay; "PMIN-PMAX": the same on those ports; unset or 0: no anchoring).
# Sets OPBIN CTL SOCK (build_outpostd) and SPID (start_outpostd).
# The config (bench/call_bench.py config): one user EXT, a PSTN gateway "sipp" with target BENCH_IP:5080 (the SIPp
# UAC, trusted by ip:port: no digest on its INVITE) and an inbound rule DID_RE -> EXT; EXT is REGISTERed once from
# BENCH_IP:5070, where the SIPp UAS listens, so every call from the UAC is two dialogs through the B2BUA to the UAS.
REG_XML=${REG_XML:-$PEERS_DIR/sipp/reg_auth.xml}
SOCK=$RUN/outpost-data/outpostd.sock

build_outpostd() { # OPBIN = OUTPOSTD_BIN, or outpostd built into RUN/bin (BUILD_TRIES attempts 120 s apart); CTL beside it
  if [ -n "${OUTPOSTD_BIN:-}" ]; then
    OPBIN=$OUTPOSTD_BIN
  else
    OPBIN=$RUN/bin/outpostd
    mkdir -p "$RUN/bin"
    local i
    for i in $(seq 1 "${BUILD_TRIES:-3}"); do
      note "building outpostd and outpostctl into $RUN/bin (try $i)"
      ( cd "$REPO" && CGO_ENABLED=0 timeout 900 go build -trimpath -o "$RUN/bin/" ./cmd/outpostd ./cmd/outpostctl ) && break
      [ "$i" -lt "${BUILD_TRIES:-3}" ] || { note "build of outpostd failed (tree mid-change?): retry later, or OUTPOSTD_BIN=..."; return 1; }
      note "build failed (tree mid-change?): retrying in 120 s"; sleep 120
    done
  fi
  CTL=$(dirname "$OPBIN")/outpostctl
  if [ ! -x "$OPBIN" ] || [ ! -x "$CTL" ]; then note "$OPBIN or $CTL missing"; return 1; fi
}
register_uas_binding() { # REGISTER user EXT once from BENCH_IP:5070 (where the UAS will listen), digest auth
  local d=$RUN/calls/$PHASE/outpostd/register; rm -rf "$d"; mkdir -p "$d"
  printf 'SEQUENTIAL\n%s;[authentication username=%s password=%s]\n' "$EXT" "$EXT" "$EXT_PW" > "$d/user.csv"
  ( cd "$d" && timeout 30 sipp "$BENCH_IP:5060" -sf "$REG_XML" -inf user.csv -i "$BENCH_IP" -p 5070 -m 1 -nostdin \
      -recv_timeout 5000 -timeout 20 -trace_stat -stf stat.csv > sipp.out 2>&1 )
  local b; b=$(timeout 10 "$CTL" --socket "$SOCK" --timeout 5s --json registrations 2>/dev/null)
  echo "$b" | grep -q "udp:$BENCH_IP:5070" || { note "outpostd: no binding of $EXT from $BENCH_IP:5070 after REGISTER: $b (see $d)"; return 1; }
}
launch_outpostd() { # launch_outpostd BIN CONFIG LOG: start BIN in cgroup CG (joined before exec, so the Go runtime sees the
  # limit from its first instruction) on a fresh RUN/outpost-data, wait until it answers status (at most 20 s) and listens
  # on udp:BENCH_IP:5060 -> SPID, ST (the status JSON)
  ( echo "$BASHPID" > "$CG/cgroup.procs" || exit 97
    exec "$1" --data "$RUN/outpost-data" --config "$2" --log-level warn
  ) > "$3" 2>&1 &
  SPID=$! ST=
  local i
  for i in $(seq 1 40); do   # bounded: 20 s
    sleep 0.5
    kill -0 "$SPID" 2>/dev/null || { note "outpostd exited:"; tail -20 "$3" >&2; SPID=; return 1; }
    ST=$(timeout 5 "$CTL" --socket "$SOCK" --timeout 2s --json status 2>/dev/null) && break
    ST=
  done
  [ -n "$ST" ] || { note "outpostd not ready after 20 s"; tail -20 "$3" >&2; return 1; }
  echo "$ST" | grep -q "udp:$BENCH_IP:5060" || { note "outpostd is not listening on udp:$BENCH_IP:5060: $ST"; return 1; }
}
start_outpostd() {
  rm -rf "$RUN/outpost-data"; mkdir -p "$RUN/outpost-data"
  # shellcheck disable=SC2016  # '$1' is the rule's replacement (first group), not a shell expansion
  python3 "$PY" config "$BENCH_IP" "$REALM" "$EXT" "$EXT_PW" "$BENCH_IP:5080" "$DID_RE" '$1' "$RUN/outpost-callbench.json" \
    0 "${OP_MEDIA:-}" || return 1
  launch_outpostd "$OPBIN" "$RUN/outpost-callbench.json" "$RUN/outpostd.$PHASE.log" || return 1
  local gmp rev
  gmp=$(echo "$ST" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("gomaxprocs","?"))')
  rev=$(echo "$ST" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("version","?"))')
  register_uas_binding || return 1
  log "info server=outpostd phase=$PHASE media=${OP_MEDIA:-none} gomaxprocs=${gmp:-?} GOGC=${GOGC:-unset(outpostd:200)} GOMEMLIMIT=${GOMEMLIMIT:-none}" \
      "version=${rev:-?} bin=$OPBIN bin_sha256=$(sha256sum "$OPBIN" | cut -c1-12) bin_mtime=$(date -r "$OPBIN" +%FT%H:%M)" \
      "$(go version "$OPBIN" 2>/dev/null | awk '{print "go=" $2}') binding=$EXT@udp:$BENCH_IP:5070 did=$DID"
}
stop_outpostd() {
  [ -n "$SPID" ] || return 0
  kill -TERM "$SPID" 2>/dev/null
  local i; for i in $(seq 1 100); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$SPID" 2>/dev/null && { note "outpostd did not stop in 10 s: SIGKILL"; kill -KILL "$SPID"; }
  wait "$SPID" 2>/dev/null
}
