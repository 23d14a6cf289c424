#!/usr/bin/python3
"""An HTTPS proxy between the agents of one cluster and their broker that
writes down what each agent was answered: the client-side record of
acknowledgements the kill -9 tests check the broker's database against.

It terminates TLS with the broker's own certificate (so the agents' pinned
ca_file still verifies), sends each request to the broker on a connection
of its own, and writes one JSON line per answer to LOG, *before* the answer
goes back to the agent: every 2xx an agent can have seen is in the log.
A broker that is down (refused, reset, killed mid-request) is a connection
closed without an answer, as the agent would see it without the proxy; the
log then says status 0. The proxy outlives the broker's restarts.

Lines: {"t": time, "method", "path", "status", "req": body (commits only),
        "resp": body (commits only)}; heartbeats are logged without bodies.
Usage: ack_proxy.py --listen-port-file F --target HOST:PORT --cert C --key K --log L
"""
import argparse, http.client, http.server, json, socket, ssl, sys, threading, time

args = None
log_lock = threading.Lock()


def write_log(rec):
    line = json.dumps(rec, separators=(",", ":")) + "\n"
    with log_lock:
        with open(args.log, "a") as f:
            f.write(line)
            f.flush()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):  # quiet
        pass

    def upstream(self):
        host, port = args.target.rsplit(":", 1)
        ctx = ssl.create_default_context(cafile=args.cert)
        return http.client.HTTPSConnection(host, int(port), context=ctx, timeout=args.timeout)

    def relay(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("host", "connection", "expect", "keep-alive", "content-length")}
        commit = self.path.endswith("/commit")
        status, data, rh = 0, b"", []
        try:
            c = self.upstream()
            c.request(self.command, self.path, body=body if n or self.command == "POST" else None, headers=headers)
            r = c.getresponse()
            status, data, rh = r.status, r.read(), r.getheaders()
            c.close()
        except (OSError, http.client.HTTPException):
            status = 0
        rec = {"t": time.time(), "method": self.command, "path": self.path, "status": status}
        if commit:
            try:
                rec["req"] = json.loads(body or b"null")
            except ValueError:
                rec["req"] = None
            try:
                rec["resp"] = json.loads(data or b"null")
            except ValueError:
                rec["resp"] = None
        write_log(rec)
        if status == 0:
            # What the agent sees of a broker that is gone: no answer.
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self.send_response_only(status)
        for k, v in rh:
            if k.lower() not in ("connection", "keep-alive", "transfer-encoding", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = relay


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def get_request(self):
        sock, addr = super().get_request()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        sock.settimeout(30)
        try:
            return ctx.wrap_socket(sock, server_side=True), addr
        except (OSError, ssl.SSLError):
            sock.close()
            raise OSError("handshake failed")

    def handle_error(self, request, client_address):
        pass


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--listen-port-file", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--timeout", type=float, default=10.0)
    args = p.parse_args()
    srv = Server(("127.0.0.1", 0), Handler)
    with open(args.listen_port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(args.listen_port_file + ".tmp", args.listen_port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
