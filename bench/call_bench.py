#!/usr/bin/env python3
"""Helpers of bench/call_bench.sh (standard library only).

  call_bench.py config IP REALM EXT PASSWORD GW_IP:PORT DID_RE TO OUT.json [N [MEDIA]]
                                            outpostd config: one user EXT, a PSTN gateway (trusted by IP) and one
                                            inbound DID rule DID_RE -> TO; N more users u0001.. (password
                                            p0001..) when N is given (bench/mem_bench.sh); MEDIA=1: every call
                                            anchored on the RTP relay (media.relay), MEDIA=PMIN-PMAX: the same on
                                            ports PMIN-PMAX (bench/relay_bench.sh)
  call_bench.py media UAC.xml UAS.xml CALL_MS OUTDIR
                                            RTP variant of the SIPp scenarios: OUTDIR/rtp.pcap (G.711 at 50 packets/s,
                                            see media_packets) and OUTDIR/uac_rtp.xml, uas_rtp.xml that play it;
                                            prints the packets per leg
  call_bench.py metric NAME [LABEL=VALUE]   (stdin: Prometheus text) sum of the samples of NAME (with that label)
  call_bench.py mem PID...                  "rss_kb=.. pss_kb=.. procs=.." summed over the PIDs
  call_bench.py heap                        (stdin: /debug/pprof/heap?debug=1) "heap_alloc_kb=.. heap_sys_kb=.. num_gc=.."
  call_bench.py count                       (stdin: outpostctl --json calls) number of calls in progress
  call_bench.py current STAT_CSV            SIPp's CurrentCall in the last line of a -trace_stat file
  call_bench.py line key=value...           one result line of a call-rate step (see step_line)
  call_bench.py knee RAW PHASE SERVER N     rates that still need runs so each knee step has N runs (see knee_todo)
  call_bench.py report RAW RESULTS_MD CMD   summary of a raw file + the marked section of RESULTS_MD
"""
import json
import os
import re
import statistics
import sys
import time


# ---------------------------------------------------------------- outpostd config
def cmd_config(ip, realm, ext, password, gw, did_re, to, out, more="0", media="0"):
    doc = {
        "schema": 1,
        "site": {"name": "callbench", "domain": realm},
        "sip": {
            "listen": [f"udp:{ip}:5060"],
            "realm": realm,
            "min_expires": 60,
            "max_expires": 3600,
            "digest": ["MD5"],            # SIPp 3.6 answers MD5 challenges
            "registrar": {"storm_rate": -1},
        },
        "users": [{"extension": ext, "password": password, "name": "SIPp UAS"}] +
                 [{"extension": f"u{i:04d}", "password": f"p{i:04d}"} for i in range(1, int(more) + 1)],
        # the SIPp UAC calls from this IP: outpostd trusts it as a PSTN gateway (no digest on INVITE, like the
        # Kamailio proxy) and routes the called DID with the inbound rules; only the IP of the target matters
        "pstn": {"gateways": [{"name": "sipp", "target": gw, "transport": "udp"}]},
        "inbound": [{"match": did_re, "to": to}],
    }
    if media == "1":
        # every call anchored: the relay rewrites both legs' SDP to its own ports and relays the RTP
        doc["media"] = {"relay": True}
    elif media not in ("", "0"):
        pmin, pmax = (int(p) for p in media.split("-"))
        doc["media"] = {"relay": True, "port_min": pmin, "port_max": pmax}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


# ---------------------------------------------------------------- media (MEDIA=1)
PTIME_MS = 20      # 50 packets/s per leg, G.711 µ-law (PT 0, what the scenarios' SDP offers), 160 bytes a packet
GUARD_MS = 100     # the stream ends this long before the BYE (see media_packets)
MEDIA_MIN_PCT = 98  # a MEDIA=1 step passes only if the server received this % of the RTP packets SIPp played


