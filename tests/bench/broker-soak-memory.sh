#!/bin/bash
# Soak: a real broker under wrk heartbeats (tests/bench/heartbeat.lua, a
# derived worker token, 1000 nodes) plus a steady stream of sealing
# checkpoint commits, for DURATION seconds (default 600). Every SAMPLE
# seconds (default 10) it samples the broker's RSS (VmRSS), the database and
# its -wal file; it prints them as a table, then the first, last and largest
# figures side by side. Exit 1 when the WAL passed WAL_MAX_MB (default 64)
# at any sample, or the RSS at the end is more than RSS_FACTOR (default 1.5)
# times the RSS after the first minute (the first sample when shorter).
# A benchmark, not part of make check (it takes 10 minutes):
#   nice -n 15 tests/bench/broker-soak-memory.sh build
#   DURATION=120 COMMITS_PER_S=50 tests/bench/broker-soak-memory.sh build
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
DURATION=${DURATION:-600}; SAMPLE=${SAMPLE:-10}; WAL_MAX_MB=${WAL_MAX_MB:-64}; RSS_FACTOR=${RSS_FACTOR:-1.5}
COMMITS_PER_S=${COMMITS_PER_S:-20}; WRK_CONNECTIONS=${WRK_CONNECTIONS:-4}
for v in DURATION SAMPLE WAL_MAX_MB COMMITS_PER_S WRK_CONNECTIONS; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "broker-soak-memory: $v=${!v}: expected a positive integer" >&2; exit 2; }
done
[[ $RSS_FACTOR =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "broker-soak-memory: RSS_FACTOR=$RSS_FACTOR: expected a number" >&2; exit 2; }
command -v wrk >/dev/null || { echo "broker-soak-memory: needs wrk (apt-get install wrk)" >&2; exit 1; }
[ -x "$BUILD/broker/shardnet-broker" ] || { echo "broker-soak-memory: no $BUILD/broker/shardnet-broker (run make first)" >&2; exit 1; }
T=$(mktemp -d); chmod 755 "$T"
PID=""; WRK=""
trap '[ -n "$WRK" ] && kill $WRK 2>/dev/null; [ -n "$PID" ] && kill $PID 2>/dev/null; sleep 0.2; rm -rf "$T"' EXIT

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/worker.key"; chmod 600 "$T/worker.key"
export SHARDNET_BENCH_TOKEN
SHARDNET_BENCH_TOKEN=$("$TOP/tests/harness/worker_token.py" "$T/worker.key" bench 1 1000 "$(id -u)" 1 alpha)
BP=$("$TOP/tests/harness/free_ports.py" 1)
cat > "$T/broker.json" <<CONF
{"listen": "127.0.0.1:$BP", "plain_http": true, "database": "$T/broker.db", "threads": 2,
 "limits": {"rate_per_token": 100000000, "rate_burst": 100000000},
 "tokens": [{"name": "ops", "scope": "admin", "sha256": "$(printf %s admin-t | sha256sum | cut -d' ' -f1)"}],
 "worker_keys": [{"name": "bench", "key_file": "$T/worker.key"}]}
CONF
"$BUILD/broker/shardnet-broker" --config "$T/broker.json" 2> "$T/log" &
PID=$!
for _ in $(seq 100); do curl -s -o /dev/null "127.0.0.1:$BP/v1/health" && break; sleep 0.1; done
curl -sf -o /dev/null "127.0.0.1:$BP/v1/health" || { echo "broker-soak-memory: the broker did not start: $(tail -3 "$T/log")" >&2; exit 1; }

wrk -t1 -c"$WRK_CONNECTIONS" -d"${DURATION}s" -s "$TOP/tests/bench/heartbeat.lua" "http://127.0.0.1:$BP" > "$T/wrk.out" 2>&1 &
WRK=$!
set +e
/usr/bin/python3 - "$BP" "$PID" "$T/broker.db" "$DURATION" "$SAMPLE" "$WAL_MAX_MB" "$RSS_FACTOR" "$COMMITS_PER_S" <<'PY'
import http.client, json, os, sys, threading, time
port, pid, db = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
duration, every, wal_max_mb, rss_factor, rate = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]), int(sys.argv[8])
h = {"Authorization": "Bearer admin-t"}
stop = threading.Event()
done = {"acked": 0, "sealed": 0, "refused": 0}

