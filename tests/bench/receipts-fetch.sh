#!/bin/bash
# `shard verify RUN` against a live broker holding a run of N (10,000)
# receipts: the wall time of fetching (pages of 1,000, each receipt with its
# inclusion proof against one signed head) and verifying, the HTTP requests
# it took, beside what one request per receipt's proof would cost (the
# median of 200 GET /v1/log/proof/inclusion, times N).
# Usage: tests/bench/receipts-fetch.sh [BUILD]
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
BROKER=$BUILD/broker/shardnet-broker SHARD=$BUILD/sbatch-wrappers/shard
N=${N:-10000}
PY=/usr/bin/python3
T=$(mktemp -d); PID=""
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null; rm -rf "$T"' EXIT
hash() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
openssl genpkey -algorithm ed25519 -out "$T/k.pem" 2>/dev/null && chmod 600 "$T/k.pem" && openssl pkey -in "$T/k.pem" -pubout -out "$T/pub.pem"
cat > "$T/broker.json" <<CONF
{"listen": "127.0.0.1:0", "plain_http": true, "database": "$T/b.db", "broker_name": "solo", "receipts": {"key_file": "$T/k.pem"},
 "limits": {"rate_per_token": 100000000, "rate_burst": 100000000},
 "tokens": [{"name": "ops", "scope": "admin", "sha256": "$(hash admin-t)"}]}
CONF
"$BROKER" --config "$T/broker.json" --port-file "$T/port" 2>> "$T/log" &
PID=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
P=$(cat "$T/port")
curl -sf -X POST -H "Authorization: Bearer admin-t" "http://127.0.0.1:$P/v1/heartbeats" --data-binary \
    '{"run":"r1","attempt":1,"node":"n1","step":"batch","cluster":"c1","job":7,"interval":600,"state":"running","ranks":[{"rank":0,"step":1}]}'
echo "sealing $N checkpoints (one receipt each)..."
$PY - "$P" "$N" <<'PY'
import hashlib, http.client, json, sys, threading
port, n = int(sys.argv[1]), int(sys.argv[2])
def worker(w):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for i in range(w, n - 1, 4):   # the attempt's start is the first receipt
        name = "ck-%06d" % i
        path = "rank-0/%s.pt" % name
        c.request("POST", "/v1/runs/r1/checkpoints/%s/commit" % name,
                  json.dumps({"attempt": 1, "rank": 0, "world_size": 1,
                              "files": [{"path": path, "sha256": hashlib.sha256(path.encode()).hexdigest(), "bytes": 10}]}),
                  {"Authorization": "Bearer admin-t"})
        c.getresponse().read()
ts = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
PY
export SHARD_BROKER="http://127.0.0.1:$P" SHARD_TOKEN=admin-t
t0=$(date +%s.%N)
XDG_STATE_HOME="$T/state" "$SHARD" verify r1 --key "$T/pub.pem" > "$T/out" 2>&1 || { cat "$T/out"; exit 1; }
t1=$(date +%s.%N)
got=$(grep -o '^ok: [0-9]* receipt(s)' "$T/out")
proof_ms=$($PY - "$P" <<'PY'
import http.client, statistics, sys, time
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
ts = []
for i in range(200):
    t = time.perf_counter()
    c.request("GET", "/v1/log/proof/inclusion?index=%d&size=10000" % (i * 37 % 10000), headers={"Authorization": "Bearer admin-t"})
    c.getresponse().read()
    ts.append((time.perf_counter() - t) * 1000)
print("%.3f" % statistics.median(ts))
PY
)
$PY - "$t0" "$t1" "$N" "$proof_ms" "$got" <<'PY'
import math, sys
t0, t1, n, proof_ms, got = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
pages = math.ceil(n / 1000)
print(f"shard verify r1 ({got}), fetched from the broker and verified: {t1 - t0:.2f} s, {pages} receipts pages + /v1/keys")
print(f"one request per receipt's proof instead: {n} x {proof_ms:.3f} ms (median GET /v1/log/proof/inclusion) = {n * proof_ms / 1000:.2f} s of requests alone, "
      f"{(n * proof_ms / 1000) / (t1 - t0):.1f}x the whole verify")
PY
