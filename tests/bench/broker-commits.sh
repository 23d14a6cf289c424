#!/bin/bash
# Checkpoint commits against history: the cost of a sealing commit with no
# sealed checkpoints yet against the same with thousands sealed, and the
# size of the database and its WAL after them (a WAL that is never
# checkpointed grows without end). Prints figures; asserts nothing.
#   tests/bench/broker-commits.sh build [N]
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd); N=${2:-8000}
T=$(mktemp -d); PID=""
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$T"' EXIT
cat > "$T/broker.json" <<CONF
{"listen": "127.0.0.1:0", "plain_http": true, "database": "$T/broker.db",
 "limits": {"rate_per_token": 100000000, "rate_burst": 100000000},
 "tokens": [{"name": "ops", "scope": "admin", "sha256": "$(printf %s admin-t | sha256sum | cut -d' ' -f1)"}]}
CONF
"$BUILD/broker/shardnet-broker" --config "$T/broker.json" --port-file "$T/port" 2> "$T/log" &
PID=$!
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
/usr/bin/python3 - "$(cat "$T/port")" "$N" "$T/broker.db" <<'PY'
import http.client, json, os, sys, time
port, n, db = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = http.client.HTTPConnection("127.0.0.1", port)
h = {"Authorization": "Bearer admin-t"}
def post(path, body):
    c.request("POST", path, json.dumps(body), h); r = c.getresponse(); r.read(); assert r.status in (200, 204), r.status
post("/v1/heartbeats", {"run": "bench", "attempt": 1, "node": "n1", "ranks": []})
files = [{"path": "shard.pt", "sha256": "00" * 32, "bytes": 1}]
times = []
for i in range(n):
    t = time.perf_counter()
    post("/v1/runs/bench/checkpoints/ck-%06d/commit" % i, {"attempt": 1, "rank": 0, "world_size": 1, "files": files})
    times.append(time.perf_counter() - t)
first, last = sorted(times[:500]), sorted(times[-500:])
med = lambda v: v[len(v) // 2] * 1000
size = lambda p: os.path.getsize(p) if os.path.exists(p) else 0
print("%-52s %10.3f ms" % ("sealing commit, median, first 500 (0-499 sealed)", med(first)))
print("%-52s %10.3f ms" % ("sealing commit, median, last 500 (%d-%d sealed)" % (n - 500, n - 1), med(last)))
print("%-52s %10.2fx  (1.0: independent of history)" % ("ratio last / first", med(last) / med(first)))
print("%-52s %10.1f KB" % ("database file after %d seals" % n, size(db) / 1024))
print("%-52s %10.1f KB  (SQLite checkpoints at ~4 MB unless a reader pins it)" % ("its WAL", size(db + "-wal") / 1024))
PY
