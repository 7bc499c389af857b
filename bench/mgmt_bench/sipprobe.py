#!/usr/bin/env python3
"""Registers one user over UDP again and again until it succeeds, for
bench/mgmt_bench.sh: "from push start until a user only the new document
has can REGISTER".

usage: sipprobe.py TARGET_HOST:PORT USER PASSWORD READY_FILE DEADLINE_S [INTERVAL_MS=1]

Each probe is a full RFC 3261 digest registration (REGISTER -> 401 ->
REGISTER with MD5 credentials -> 200 or 403) from a fresh socket on a fresh
loopback source address 127.0.X.Y, so the registrar's per-source limit on
failed authentications (10 a minute by default) never blocks the prober.
A new probe starts INTERVAL_MS after the previous one ended (so the prober
does not take a whole core from the daemon being pushed to), which bounds
the resolution. READY_FILE is written after the first refused probe (the user is not yet
known), so the caller starts the push only once refusal was observed.
Prints one JSON line: first_ok_ns (CLOCK_REALTIME of the 200), last_fail_ns
(receipt of the last 403 before it), probes, fails, timeouts; exit 0 when
a 200 came before the deadline, 1 otherwise.
"""
import hashlib
import json
import os
import random
import re
import socket
import sys
import time


def md5(s):
    return hashlib.md5(s.encode()).hexdigest()


def request(target, user, src, cseq, callid, tag, branch, auth=None):
    host, port = target
    lines = [
        "REGISTER sip:%s:%d SIP/2.0" % (host, port),
        "Via: SIP/2.0/UDP %s:%d;branch=z9hG4bK%s;rport" % (src[0], src[1], branch),
        "Max-Forwards: 70",
        "From: <sip:%s@bench.local>;tag=%s" % (user, tag),
        "To: <sip:%s@bench.local>" % user,
        "Call-ID: %s" % callid,
        "CSeq: %d REGISTER" % cseq,
        "Contact: <sip:%s@%s:%d>" % (user, src[0], src[1]),
        "Expires: 60",
    ]
    if auth:
        lines.append("Authorization: " + auth)
    lines += ["Content-Length: 0", "", ""]
    return "\r\n".join(lines).encode()


def status_of(data):
    m = re.match(rb"SIP/2\.0 (\d{3})", data)
    return int(m.group(1)) if m else 0


def challenge(data):
    """The MD5 (or algorithm-less) WWW-Authenticate challenge's parameters."""
    for line in data.decode(errors="replace").split("\r\n"):
        name, _, value = line.partition(":")
        if name.strip().lower() != "www-authenticate":
            continue
        value = value.strip()
        if not value.lower().startswith("digest"):
            continue
        params = dict((k.lower(), v1 if v1 else v2) for k, v1, v2 in
                      re.findall(r'(\w+)\s*=\s*(?:"([^"]*)"|([^\s,]+))', value[6:]))
        if params.get("algorithm", "MD5").upper() == "MD5":
            return params
    return None


def final(sock, deadline):
    """Waits for a final response (>= 200); returns (status, data) or (0, b"")."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return 0, b""
        sock.settimeout(left)
        try:
            data, _ = sock.recvfrom(65535)
        except socket.timeout:
            return 0, b""
        st = status_of(data)
        if st >= 200:
            return st, data


def probe(target, user, password, n):
    """One registration; returns the final status (0 = no answer)."""
    src_ip = "127.0.%d.%d" % (1 + n // 250 % 250, 1 + n % 250)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((src_ip, 0))
        src = s.getsockname()
        callid, tag = "%x-%d@mgmt-bench" % (random.getrandbits(64), n), "t%d" % n
        s.sendto(request(target, user, src, 1, callid, tag, "a%dx%x" % (n, random.getrandbits(32))), target)
        st, data = final(s, time.monotonic() + 1.0)
        if st != 401:
            return st
        ch = challenge(data)
        if ch is None:
            return 0
        realm, nonce = ch.get("realm", ""), ch.get("nonce", "")
        uri = "sip:%s:%d" % target
        ha1, ha2 = md5("%s:%s:%s" % (user, realm, password)), md5("REGISTER:" + uri)
        auth = 'Digest username="%s", realm="%s", nonce="%s", uri="%s", algorithm=MD5' % (user, realm, nonce, uri)
        if "auth" in [q.strip() for q in ch.get("qop", "").split(",")]:
            cnonce, nc = "%x" % random.getrandbits(48), "00000001"
            resp = md5("%s:%s:%s:%s:auth:%s" % (ha1, nonce, nc, cnonce, ha2))
            auth += ', qop=auth, nc=%s, cnonce="%s", response="%s"' % (nc, cnonce, resp)
        else:
            auth += ', response="%s"' % md5("%s:%s:%s" % (ha1, nonce, ha2))
        if "opaque" in ch:
            auth += ', opaque="%s"' % ch["opaque"]
        s.sendto(request(target, user, src, 2, callid, tag, "b%dx%x" % (n, random.getrandbits(32)), auth), target)
        st, _ = final(s, time.monotonic() + 1.0)
        return st
    finally:
        s.close()


def main():
    if len(sys.argv) not in (6, 7):
        sys.exit(__doc__)
    interval = float(sys.argv[6]) / 1000 if len(sys.argv) == 7 else 0.001
    host, _, port = sys.argv[1].rpartition(":")
    target, user, password, ready, limit = (host, int(port)), sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
    deadline = time.monotonic() + limit
    out = {"first_ok_ns": 0, "last_fail_ns": 0, "probes": 0, "fails": 0, "timeouts": 0, "other": []}
    while time.monotonic() < deadline:
        st = probe(target, user, password, out["probes"])
        now = time.time_ns()
        out["probes"] += 1
        if st == 200:
            out["first_ok_ns"] = now
            break
        if st == 403:
            out["fails"] += 1
            out["last_fail_ns"] = now
            if out["fails"] == 1:
                with open(ready, "w") as f:
                    f.write("%d\n" % now)
        elif st == 0:
            out["timeouts"] += 1
        else:
            out["other"].append(st)
        time.sleep(interval)
    print(json.dumps(out))
    sys.exit(0 if out["first_ok_ns"] else 1)


if __name__ == "__main__":
    main()
