"""Slowloris at the connection cap: 400 connections that trickle a byte at a
time (a request header, or with --tls a ClientHello) while a health probe
is sent every 0.2 s for 6 s. Every probe must be answered and some slow
connections shed. Prints the figures; exit 0 when both hold.
Usage: slowloris.py PORT [--tls CA_FILE]"""
import socket
import ssl
import sys
import time

port = int(sys.argv[1])
ctx = None
if len(sys.argv) > 3 and sys.argv[2] == "--tls":
    ctx = ssl.create_default_context(cafile=sys.argv[3])
    # A real ClientHello, to be sent a byte at a time.
    inc, outc = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, outc, server_hostname="127.0.0.1")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    trickle = outc.read()
else:
    trickle = b"POST /v1/heartbeats HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10000

conns = {}


def opencon():
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    conns[s] = 0


def probe():
    p = socket.create_connection(("127.0.0.1", port), timeout=5)
    if ctx:
        p = ctx.wrap_socket(p, server_hostname="127.0.0.1")
    p.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    d = p.recv(100)
    p.close()
    return d


for _ in range(400):
    opencon()
answered, worst, cut, end = 0, 0.0, 0, time.time() + 6
while time.time() < end:
    for s in list(conns):
        try:
            if conns[s] < len(trickle) - 1:   # never the last byte: it stays incomplete
                s.send(trickle[conns[s]:conns[s] + 1])
                conns[s] += 1
            else:
                s.recv(1)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            s.close()
            del conns[s]
            cut += 1
            opencon()
    t0 = time.time()
    try:
        d = probe()
    except (OSError, ssl.SSLError) as e:
        d = str(e).encode()
    if not d.startswith(b"HTTP/1.1 200"):
        print("a probe got %r after %d answered" % (d, answered))
        sys.exit(1)
    answered += 1
    worst = max(worst, time.time() - t0)
    time.sleep(0.2)
print("%d probes answered, slowest %.3f s; %d slow connections shed" % (answered, worst, cut))
sys.exit(0 if answered >= 5 and cut > 0 else 1)
