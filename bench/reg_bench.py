#!/usr/bin/env python3
"""Helpers of bench/reg_bench.sh (no third-party modules).

  reg_bench.py config IP REALM N OUT.json   outpostd config: N users user0000.. / pw0000..
  reg_bench.py mem PID...                   "rss_kb=.. pss_kb=.. procs=.." summed over the PIDs
  reg_bench.py line key=value...            one result line of a SIPp rate step (see step_line)
  reg_bench.py report RAW RESULTS_MD CMD    summary of a raw file + row in the marked section of RESULTS_MD
"""
import json
import os
import re
import sys
import time


def cmd_config(ip, realm, n, out):
    doc = {
        "schema": 1,
        "site": {"name": "bench", "domain": realm},
        "sip": {
            "listen": [f"udp:{ip}:5060"],
            "realm": realm,
            "min_expires": 60,
            "max_expires": 3600,
            "digest": ["MD5", "SHA-256"],
            "registrar": {"storm_rate": -1},
        },
        "users": [{"extension": f"user{i:04d}", "password": f"pw{i:04d}"} for i in range(int(n))],
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


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


def step_line(a):
    """Same arithmetic and pass criterion as bench/peers/sipp/reg_step.sh, plus a few diagnostics.
    Keys: server attempt rate dur k0 k1 s0 s1 su ss se hz b0 b1 q0 q1 sum d0 d1 e0 e1 thr extra."""
    kv = dict(x.split("=", 1) for x in a["sum"].split())
    R = int(a["rate"]); DUR = int(a["dur"]); hz = float(a["hz"])
    k0, k1, b0, b1, q0, q1 = (int(a[k]) for k in ("k0", "k1", "b0", "b1", "q0", "q1"))
    wall = float(a["s1"]) - float(a["s0"])
    su, ss, se = float(a["su"]), float(a["ss"]), float(a["se"])
    created = int(kv.get("TotalCallCreated", 0)); ok = int(kv.get("SuccessfulCall", 0)); bad = int(kv.get("FailedCall", 0))
    failpct = 100.0 * (created - ok) / max(1, created)
    ach = created / se if se > 0 else 0
    scpu_srv = 100.0 * (k1 - k0) / hz / wall
    scpu = 100.0 * (su + ss) / se if se > 0 else 0
    other = 100.0 * ((b1 - b0) / hz - (k1 - k0) / hz - (su + ss)) / wall
    sirq = 100.0 * (q1 - q0) / hz / wall
    p50 = float(kv.get("rtd3_p50", "nan"))
    us_per_reg = (k1 - k0) / hz * 1e6 / ok if ok else float("nan")
    ok_step = failpct < 0.5 and p50 < 50 and ach >= 0.95 * R and created >= R * DUR
    drops = int(a["d1"]) - int(a["d0"]) if a["d0"].isdigit() and a["d1"].isdigit() else "?"
    rcverr = int(a["e1"]) - int(a["e0"])
    extra = (" " + a["extra"]) if a.get("extra") else ""
    return (f"server={a['server']} attempt={a['attempt']} rate={R} achieved={ach:.0f}/s created={created} ok={ok} "
            f"failed={bad} fail%={failpct:.3f} retrans={kv.get('Retransmissions', '?')} "
            f"reg_p50={kv.get('rtd3_p50')}ms reg_p90={kv.get('rtd3_p90')}ms reg_p99={kv.get('rtd3_p99')}ms "
            f"r401_p50={kv.get('rtd1_p50')} r200_p50={kv.get('rtd2_p50')} "
            f"srv_cpu={scpu_srv:.0f}% srv_us/reg={us_per_reg:.0f} sipp_cpu={scpu:.0f}% other_cpu={other:.0f}% "
            f"sirq_cpu={sirq:.0f}% throttled={a['thr']} srv_sock_drops={drops} udp_rcvbuf_err={rcverr}{extra} "
            f"sipp_wall={se:.1f}s {'PASS' if ok_step else 'FAIL'}")


def parse_kv(line):
    return dict(t.split("=", 1) for t in line.split() if "=" in t)


def num(s, default=float("nan")):
    m = re.match(r"-?[0-9.]+", s or "")
    return float(m.group(0)) if m else default


def fmt_mem(kb):
    return f"{kb / 1024:.1f} MiB"


def cmd_report(raw, results_md, command):
    steps, mem, info, hdr = {}, {}, {}, {}
    for line in open(raw):
        line = line.strip()
        if line.startswith("server="):
            kv = parse_kv(line); kv["_pass"] = line.endswith("PASS")
            steps.setdefault(kv["server"], []).append(kv)
        elif line.startswith("mem "):
            kv = parse_kv(line); mem.setdefault(kv["server"], {})[kv["phase"]] = kv
        elif line.startswith("info "):
            kv = parse_kv(line); info.setdefault(kv["server"], {}).update(kv)
        elif line.startswith("# ") and ": " in line:
            k, v = line[2:].split(": ", 1); hdr[k] = v
    servers = [s for s in ("kamailio", "outpostd") if s in steps or s in info]
    best, knee = {}, {}
    out = [f"== summary: registrar rate steps at cpu cap {hdr.get('cap', '?')}, "
           f"{hdr.get('step duration', '?')} per step ({raw}) =="]
    for s in servers:
        st = steps.get(s, [])
        # sustained rate: the highest step below which every step passed (the last
        # attempt of each rate counts); a pass above a failed step is luck, not capacity
        final = {}
        for x in st:
            final[int(x["rate"])] = x
        b = None
        for r in sorted(final):
            if not final[r]["_pass"]:
                break
            b = final[r]
        best[s] = b
        # the knee is bracketed only if some step above the best passing one failed
        knee[s] = any(not x["_pass"] and int(x["rate"]) > (int(b["rate"]) if b else 0) for x in st)
        m = mem.get(s, {}).get("warm", {})
        ma = mem.get(s, {}).get("after", {})
        if s == "kamailio":
            memtxt = (f"sum PSS {fmt_mem(int(m.get('pss_kb', 0)))} (sum RSS {fmt_mem(int(m.get('rss_kb', 0)))}, "
                      f"{m.get('procs', '?')} procs) after warm-up; sum PSS {fmt_mem(int(ma.get('pss_kb', 0)))} after the steps")
        else:
            memtxt = (f"VmRSS {fmt_mem(int(m.get('rss_kb', 0)))} (PSS {fmt_mem(int(m.get('pss_kb', 0)))}) after warm-up; "
                      f"VmRSS {fmt_mem(int(ma.get('rss_kb', 0)))} after the steps")
        if b:
            out.append(f"{s}: sustained rate (highest step with every lower step passing) {b['rate']}/s{'' if knee[s] else ' (knee NOT reached: every step passed, add higher rates)'} (achieved {b['achieved']}, reg_p50 {b['reg_p50']}, "
                       f"srv_cpu {b['srv_cpu']}, {b['srv_us/reg']} CPU-us/registration, sipp_cpu {b['sipp_cpu']})")
        else:
            out.append(f"{s}: no passing step" + (" (not run: " + info.get(s, {}).get("skipped", "") + ")" if info.get(s, {}).get("skipped") else ""))
        out.append(f"  memory with 1000 bindings: {memtxt}")
        if st:
            out.append("  server CPU per step: " + "  ".join(
                f"{x['rate']}/s{'#2' if x['attempt'] == '2' else ''}:{x['srv_cpu']}{'' if x['_pass'] else '(FAIL)'}" for x in st))
        if s in info:
            extra = {k: v for k, v in info[s].items() if k not in ("server",)}
            out.append("  " + " ".join(f"{k}={v}" for k, v in extra.items()))
    k, o = best.get("kamailio"), best.get("outpostd")
    ratio, cpu_note = "n/a", ""
    if k and o:
        ratio = f"{int(o['rate']) / int(k['rate']):.2f}"
        if not knee["outpostd"] and knee["kamailio"]:
            ratio = "≥ " + ratio
        elif knee["outpostd"] and not knee["kamailio"]:
            ratio = "≤ " + ratio
        elif not knee["outpostd"] and not knee["kamailio"]:
            ratio += " (neither knee reached)"
        out.append(f"ratio outpostd/kamailio (highest passing rate at equal cap): {ratio}")
        # CPU per registration at the highest rate both passed (less noisy than the knee itself)
        common = set(x["rate"] for x in steps["kamailio"] if x["_pass"]) & set(x["rate"] for x in steps["outpostd"] if x["_pass"])
        if common:
            r = max(common, key=int)
            ku = num([x for x in steps["kamailio"] if x["_pass"] and x["rate"] == r][-1]["srv_us/reg"])
            ou = num([x for x in steps["outpostd"] if x["_pass"] and x["rate"] == r][-1]["srv_us/reg"])
            if ku:
                cpu_note = f"CPU/registration at {r}/s: outpostd {ou:.0f} µs, Kamailio {ku:.0f} µs ({ou / ku:.2f}×)"
                out.append(f"CPU per registration at {r}/s (highest step both passed): outpostd {ou:.0f} us, "
                           f"kamailio {ku:.0f} us, ratio {ou / ku:.2f}")
    else:
        out.append("ratio outpostd/kamailio: n/a (a server has no passing step or was not run)")
    print("\n".join(l for l in out if l))
    if results_md and results_md != "-":
        update_results(results_md, hdr, command, best, knee, mem, info, ratio, cpu_note, raw)


BEGIN = "<!-- reg_bench:begin (this section is rewritten by bench/reg_bench.sh: rows are appended, edit outside the markers) -->"
END = "<!-- reg_bench:end -->"
TABLE_HDR = ("| date | machine | command | cap | Kamailio max reg/s | Kamailio CPU | Kamailio mem (ΣPSS / ΣRSS) "
             "| outpostd max reg/s | outpostd CPU | outpostd VmRSS | outpostd / Kamailio | notes | raw |")


def update_results(path, hdr, command, best, knee, mem, info, ratio, cpu_note, raw):
    def cell_rate(b, s):
        if b:
            return f"**{b['rate']}**" if knee.get(s) else f"≥ {b['rate']} (knee not reached)"
        return "none" if s in ran else "not run"
    ran = set(mem) | {s for s, i in info.items() if "skipped" not in i}

    def cell_cpu(b):
        return f"{b['srv_cpu']} of a core" if b else "–"

    km = mem.get("kamailio", {}).get("warm")
    om = mem.get("outpostd", {}).get("warm")
    kmem = f"{fmt_mem(int(km['pss_kb']))} / {fmt_mem(int(km['rss_kb']))}" if km else "–"
    omem = fmt_mem(int(om["rss_kb"])) if om else "–"
    oi = info.get("outpostd", {})
    notes = []
    if oi.get("gomaxprocs"):
        notes.append(f"outpostd GOMAXPROCS={oi['gomaxprocs']} GOGC={oi.get('GOGC', '?')}")
    oa = mem.get("outpostd", {}).get("after")
    if oa:
        notes.append(f"outpostd VmRSS after the steps {fmt_mem(int(oa['rss_kb']))}")
    if oi.get("skipped"):
        notes.append(f"outpostd skipped: {oi['skipped']}")
    if cpu_note:
        notes.append(cpu_note)
    if hdr.get("rates"):
        notes.append(f"rates {hdr['rates']}")
    row = (f"| {hdr.get('date', time.strftime('%F %H:%M'))} | {hdr.get('machine', '?')} | `{command}` | "
           f"{hdr.get('cap', '?')} | {cell_rate(best.get('kamailio'), 'kamailio')} | {cell_cpu(best.get('kamailio'))} | {kmem} | "
           f"{cell_rate(best.get('outpostd'), 'outpostd')} | {cell_cpu(best.get('outpostd'))} | {omem} | {ratio} | "
           f"{'; '.join(notes)} | {os.path.relpath(raw, os.path.dirname(os.path.abspath(path)))} |")
    text = open(path).read() if os.path.exists(path) else "# Outpost benchmark results\n\n"
    rows = []
    if BEGIN in text and END in text:
        pre, rest = text.split(BEGIN, 1)
        body, post = rest.split(END, 1)
        rows = [l for l in body.splitlines() if l.startswith("| ") and not l.startswith("| date ")]
    else:
        pre, post = text.rstrip("\n") + "\n\n", "\n"
    rows.append(row)
    section = "\n".join([
        BEGIN,
        "## Registrar: outpostd vs Kamailio at equal CPU (bench/reg_bench.sh)",
        "",
        "Each server runs alone on the loopback address (127.0.0.51:5060) in a cgroup capped at *cap* CPUs; SIPp "
        "(uncapped, same scenario and settings as `bench/peers/sipp/reg_step.sh`: digest auth REGISTER → 401 → REGISTER → 200, "
        "1000 users, 4 MiB buffers) steps the registration rate. A step passes with < 0.5 % failed, median registration "
        "< 50 ms and ≥ 95 % of the target rate. *max reg/s* is the highest step with every lower step passing (sustained), *CPU* the server's CPU at that "
        "step (% of one core), memory is measured with 1000 bindings after the warm-up (Kamailio: sum over its "
        "processes; PSS counts its shared memory once). Raw per-step lines are in the file of the last column.",
        "",
        TABLE_HDR,
        "|" + "---|" * TABLE_HDR.count(" | ") + "---|",
        *rows,
        END,
    ])
    with open(path + ".tmp", "w") as f:
        f.write(pre + section + post)
    os.replace(path + ".tmp", path)
    print(f"row appended to {path}")


def main():
    if len(sys.argv) < 2:
        print(__doc__); sys.exit(2)
    c, a = sys.argv[1], sys.argv[2:]
    if c == "config":
        cmd_config(*a)
    elif c == "mem":
        cmd_mem(a)
    elif c == "line":
        print(step_line(dict(x.split("=", 1) for x in a)))
    elif c == "report":
        cmd_report(*a)
    else:
        print(__doc__); sys.exit(2)


if __name__ == "__main__":
    main()
