#!/bin/bash
# Instructions per request, counted by callgrind (user space only): the
# broker taking authenticated heartbeats against nginx answering a static
# 204, under the same wrk load. Counted, not timed: the figure does not move
# with the load from elsewhere on a shared machine, so a change's effect on
# the hot path shows even where throughput rounds drift by +-10%.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
command -v valgrind >/dev/null || { echo "broker-instructions: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
T=$(mktemp -d); chmod 755 "$T"
VP=""
trap '[ -n "$VP" ] && kill "$VP" 2>/dev/null; sleep 0.2; rm -rf "$T"' EXIT
free_port() { "$TOP/tests/harness/free_ports.py" 1; }
# A job's token, as slurmstepd derives it (the broker takes heartbeats from no other).
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/worker.key"; chmod 600 "$T/worker.key"
TOKEN=$("$TOP/tests/harness/worker_token.py" "$T/worker.key" bench 1 1000 "$(id -u)" 1 alpha)
export SHARDNET_BENCH_TOKEN=$TOKEN   # read by heartbeat.lua

# count NAME PORT CMD...: starts CMD under callgrind with instrumentation
# off, warms it up (workers known, caches filled), then counts a 3 s load.
count() {
    local name=$1 port=$2; shift 2
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$T/$name.cg" "$@" 2> "$T/$name.vg" &
    VP=$!
    for _ in $(seq 150); do curl -s -o /dev/null "127.0.0.1:$port/" && break; sleep 0.2; done
    wrk -t1 -c8 -d2s -s "$TOP/tests/bench/heartbeat.lua" "http://127.0.0.1:$port" > /dev/null
    callgrind_control -i on "$VP" > /dev/null 2>&1
    wrk -t1 -c8 -d3s -s "$TOP/tests/bench/heartbeat.lua" "http://127.0.0.1:$port" > "$T/$name.wrk"
    callgrind_control -i off "$VP" > /dev/null 2>&1
    callgrind_control -d "$VP" > /dev/null 2>&1
    # Stopped, and made to stop: a program under valgrind may not leave on TERM.
    kill "$VP"
    for _ in $(seq 50); do kill -0 "$VP" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$VP" 2>/dev/null || true
    wait "$VP" 2>/dev/null || true; VP=""
    local n ir
    n=$(awk '/requests in/ {print $1}' "$T/$name.wrk")
    ir=$(cat "$T/$name".cg.* | awk '/^totals:/ {s += $2} END {print s}')
    echo "$n $ir"
}

NP=$(free_port)
. "$TOP/tests/bench/nginx204.sh"
nginx_204_conf "$T/nginx" "$NP" 1
read -r n_req n_ir < <(count nginx "$NP" nginx -c "$T/nginx/nginx.conf")

BP=$(free_port)
cat > "$T/broker.json" <<CONF
{"listen": "127.0.0.1:$BP", "plain_http": true, "database": "$T/broker.db", "threads": 2,
 "limits": {"rate_per_token": 100000000, "rate_burst": 100000000},
 "worker_keys": [{"name": "bench", "key_file": "$T/worker.key"}]}
CONF
read -r b_req b_ir < <(count broker "$BP" "$BUILD/broker/shardnet-broker" --config "$T/broker.json")

/usr/bin/python3 - "$n_req" "$n_ir" "$b_req" "$b_ir" <<'PY'
import sys
n_req, n_ir, b_req, b_ir = map(int, sys.argv[1:])
n, b = n_ir / n_req, b_ir / b_req
print("instructions per request (callgrind, user space; wrk -t1 -c8, 3 s counted):")
print("  %-52s %8.0f  (%d requests)" % ("nginx, static 204", n, n_req))
print("  %-52s %8.0f  (%d requests)" % ("shardnet-broker, authenticated heartbeat", b, b_req))
print("  %-52s %8.2fx" % ("ratio broker / nginx (lower is leaner)", b / n))
PY