def media_packets(call_ms):
    """Packets each SIPp plays per call: the stream starts at the ACK (sent by the UAC, received by the UAS) and
    ends GUARD_MS before the UAC's BYE (-d CALL_MS after its ACK), so that neither side's last packets race the
    BYE that tears the relay session down: every packet played must then cross the server (rtp% of a step)."""
    return max(1, (int(call_ms) - GUARD_MS) // PTIME_MS)


def write_pcap(path, n):
    """n RTP packets PTIME_MS apart in a pcap SIPp's play_pcap_audio can replay (Ethernet + IPv4 + UDP): SIPp
    sends the UDP part from a raw socket, with [media_ip]:[auto_media_port] as source and the peer's SDP address
    as destination (it keeps only the port differences of the capture), and fills in the UDP checksum (the
    capture's is 0, as its arithmetic needs)."""
    import struct
    payload = b"\xff" * (8000 * PTIME_MS // 1000)      # µ-law silence
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for i in range(n):
        rtp = struct.pack("!BBHII", 0x80, 0x80 if i == 0 else 0x00, 1 + i, 160 * i, 0x0B0C0A11) + payload
        udp = struct.pack("!HHHH", 6000, 6000, 8 + len(rtp), 0) + rtp
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), i & 0xFFFF, 0, 64, 17, 0,
                         bytes([127, 0, 0, 1]), bytes([127, 0, 0, 1])) + udp
        frame = b"\x00" * 12 + b"\x08\x00" + ip
        t = i * PTIME_MS * 1000
        out.append(struct.pack("<IIII", t // 1000000, t % 1000000, len(frame), len(frame)) + frame)
    with open(path, "wb") as f:
        f.write(b"".join(out))


def rtp_scenario(src, dst, pcap, who):
    """The scenario of src, playing pcap for the call: the UAC once it sent the ACK, the UAS when the ACK arrives
    (an action of that recv, made mandatory: the ACK always comes, and a nop after an optional recv would make an
    early BYE unexpected). Each call announces and plays from its own port ([auto_media_port]: -mp + 4 per call),
    so every call is a stream of its own for the relays. Fails unless each anchor is found exactly once."""
    t = open(src).read()
    play = f'<action><exec play_pcap_audio="{pcap}"/></action>'
    edits = [("m=audio [media_port] ", "m=audio [auto_media_port] ")]
    if who == "uac":
        edits.append(("      CSeq: 1 ACK\n", None))   # anchor check only; the play goes after that send
    else:
        edits.append(('<recv request="ACK"\n        optional="true"\n        rtd="true"\n        crlf="true">\n  </recv>',
                      f'<recv request="ACK" rtd="true" crlf="true">\n    {play}\n  </recv>'))
    for old, new in edits:
        if t.count(old) != 1:
            sys.exit(f"call_bench.py media: {src}: expected one {old.strip()!r}")
        if new is not None:
            t = t.replace(old, new)
    if who == "uac":
        i = t.index("</send>", t.index("CSeq: 1 ACK")) + len("</send>")
        t = t[:i] + f"\n\n  <nop>\n    {play}\n  </nop>" + t[i:]
    t = t.replace("<scenario name=\"", f"<!-- generated by bench/call_bench.py media from {os.path.basename(src)} -->\n<scenario name=\"RTP: ", 1)
    with open(dst, "w") as f:
        f.write(t)


def cmd_media(uac, uas, call_ms, outdir):
    os.makedirs(outdir, exist_ok=True)
    n = media_packets(call_ms)
    pcap = os.path.join(os.path.abspath(outdir), "rtp.pcap")
    write_pcap(pcap, n)
    rtp_scenario(uac, os.path.join(outdir, "uac_rtp.xml"), pcap, "uac")
    rtp_scenario(uas, os.path.join(outdir, "uas_rtp.xml"), pcap, "uas")
    print(n)


def cmd_metric(name, label=""):
    """Sum of the samples of metric name (optionally only those with label k=v) in Prometheus text on stdin;
    "?" when there is none (the scrape failed)."""
    k, _, v = label.partition("=")
    total, seen = 0.0, False
    for line in sys.stdin:
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
        if not m or m.group(1) != name:
            continue
        if k and f'{k}="{v}"' not in (m.group(2) or ""):
            continue
        total += float(m.group(3)); seen = True
    print(f"{total:.0f}" if seen else "?")


# ---------------------------------------------------------------- probes
def cmd_mem(pids):
    rss = pss = n = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                m = re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M)
            r = int(m.group(1)) if m else 0
        except OSError:
            continue
        ps = 0
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                m = re.search(r"^Pss:\s+(\d+) kB", f.read(), re.M)
            ps = int(m.group(1)) if m else 0
        except OSError:
            pass
        rss += r; pss += ps; n += 1
    print(f"rss_kb={rss} pss_kb={pss} procs={n}")


def cmd_heap():
    t = sys.stdin.read()
    g = lambda k: (re.search(rf"^# {k} = (\d+)", t, re.M) or [None, "0"])[1]
    print(f"heap_alloc_kb={int(g('HeapAlloc')) // 1024} heap_sys_kb={int(g('HeapSys')) // 1024} num_gc={g('NumGC')}")


def cmd_count():
    try:
        print(len(json.load(sys.stdin)))
    except Exception:
        print("?")


def stat_rows(path):
    try:
        lines = [l.rstrip("\n") for l in open(path) if l.strip()]
    except OSError:
        return None, []
    if len(lines) < 2:
        return None, []
    hdr = lines[0].split(";")
    return hdr, [dict(zip(hdr, l.split(";"))) for l in lines[1:]]


def cmd_current(path):
    _, rows = stat_rows(path)
    print(rows[-1].get("CurrentCall", "?") if rows else "?")


def epoch(field):
    # "2026-11-29\t18:29:00.252705\t1795976940.252705" -> 1795976940.252705
    try:
        return float(field.split("\t")[-1])
    except (ValueError, AttributeError):
        return float("nan")


def creation_rate(path, m):
    """Calls/s at which the UAC created its m calls, from SIPp's -trace_stat file (one row a second, OutgoingCall(C)
    cumulative): calls created by the last row before the m-th call / that row's time (the row that reaches m
    mostly covers idle time after the last call). A short run (no such row after 1 s) uses m / the time of the row
    that reached m. nan when unknown."""
    _, rows = stat_rows(path)
    if not rows:
        return float("nan")
    t0 = epoch(rows[0].get("StartTime", ""))
    last = None
    for r in rows:
        try:
            c = int(r.get("OutgoingCall(C)", "0"))
        except ValueError:
            continue
        t = epoch(r.get("CurrentTime", "")) - t0
        if c >= m:
            if last and last[1] >= 1.0:
                return last[0] / last[1]
            return m / t if t > 0 else float("nan")
        last = (c, t)
    return last[0] / last[1] if last and last[1] > 0 else float("nan")


# ---------------------------------------------------------------- one step
def step_line(a):
    """Same arithmetic and pass criterion as bench/peers/sipp/proxy_step.sh (failed = UAC failed + UAS failed, < 0.5 %;
    all R*DUR calls created; UAC done within DUR+8 s), plus achieved >= 95 % of the target rate, measured as the
    rate at which the UAC created its calls (from its stat file), and a few diagnostics."""
    kv = dict(x.split("=", 1) for x in a["sum"].split())
    uk = dict(x.split("=", 1) for x in a["usum"].split())
    R = int(a["rate"]); DUR = int(a["dur"]); hz = float(a["hz"])
    k0, k1, u0, u1, b0, b1, q0, q1 = (int(a[k]) for k in ("k0", "k1", "u0", "u1", "b0", "b1", "q0", "q1"))
    wall = float(a["s1"]) - float(a["s0"])
    su, ss, se = float(a["su"]), float(a["ss"]), float(a["se"])
    created = int(kv.get("TotalCallCreated", 0)); ok = int(kv.get("SuccessfulCall", 0)); bad = int(kv.get("FailedCall", 0))
    ubad = int(uk.get("FailedCall", 0))
    failpct = 100.0 * (created - ok + ubad) / max(1, created)
    ach = creation_rate(a["stat"], R * DUR)
    scpu = 100.0 * (k1 - k0) / hz / wall
    ccpu = 100.0 * (su + ss) / se if se > 0 else 0
    ucpu = 100.0 * (u1 - u0) / hz / wall
    other = 100.0 * ((b1 - b0) / hz - (k1 - k0) / hz - (su + ss) - (u1 - u0) / hz) / wall
    sirq = 100.0 * (q1 - q0) / hz / wall
    us_call = (k1 - k0) / hz * 1e6 / ok if ok else float("nan")
    ok_step = (failpct < 0.5 and created >= R * DUR and se < DUR + 8 and ach == ach and ach >= 0.95 * R)
    media = ""
    if a.get("rtp0") or a.get("rtp1"):   # MEDIA=1: the RTP SIPp played for the successful calls must cross the server
        played = int(a["rtp_per_call"]) * ok
        if a["rtp0"].isdigit() and a["rtp1"].isdigit():
            got = int(a["rtp1"]) - int(a["rtp0"])
            pct = 100.0 * got / played if played else float("nan")
            media = f" rtp_pkts={got} rtp_played={played} rtp%={pct:.1f}"
            ok_step = ok_step and pct >= MEDIA_MIN_PCT
        else:
            media = f" rtp_pkts=? rtp_played={played} rtp%=?(metrics-unreadable)"
            ok_step = False
    drops = int(a["d1"]) - int(a["d0"]) if a["d0"].isdigit() and a["d1"].isdigit() else "?"
    rcverr = int(a["e1"]) - int(a["e0"])
    extra = (" " + a["extra"]) if a.get("extra") else ""
    return (f"server={a['server']} phase={a['phase']} run={a['run']} attempt={a['attempt']} rate={R} "
            f"achieved={ach:.0f}/s created={created} ok={ok} uac_failed={bad} uas_failed={ubad} "
            f"uas_ok={uk.get('SuccessfulCall', '?')} fail%={failpct:.3f} retrans={kv.get('Retransmissions', '?')} "
            f"uas_retrans={uk.get('Retransmissions', '?')} setup_p50={kv.get('rtd1_p50')}ms setup_p99={kv.get('rtd1_p99')}ms "
            f"bye_p50={kv.get('rtd2_p50')}ms bye_p99={kv.get('rtd2_p99')}ms "
            f"srv_cpu={scpu:.0f}% srv_us/call={us_call:.0f} uac_cpu={ccpu:.0f}% uas_cpu={ucpu:.0f}% other_cpu={other:.0f}% "
            f"sirq_cpu={sirq:.0f}% throttled={a['thr']} srv_sock_drops={drops} udp_rcvbuf_err={rcverr}{media}{extra} "
            f"uac_wall={se:.1f}s {'PASS' if ok_step else 'FAIL'}")


# ---------------------------------------------------------------- raw file parsing
def parse_kv(line):
    return dict(t.split("=", 1) for t in line.split() if "=" in t)


def num(s, default=float("nan")):
    m = re.match(r"-?[0-9.]+", s or "")
    return float(m.group(0)) if m else default


def load(raw):
    steps, mem, info, hdr, prof = [], [], [], {}, []
    for line in open(raw):
        line = line.rstrip("\n")
        if line.startswith("server="):
            kv = parse_kv(line); kv["_pass"] = line.endswith("PASS"); kv["_line"] = line
            steps.append(kv)
        elif line.startswith("mem "):
            mem.append(parse_kv(line))
        elif line.startswith("info "):
            info.append(parse_kv(line))
        elif line.startswith("prof "):
            prof.append(parse_kv(line))
        elif line.startswith("# ") and ": " in line:
            k, v = line[2:].split(": ", 1); hdr.setdefault(k, v)
    return steps, mem, info, hdr, prof


def runs_by_rate(steps, phase, server):
    """{rate: [final attempt of each run]}: a run that was repeated because it failed on a busy box counts
    by its last attempt; profiling and warm-up runs (run=prof, run=warmup) are not counted."""
    last = {}
    for s in steps:
        if s.get("phase") != phase or s.get("server") != server or s.get("run") in ("prof", "warmup"):
            continue
        last[(int(s["rate"]), s["run"])] = s
    out = {}
    for (r, _), s in sorted(last.items()):
        out.setdefault(r, []).append(s)
    return out


def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def rate_verdict(r, runs):
    """A rate passes when the median of its runs passes: median fail% < 0.5, median achieved >= 95 % (and, with
    media, median rtp% >= MEDIA_MIN_PCT); a single
    run passes by its own verdict (which also checks created and the UAC's wall time)."""
    if len(runs) == 1:
        return runs[0]["_pass"]
    media_ok = all("rtp%" not in x for x in runs) or med([num(x.get("rtp%")) for x in runs]) >= MEDIA_MIN_PCT
    return (med([num(x["fail%"]) for x in runs]) < 0.5 and med([num(x["achieved"]) for x in runs]) >= 0.95 * r
            and media_ok and sum(x["_pass"] for x in runs) * 2 >= len(runs))


def knee_of(steps, phase, server):
    """(best, fail, table): best = highest rate with every lower rate passing (by medians), fail = the lowest
    failing rate above it (None: knee not reached), table = {rate: (verdict, runs)}."""
    rr = runs_by_rate(steps, phase, server)
    table = {r: (rate_verdict(r, runs), runs) for r, runs in rr.items()}
    best = None
    for r in sorted(table):
        if not table[r][0]:
            break
        best = r
    fail = next((r for r in sorted(table) if not table[r][0] and (best is None or r > best)), None)
    return best, fail, table


def knee_todo(raw, phase, server, n):
    steps, *_ = load(raw)
    best, fail, table = knee_of(steps, phase, server)
    todo = []
    for r in (best, fail):
        if r is not None and len(table[r][1]) < int(n):
            todo.append(r)
    print(" ".join(str(r) for r in todo))


# ---------------------------------------------------------------- report
def fmt_mem(kb):
    return f"{int(kb) / 1024:.1f} MiB"


def summarize(raw):
    steps, mem, info, hdr, prof = load(raw)
    phases = []
    for s in steps + info + mem:
        p = s.get("phase")
        if p and p not in phases:
            phases.append(p)
    res = {}
    for p in phases:
        for srv in ("kamailio", "outpostd"):
            best, fail, table = knee_of(steps, p, srv)
            ms = {m.get("what"): m for m in mem if m.get("phase") == p and m.get("server") == srv}
            inf = {}
            for i in info:
                if i.get("phase") == p and i.get("server") == srv:
                    inf.update(i)
            if table or ms or inf:
                res[(p, srv)] = dict(best=best, fail=fail, table=table, mem=ms, info=inf)
    return steps, hdr, prof, phases, res


def med_of(runs, key):
    return med([num(x.get(key)) for x in runs])


def media_on(hdr):
    """Whether the run anchored media (MEDIA=1); runs before the "media" header line never did."""
    return hdr.get("media", "").startswith("anchoring on")


def cap_label(p, hdr):
    return ("uncapped" if p == "uncapped" else f"{p[3:]} CPU") + (
        "; media anchored, RTP 2 × 50 pps per call (Kamailio + rtpengine)" if media_on(hdr) else "; anchoring off")


def cmd_report(raw, results_md, command):
    steps, hdr, prof, phases, res = summarize(raw)
    out = [f"== summary: call-rate steps, {hdr.get('step', '?')}, media {hdr.get('media', 'anchoring off').split(':')[0]} ({raw}) =="]
    rows = []
    for p in phases:
        line = {}
        for srv in ("kamailio", "outpostd"):
            x = res.get((p, srv))
            if not x:
                continue
            b, f, t = x["best"], x["fail"], x["table"]
            if b is not None:
                runs = t[b][1]
                knee = "" if f is not None else " (knee NOT reached: every step passed)"
                out.append(f"{p} {srv}: sustained {b} calls/s{knee} (runs {len(runs)}; median achieved "
                           f"{med_of(runs, 'achieved'):.0f}/s, fail {med_of(runs, 'fail%'):.3f} %, srv_cpu "
                           f"{med_of(runs, 'srv_cpu'):.0f} %, {med_of(runs, 'srv_us/call'):.0f} CPU-us/call, setup p50/p99 "
                           f"{med_of(runs, 'setup_p50'):.0f}/{med_of(runs, 'setup_p99'):.0f} ms, uac {med_of(runs, 'uac_cpu'):.0f} % "
                           f"+ uas {med_of(runs, 'uas_cpu'):.0f} %"
                           + (f", RTP {med_of(runs, 'rtp%'):.1f} % of played packets through the server" if "rtp%" in runs[0] else "") + ")"
                           + (f"; fails at {f}/s (runs {len(t[f][1])}, median fail {med_of(t[f][1], 'fail%'):.2f} %, "
                              f"achieved {med_of(t[f][1], 'achieved'):.0f}/s)" if f is not None else ""))
            else:
                sk = x["info"].get("skipped")
                out.append(f"{p} {srv}: no passing step" + (f" (skipped: {sk})" if sk else ""))
            out.append("  steps (rate: verdict, fail% per run): " + "  ".join(
                f"{r}:{'ok' if v else 'FAIL'}({','.join(str(round(num(s['fail%']), 2)) for s in runs)})"
                for r, (v, runs) in sorted(t.items())))
            line[srv] = x
        k, o = line.get("kamailio"), line.get("outpostd")
        ratio = "n/a"
        if k and o and k["best"] and o["best"]:
            ratio = f"{o['best'] / k['best']:.2f}"
            if o["fail"] is None and k["fail"] is not None:
                ratio = "≥ " + ratio
            elif o["fail"] is not None and k["fail"] is None:
                ratio = "≤ " + ratio
            elif o["fail"] is None and k["fail"] is None:
                ratio += " (neither knee reached)"
        cpu = ""
        if k and o:
            common = [r for r in k["table"] if k["table"][r][0] and r in o["table"] and o["table"][r][0]]
            if common:
                r = max(common)
                ku, ou = med_of(k["table"][r][1], "srv_us/call"), med_of(o["table"][r][1], "srv_us/call")
                if ku:
                    cpu = f"{ou:.0f} / {ku:.0f} µs at {r}/s ({ou / ku:.2f}×)"
        out.append(f"{p}: ratio outpostd/kamailio (sustained calls/s) {ratio}" + (f"; CPU per call outpostd/kamailio {cpu}" if cpu else ""))
        rows.append((p, k, o, ratio, cpu))
    memtxt = {}
    for (p, srv), x in res.items():
        m = x["mem"].get("calls1000")
        if m:
            memtxt.setdefault("_phases", set()).add(p)
            base = x["mem"].get("idle", {})
            t = (f"{p} {srv} at {m.get('concurrent_uac', '?')} concurrent calls (UAC view"
                 + (f"; outpostd lists {m.get('calls_listed')}" if srv == "outpostd" else "") + f"): "
                 f"ΣRSS {fmt_mem(m['rss_kb'])}, ΣPSS {fmt_mem(m['pss_kb'])} ({m.get('procs')} procs); idle before: "
                 f"ΣRSS {fmt_mem(base.get('rss_kb', 0))}, ΣPSS {fmt_mem(base.get('pss_kb', 0))}")
            if m.get("heap_alloc_kb"):
                t += f"; Go heap after a forced GC {fmt_mem(m['heap_alloc_kb'])}"
            memtxt[srv] = (m, base)
            out.append(t)
        for w, label in (("after", "after the steps"), ("after35s", "35 s after the steps")):
            a = x["mem"].get(w)
            if a:
                out.append(f"{p} {srv} {label}: ΣRSS {fmt_mem(a['rss_kb'])}, ΣPSS {fmt_mem(a['pss_kb'])}"
                           + (f", Go heap after a forced GC {fmt_mem(a['heap_alloc_kb'])}, calls listed {a.get('calls_listed')}"
                              if a.get("heap_alloc_kb") else ""))
    ptop = []
    for pr in prof:
        f = pr.get("top")
        if f and os.path.exists(f):
            top = open(f).read().rstrip("\n")
            st = [s for s in steps if s.get("run") == "prof" and s.get("phase") == pr.get("phase") and s.get("server") == "outpostd"]
            m = re.search(r"Total samples = ([0-9.]+)(ms|s)", top)
            seen = (float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)) if m else float("nan")
            acct = num(st[-1].get("srv_cpu")) / 100 * 10 if st else float("nan")
            head = (f"outpostd CPU profile, {pr.get('phase')}, {pr.get('rate')} calls/s, {pr.get('seconds')} s window "
                    f"(profile samples {seen:.2f} s; the kernel accounted ~{acct:.1f} s of CPU to outpostd over 10 s of that run"
                    + (f": {st[-1].get('fail%')} % failed, srv_cpu {st[-1].get('srv_cpu')}" if st else "") + f"): {pr.get('file')}")
            ptop.append((head, top))
            out.append(head)
            out.append("\n".join(top.splitlines()[5:22]))
    print("\n".join(out))
    if results_md and results_md != "-":
        update_results(results_md, raw, hdr, command, rows, memtxt, prof, ptop, steps, "\n".join(out))


