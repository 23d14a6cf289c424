#!/usr/bin/python3
"""A small, real HTTP receiver standing in for the broker's ingest until the
broker exists: records every POST (path, auth header, JSON body, time of
arrival) as one JSON line, answers 204.

  receiver.py --port-file F --log L [--mode ok|blackhole|refuse]

ok: answers. blackhole: accepts connections, never reads or answers.
refuse: answers 503. Writes the bound port to F (binds port 0).
"""
import argparse
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--mode", choices=["ok", "blackhole", "refuse"], default="ok")
    args = ap.parse_args()
    lock = threading.Lock()

    if args.mode == "blackhole":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1024)  # the kernel completes handshakes; nobody ever reads
        open(args.port_file, "w").write(str(s.getsockname()[1]))
        held = []
        while True:
            c, _ = s.accept()
            held.append(c)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(n)
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"unparsed": raw.decode("utf-8", "replace")}
            rec = {"t": time.time(), "path": self.path,
                   "auth": self.headers.get("Authorization", ""), "body": body}
            with lock, open(args.log, "a") as f:
                f.write(json.dumps(rec) + "\n")
            code = 503 if args.mode == "refuse" else 204
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    class Server(ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            pass  # agents killed mid-request at a step's end reset the connection

    srv = Server(("127.0.0.1", 0), Handler)
    open(args.port_file, "w").write(str(srv.server_address[1]))
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
