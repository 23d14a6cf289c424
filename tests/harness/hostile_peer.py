#!/usr/bin/python3
"""A peer broker that answers badly, for tests: every peer route
(GET /v1/capacity, POST /v1/decisions, GET /v1/health) answers according
to a mode, read from MODE_FILE at each request:

  ok               well-formed answers (capacity: one cluster; decisions: 200 accepted)
  clusters-number  200 {"clusters":5}
  clusters-mixed   200 {"clusters":[5,"x",{"cluster":7}]}
  message-number   409 {"error":{"message":5}}
  job-string       200 {"job":"x"}
  rejected-mixed   409 {"error":{"message":"no"},"rejected":[1,{"cluster":3}]}
  not-json         200 <html>...
  huge             200, a 6 MB body (JSON that never ends)
  slow             sleeps --slow-seconds (past the broker's deadlines), then answers ok
  by-run           POST /v1/decisions only: the mode is the decision's run
                   id after "hp-" (run "hp-job-string" -> job-string), so
                   that one broker can meet every mode at once

MODE_FILE holds one mode for every route, or "ROUTE=MODE" words
(capacity=..., decisions=..., health=...; a route not named answers ok).
Each request is appended to --log as one JSON line: {"route", "mode", "run", "query"}.
Usage: hostile_peer.py --port-file F --mode-file M [--log L] [--cert C --key K]
"""
import argparse, json, os, ssl, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OK = {
    "capacity": (200, json.dumps({"broker": "hostile", "clusters": [
        {"broker": "hostile", "cluster": "h1", "region": "", "status": "ok", "accelerator_class": "none",
         "gpus_per_node": 0, "gpu_memory_gb": None, "fabric": "ethernet", "idle_nodes": 1, "total_nodes": 2}]})),
    "decisions": (200, json.dumps({"accepted": True, "broker": "hostile", "cluster": "h1", "job": 7,
                                   "nodes": ["h1n1"], "fabric": "ethernet"})),
    "health": (200, '{"ok":true}'),
}
BAD = {
    "clusters-number": (200, '{"clusters":5}'),
    "clusters-mixed": (200, '{"clusters":[5,"x",{"cluster":7}]}'),
    "message-number": (409, '{"error":{"message":5}}'),
    "job-string": (200, '{"job":"x"}'),
    "rejected-mixed": (409, '{"error":{"message":"no"},"rejected":[1,{"cluster":3}]}'),
    "not-json": (200, "<html>this is not JSON</html>"),
}

def read_modes(path):
    try:
        with open(path) as f:
            words = f.read().split()
    except OSError:
        words = []
    modes = {}
    for w in words:
        route, eq, mode = w.partition("=")
        if eq:
            modes[route] = mode
        else:
            modes = {r: w for r in ("capacity", "decisions", "health")}
    return modes

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def route(self):
        path = self.path.split("?")[0]
        return {"/v1/capacity": "capacity", "/v1/decisions": "decisions", "/v1/health": "health"}.get(path)

    def answer(self, method):
        body = b""
        if method == "POST":
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        route = self.route()
        if route is None:
            return self.send(404, '{"error":{"code":"no_route","message":"not here"}}')
        mode = read_modes(self.server.mode_file).get(route, "ok")
        run = None
        if route == "decisions":
            try:
                run = json.loads(body).get("run")
            except (ValueError, AttributeError):
                pass
            if mode == "by-run":
                mode = run[3:] if isinstance(run, str) and run.startswith("hp-") else "ok"
        self.server.record({"route": route, "mode": mode, "run": run, "query": self.path.partition("?")[2]})
        if mode == "slow":
            time.sleep(self.server.slow_seconds)
            mode = "ok"
        if mode == "huge":
            return self.send_huge()
        status, text = BAD.get(mode, OK[route])
        self.send(status, text)

    def send(self, status, text):
        data = text.encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def send_huge(self):
        chunk = b'{"clusters":[' + b" " * (1 << 16)
        total = 6 << 20
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(total))
            self.end_headers()
            sent = 0
            while sent < total:
                piece = chunk[: total - sent]
                self.wfile.write(piece)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass
        self.close_connection = True

    def do_GET(self):
        self.answer("GET")

    def do_POST(self):
        self.answer("POST")

class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, args):
        super().__init__(("127.0.0.1", 0), Handler)
        self.mode_file, self.slow_seconds = args.mode_file, args.slow_seconds
        self.log_path, self.lock = args.log, threading.Lock()

    def record(self, entry):
        if not self.log_path:
            return
        with self.lock, open(self.log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--mode-file", required=True)
    p.add_argument("--log")
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--slow-seconds", type=float, default=7.0)
    args = p.parse_args()
    srv = Server(args)
    if args.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, args.port_file)
    srv.serve_forever()

if __name__ == "__main__":
    main()