BEGIN = "<!-- call_bench:begin (this section is rewritten by bench/call_bench.sh: rows are appended, the latest run's details replaced; edit outside the markers) -->"
END = "<!-- call_bench:end -->"
TABLE_HDR = ("| date | command | cap; media | Kamailio calls/s | Kamailio CPU | outpostd calls/s | outpostd CPU | outpostd / Kamailio "
             "| CPU per call outpostd / Kamailio | memory at 1000 calls: Kamailio ΣPSS / ΣRSS; outpostd RSS |")


def update_results(path, raw, hdr, command, rows, memtxt, prof, ptop, steps, summary):
    def cell(x):
        if not x:
            return "not run"
        if x["best"] is None:
            return "none passed"
        return f"**{x['best']}**" + ("" if x["fail"] is not None else " (knee not reached)")

    def cpu(x):
        if not x or x["best"] is None:
            return "–"
        return f"{med_of(x['table'][x['best']][1], 'srv_cpu'):.0f} % of a core"

    km, om = memtxt.get("kamailio"), memtxt.get("outpostd")
    memphases = memtxt.get("_phases", set())
    memcell = (f"{fmt_mem(km[0]['pss_kb'])} / {fmt_mem(km[0]['rss_kb'])}" if km else "–") + "; " + \
              (f"{fmt_mem(om[0]['rss_kb'])}" if om else "–")
    new_rows = []
    for p, k, o, ratio, cpun in rows:
        new_rows.append(f"| {hdr.get('date', time.strftime('%F %H:%M'))} | `{command}` | {cap_label(p, hdr)} | {cell(k)} | {cpu(k)} | "
                        f"{cell(o)} | {cpu(o)} | {ratio} | {cpun or '–'} | {memcell if p in memphases else ('– (taken in another phase)' if memphases else 'not measured')} |")
    text = open(path).read() if os.path.exists(path) else "# Call benchmark: outpostd B2BUA vs Kamailio proxy\n\n"
    old = []
    if BEGIN in text and END in text:
        pre, rest = text.split(BEGIN, 1)
        body, post = rest.split(END, 1)
        old = [l for l in body.split("### Latest run", 1)[0].splitlines() if l.startswith("| ") and not l.startswith("| date ")]
    else:
        pre, post = text.rstrip("\n") + "\n\n", "\n"
    raw_lines = [l.rstrip("\n") for l in open(raw) if not l.startswith("prof ")]
    section = [
        BEGIN,
        "### Runs (bench/call_bench.sh)",
        "",
        "Sustained calls/s = the highest step with every lower step passing, a step's verdict being the median of its "
        "runs (each knee step, the last passing and the first failing rate, is run at least twice). CPU = the server's "
        "CPU at that step, % of one core. Memory: sum over the server's processes with ~1000 calls up "
        "(100 calls/s held 10 s), on a fresh server. Media: \"anchoring off\" (rows without a note predate MEDIA=1) = "
        "signalling only; \"media anchored\" (MEDIA=1) = outpostd's relay or Kamailio's rtpengine (in Kamailio's cgroup, "
        "its CPU and memory counted with Kamailio's) carries every call's RTP, 50 packets/s each way from SIPp, and a "
        "step also needs >= 98 % of the played packets to reach the server; memory then is of anchored calls without RTP.",
        "",
        TABLE_HDR,
        "|" + "---|" * TABLE_HDR.count(" | ") + "---|",
        *old,
        *new_rows,
        "",
        f"### Latest run ({hdr.get('date', '?')})",
        "",
        "```",
        summary,
        "```",
        "",
    ]
    for head, top in ptop:
        section += [f"{head} (`go tool pprof -top -nodecount=25`, then `-top -cum`):", "", "```", top, "```", ""]
    section += ["<details><summary>raw step lines of the latest run</summary>", "", "```", *raw_lines, "```", "", "</details>", END]
    with open(path + ".tmp", "w") as f:
        f.write(pre + "\n".join(section) + post)
    os.replace(path + ".tmp", path)
    print(f"section updated in {path}")


def main():
    if len(sys.argv) < 2:
        print(__doc__); sys.exit(2)
    c, a = sys.argv[1], sys.argv[2:]
    if c == "config":
        cmd_config(*a)
    elif c == "media":
        cmd_media(*a)
    elif c == "metric":
        cmd_metric(*a)
    elif c == "mem":
        cmd_mem(a)
    elif c == "heap":
        cmd_heap()
    elif c == "count":
        cmd_count()
    elif c == "current":
        cmd_current(*a)
    elif c == "line":
        print(step_line(dict(x.split("=", 1) for x in a)))
    elif c == "knee":
        knee_todo(*a)
    elif c == "report":
        cmd_report(*a)
    else:
        print(__doc__); sys.exit(2)


if __name__ == "__main__":
    main()
