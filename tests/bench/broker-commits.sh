#!/bin/bash
# Checkpoint commits against history: the cost of a sealing commit with no
# sealed checkpoints yet against the same with thousands sealed, and the
# size of the database and its WAL after them (a WAL that is never
# checkpointed grows without end); each without receipts and with them
# (signed and logged in the seal's transaction, doc/receipts.md), side by
# side: the difference is what signing and logging add to a seal. Prints
# figures; asserts nothing.
#   tests/bench/broker-commits.sh build [N]
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd); N=${2:-8000}
T=$(mktemp -d); PID=""
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$T"' EXIT
openssl genpkey -algorithm ed25519 -out "$T/receipts.key" 2>/dev/null && chmod 600 "$T/receipts.key"

bench() {  # NAME RECEIPTS-JSON: figures as JSON into $T/NAME.json
    rm -f "$T/$1".db* "$T/port"
    cat > "$T/broker.json" <<CONF
{"listen": "127.0.0.1:0", "plain_http": true, "database": "$T/$1.db", $2
 "limits": {"rate_per_token": 100000000, "rate_burst": 100000000},
 "tokens": [{"name": "ops", "scope": "admin", "sha256": "$(printf %s admin-t | sha256sum | cut -d' ' -f1)"}]}
CONF
    "$BUILD/broker/shardnet-broker" --config "$T/broker.json" --port-file "$T/port" 2> "$T/log" &
    PID=$!
    for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
    /usr/bin/python3 - "$(cat "$T/port")" "$N" "$T/$1.db" > "$T/$1.json" <<'PY'
import http.client, json, os, sys, time
port, n, db = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = http.client.HTTPConnection("127.0.0.1", port)
h = {"Authorization": "Bearer admin-t"}
def post(path, body):
    c.request("POST", path, json.dumps(body), h); r = c.getresponse(); r.read(); assert r.status in (200, 204), (r.status, path)
post("/v1/heartbeats", {"run": "bench", "attempt": 1, "node": "n1", "cluster": "c1", "job": 7, "ranks": []})
files = [{"path": "rank-0/shard-%d.pt" % k, "sha256": "%064x" % k, "bytes": 1 << 20} for k in range(4)]
times = []
for i in range(n):
    t = time.perf_counter()
    post("/v1/runs/bench/checkpoints/ck-%06d/commit" % i, {"attempt": 1, "rank": 0, "world_size": 1, "files": files})
    times.append(time.perf_counter() - t)
first, last = sorted(times[:500]), sorted(times[-500:])
med = lambda v: v[len(v) // 2] * 1000
size = lambda p: os.path.getsize(p) if os.path.exists(p) else 0
print(json.dumps({"first": med(first), "last": med(last), "db": size(db) / 1024, "wal": size(db + "-wal") / 1024,
                  "all": med(sorted(times))}))
PY
    kill $PID; wait $PID 2>/dev/null || true; PID=""
}
bench plain ""
bench signed "\"receipts\": {\"key_file\": \"$T/receipts.key\"},"
/usr/bin/python3 - "$T/plain.json" "$T/signed.json" "$N" <<'PY'
import json, sys
a, b, n = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
print("%-48s %14s %14s %12s" % ("sealing commit (4 shard files)", "no receipts", "receipts", "added"))
for k, what, unit in (("first", "median, first 500 (0-499 sealed)", "ms"), ("last", "median, last 500 (%d-%d sealed)" % (n - 500, n - 1), "ms"),
                      ("all", "median, all %d" % n, "ms"), ("db", "database file after %d seals" % n, "KB"), ("wal", "its WAL", "KB")):
    print("%-48s %11.3f %s %11.3f %s %+9.3f %s" % (what, a[k], unit, b[k], unit, b[k] - a[k], unit))
print("%-48s %11.2fx    %11.2fx     (1.0: independent of history)" % ("ratio last / first", a["last"] / a["first"], b["last"] / b["first"]))
PY
