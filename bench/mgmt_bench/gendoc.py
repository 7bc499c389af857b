#!/usr/bin/env python3
"""Writes an outpostd config document with N users for bench/mgmt_bench.sh.

usage: gendoc.py VARIANT N MGMT_LISTEN PKI_DIR > doc.json

VARIANT a: users user0000 .. user{N-1}, passwords "a-pwNNNN";
VARIANT b: users user0001 .. user{N},   passwords "b-pwNNNN".
So a and b both have N users but differ in every password, and each has
one user the other lacks (a: user0000, b: user{N}): every push of the
other variant is a real change (all HA1s, one user removed, one added).
SIP listens on 127.0.0.1 port 0 (UDP and TCP); the management section is
mutual TLS with the box certificate box.pem/box-key.pem and the CA ca.pem
from PKI_DIR (outpostctl pki init/issue).
"""
import json
import os
import sys


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("a", "b"):
        sys.exit(__doc__)
    variant, n, listen, pki = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    first = 0 if variant == "a" else 1
    users = [{"extension": "user%04d" % i, "password": "%s-pw%04d" % (variant, i)}
             for i in range(first, first + n)]

    def pem(name):
        with open(os.path.join(pki, name)) as f:
            return f.read()

    doc = {
        "schema": 1,
        "site": {"name": "mgmt-bench", "domain": "bench.local"},
        "sip": {"listen": ["udp:127.0.0.1:0", "tcp:127.0.0.1:0"], "realm": "bench.local",
                "min_expires": 1, "max_expires": 3600},
        "users": users,
        "management": {"listen": listen, "cert_pem": pem("box.pem"), "key_pem": pem("box-key.pem"),
                       "client_ca_pem": pem("ca.pem")},
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
