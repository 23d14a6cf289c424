#!/bin/bash
# Authenticated heartbeat POSTs against the broker, and the same wrk load
# against nginx answering a static 204, in the same run. Prints requests/s,
# p99 latency and the ratio (target >= 1.0x nginx).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
DUR=${DUR:-10s}; CONN=${CONN:-64}; THREADS=${THREADS:-2}; BROKER_THREADS=${BROKER_THREADS:-2}
T=$(mktemp -d); chmod 755 "$T"
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; sleep 0.2; rm -rf "$T"' EXIT
free_port() { "$TOP/tests/harness/free_ports.py" 1; }

# nginx: a static 204 for any method.
NP=$(free_port)
mkdir -p "$T/nginx"
cat > "$T/nginx/nginx.conf" <<CONF
worker_processes 2;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $T/nginx/body;
    server { listen 127.0.0.1:$NP; location / { return 204; } }
}
CONF
nginx -c "$T/nginx/nginx.conf" -g 'daemon off;' &
PIDS+=($!)

# The broker, plain HTTP on loopback, with a worker token.
TOKEN=bench-token-$RANDOM
cat > "$T/broker.json" <<CONF
{"listen": "127.0.0.1:0", "plain_http": true, "database": "$T/broker.db", "threads": $BROKER_THREADS,
 "limits": {"rate_per_token": 100000000, "rate_burst": 100000000},
 "tokens": [{"name": "bench", "scope": "worker", "sha256": "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)"}]}
CONF
"$BUILD/broker/shardnet-broker" --config "$T/broker.json" --port-file "$T/port" 2> "$T/broker.log" &
PIDS+=($!)
for _ in $(seq 50); do [ -s "$T/port" ] && curl -s "127.0.0.1:$NP" >/dev/null && break; sleep 0.1; done
BP=$(cat "$T/port")

# The agent's heartbeat, from 1000 nodes in turn.
cat > "$T/hb.lua" <<LUA
local n = 0
request = function()
  n = n + 1
  local body = '{"run":"bench","attempt":1,"cluster":"alpha","node":"node' .. (n % 1000) ..
    '","job":1,"step":"0","seq":' .. n .. ',"time":1.0,"interval":10,"state":"running","ranks":[{"rank":0,"local_rank":0,"pid":1,"step":' .. n .. ',"exit":null}]}'
  return wrk.format("POST", "/v1/heartbeats", {["Content-Type"]="application/json", ["Authorization"]="Bearer $TOKEN"}, body)
end
LUA
run_wrk() {  # URL -> "req/s p99_ms"
    wrk -t"$THREADS" -c"$CONN" -d"$DUR" --latency -s "$T/hb.lua" "$1" > "$T/wrk.out" 2>&1
    local rps p99 codes
    rps=$(awk '/Requests\/sec/ {print $2}' "$T/wrk.out")
    p99=$(awk '$1 == "99%" {print $2}' "$T/wrk.out")
    codes=$(grep -c "Non-2xx" "$T/wrk.out" || true)
    [ "$codes" = 0 ] || { echo "non-2xx answers from $1:" >&2; cat "$T/wrk.out" >&2; }
    echo "$rps $p99"
}
read -r n_rps n_p99 < <(run_wrk "http://127.0.0.1:$NP")
read -r b_rps b_p99 < <(run_wrk "http://127.0.0.1:$BP")
accepted=$(curl -s "127.0.0.1:$BP/metrics" | awk '$1 == "shardnet_heartbeats_total" {print $2}')
printf '%-58s %12s %10s\n' "wrk -t$THREADS -c$CONN -d$DUR, heartbeat POST from 1000 nodes" "req/s" "p99"
printf '%-58s %12s %10s\n' "nginx, static 204" "$n_rps" "$n_p99"
printf '%-58s %12s %10s\n' "shardnet-broker, authenticated heartbeat ($BROKER_THREADS threads)" "$b_rps" "$b_p99"
/usr/bin/python3 -c "print('%-58s %12.2fx %10s' % ('ratio broker / nginx (target >= 1.0x)', $b_rps / $n_rps, ''))"
echo "heartbeats accepted by the broker: $accepted"
