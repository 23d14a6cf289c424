#!/bin/bash
# Memory per tracked worker: drive N distinct workers' heartbeats (default
# 1,000,000) into the broker with wrk and divide its RSS growth by the
# workers it tracks. Target <= 1 KB each.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
N=${N:-1000000}
T=$(mktemp -d); PID=""
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$T"' EXIT
# A job's token, as slurmstepd derives it (the broker takes heartbeats from no other).
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/worker.key"; chmod 600 "$T/worker.key"
TOKEN=$("$TOP/tests/harness/worker_token.py" "$T/worker.key" mem 1 "$N" "$(id -u)" 1 alpha)
cat > "$T/broker.json" <<CONF
{"listen": "127.0.0.1:0", "plain_http": true, "database": "$T/broker.db", "threads": 2,
 "detector": {"misses": 100, "stall_seconds": 604800, "summary_seconds": 3600},
 "limits": {"rate_per_token": 100000000, "rate_burst": 100000000},
 "worker_keys": [{"name": "mem", "key_file": "$T/worker.key"}]}
CONF
"$BUILD/broker/shardnet-broker" --config "$T/broker.json" --port-file "$T/port" 2> "$T/log" &
PID=$!
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
P=$(cat "$T/port")
rss() { awk '/^VmRSS/ {print $2 * 1024}' "/proc/$PID/status"; }
# One run, so that only the per-worker state grows.
curl -s -X POST -H "Authorization: Bearer $TOKEN" "127.0.0.1:$P/v1/heartbeats" \
    -d '{"run":"mem","attempt":1,"cluster":"alpha","job":1,"node":"warm","interval":60,"ranks":[]}' >/dev/null
before=$(rss)
cat > "$T/w.lua" <<LUA
local n = 0
local threads = 0
setup = function(thread) thread:set("tid", threads); threads = threads + 1 end
request = function()
  n = n + 1
  local w = (n * 2 + tid) % $N
  local body = '{"run":"mem","attempt":1,"cluster":"alpha","job":1,"node":"node' .. string.format("%07d", w) ..
    '","step":"0","interval":60,"state":"running","ranks":[{"rank":' .. w .. ',"local_rank":0,"step":' .. n .. '}]}'
  return wrk.format("POST", "/v1/heartbeats", {["Authorization"]="Bearer $TOKEN"}, body)
end
LUA
for _ in $(seq 30); do
    wrk -t2 -c64 -d10s -s "$T/w.lua" "http://127.0.0.1:$P" > /dev/null
    tracked=$(curl -s "127.0.0.1:$P/metrics" | awk '$1 == "shardnet_workers_tracked" {print $2}')
    [ "$tracked" -ge "$N" ] && break
done
after=$(rss)
printf '%-40s %14s\n' "workers tracked" "$tracked"
printf '%-40s %14s\n' "broker RSS before / after (MiB)" "$((before >> 20)) / $((after >> 20))"
/usr/bin/python3 -c "print('%-40s %14.0f   (target <= 1024)' % ('bytes per tracked worker', ($after - $before) / $tracked))"
