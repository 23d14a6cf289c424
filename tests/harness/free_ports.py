#!/usr/bin/python3
"""Prints COUNT consecutive free loopback TCP ports (Slurm's Port=A-B needs a run)."""
import random
import socket
import sys

count = int(sys.argv[1]) if len(sys.argv) > 1 else 1
for _ in range(200):
    base = random.randint(20000, 60000 - count)
    socks = []
    try:
        for p in range(base, base + count):
            s = socket.socket()
            s.bind(("127.0.0.1", p))
            socks.append(s)
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    if len(socks) == count:
        print(" ".join(str(p) for p in range(base, base + count)))
        sys.exit(0)
sys.exit("free_ports: no run of %d free ports found" % count)