def committer():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/v1/heartbeats", json.dumps({"run": "soak", "attempt": 1, "node": "n1", "ranks": []}), h)
    r = c.getresponse(); r.read()
    assert r.status == 204, ("the soak run was not created", r.status)
    files = [{"path": "shard-%d.pt" % i, "sha256": "00" * 32, "bytes": 1 << 30} for i in range(4)]
    i, t0 = 0, time.monotonic()
    while not stop.is_set():
        try:
            c.request("POST", "/v1/runs/soak/checkpoints/ck-%07d/commit" % i,
                      json.dumps({"attempt": 1, "rank": 0, "world_size": 1, "files": files}), h)
            r = c.getresponse(); body = r.read()
            if r.status == 200:
                done["acked"] += 1
                done["sealed"] += json.loads(body)["sealed"] is True
            else:
                done["refused"] += 1
        except Exception:
            done["refused"] += 1
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        i += 1
        wait = t0 + i / rate - time.monotonic()   # a steady rate, not a burst
        if wait > 0: stop.wait(wait)

def rss_kb():
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"): return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)
size = lambda p: os.path.getsize(p) if os.path.exists(p) else 0

th = threading.Thread(target=committer, daemon=True); th.start()
rows, start = [], time.monotonic()
print("%8s %10s %12s %10s %10s" % ("seconds", "RSS MB", "database MB", "WAL MB", "commits"))
while True:
    t = time.monotonic() - start
    if not os.path.exists("/proc/%d" % pid): print("the broker is gone"); sys.exit(1)
    row = (t, rss_kb() / 1024, size(db) / 2**20, size(db + "-wal") / 2**20, done["acked"])
    rows.append(row)
    print("%8.0f %10.1f %12.2f %10.2f %10d" % row, flush=True)
    if t >= duration: break
    time.sleep(max(0, min(every, duration - t) - (time.monotonic() - start - t)))
stop.set(); th.join(10)
base = next((r for r in rows if r[0] >= 60), rows[0]) if duration >= 120 else rows[0]
first, last = rows[0], rows[-1]
print()
print("%-14s %10s %10s %10s %14s" % ("", "first", "minute 1" if base is not first else "baseline", "last", "largest"))
for name, k in (("RSS MB", 1), ("database MB", 2), ("WAL MB", 3)):
    print("%-14s %10.2f %10.2f %10.2f %14.2f" % (name, first[k], base[k], last[k], max(r[k] for r in rows)))
print("commits acknowledged %d (sealed %d), refused %d, in %.0f s" % (done["acked"], done["sealed"], done["refused"], last[0]))
bad = []
if max(r[3] for r in rows) > wal_max_mb: bad.append("the WAL passed %d MB (%.1f MB)" % (wal_max_mb, max(r[3] for r in rows)))
if last[1] > rss_factor * base[1]:
    bad.append("RSS grew from %.1f MB (at %.0f s) to %.1f MB, more than %.2fx" % (base[1], base[0], last[1], rss_factor))
if done["acked"] == 0 or done["refused"]: bad.append("commits: %d acknowledged, %d refused" % (done["acked"], done["refused"]))
for b in bad: print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
rc=$?
set -e
wait $WRK 2>/dev/null; WRK=""
echo "wrk heartbeats: $(awk '/requests in/ {sub(",", "", $4); print $1 " requests in " $4}' "$T/wrk.out"); $(awk '/Requests\/sec/ {print $2 "/s"}' "$T/wrk.out"); non-2xx: $(awk '/Non-2xx/ {print $NF}' "$T/wrk.out" | grep . || echo 0)"
exit $rc
