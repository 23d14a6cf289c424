#!/usr/bin/python3
"""A TCP proxy between two brokers that a test controls, to cut the link.

The mode is read from MODE_FILE at each new connection and while relaying:
  pass          relay both ways
  refuse        close new connections at once (the link is down)
  drop-replies  relay requests to the server, never send its replies back
                (the request arrives, its answer is lost). The link carries
                TLS 1.3: the handshake passes, and once the client has sent
                application data after its Finished (the request), nothing
                more comes back and the client's connection is closed.
Usage: tcp_proxy.py --listen-port-file F --target HOST:PORT --mode-file M
"""
import argparse, os, socket, threading

def mode(path):
    try:
        with open(path) as f:
            return f.read().strip() or "pass"
    except OSError:
        return "pass"

class Conn:
    """TLS records the client sent: type 0x17 (application data) counts;
    in TLS 1.3 the first is the client's Finished, the second its request."""
    def __init__(self):
        self.buf = b""
        self.app_records = 0

    def client_bytes(self, data):
        self.buf += data
        while len(self.buf) >= 5:
            length = int.from_bytes(self.buf[3:5], "big")
            if len(self.buf) < 5 + length:
                break
            if self.buf[0] == 0x17:
                self.app_records += 1
            self.buf = self.buf[5 + length:]

def pipe(src, dst, conn, from_client, path):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if from_client:
                conn.client_bytes(data)
            elif mode(path) == "drop-replies" and conn.app_records >= 2:
                break  # the answer is lost; the client sees the link go down
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen-port-file", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--mode-file", required=True)
    a = ap.parse_args()
    host, port = a.target.rsplit(":", 1)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    with open(a.listen_port_file + ".tmp", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(a.listen_port_file + ".tmp", a.listen_port_file)
    while True:
        c, _ = ls.accept()
        if mode(a.mode_file) == "refuse":
            c.close()
            continue
        try:
            s = socket.create_connection((host, int(port)), timeout=5)
            s.settimeout(None)
        except OSError:
            c.close()
            continue
        conn = Conn()
        threading.Thread(target=pipe, args=(c, s, conn, True, a.mode_file), daemon=True).start()
        threading.Thread(target=pipe, args=(s, c, conn, False, a.mode_file), daemon=True).start()

if __name__ == "__main__":
    main()
