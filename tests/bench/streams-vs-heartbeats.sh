#!/bin/bash
# Heartbeats while event streams are held open and never read (issue 28):
#   baseline   no streams;
#   one token  one token asks for 1000 streams (limits.sse_streams_per_token
#              lets it hold 8; the rest are answered 429);
#   many       1000 unread streams from 125 tokens, 8 each (limits.sse_max_streams
#              1100, below max_connections 1200).
# Prints heartbeats/s, p99 and the ratio to the baseline side by side.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
DUR=${DUR:-5s}; CONN=${CONN:-64}; THREADS=${THREADS:-2}
T=$(mktemp -d); chmod 755 "$T"
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; sleep 0.2; rm -rf "$T"' EXIT
ulimit -n 8192
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/worker.key"; chmod 600 "$T/worker.key"
TOKEN=$("$TOP/tests/harness/worker_token.py" "$T/worker.key" bench 1 1000 "$(id -u)" 1 alpha)
hash() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
tokens=""
for i in $(seq 0 125); do tokens="$tokens${tokens:+, }{\"name\": \"s$i\", \"scope\": \"admin\", \"sha256\": \"$(hash "s-$i")\"}"; done
cat > "$T/broker.json" <<CONF
{"listen": "127.0.0.1:0", "plain_http": true, "database": "$T/broker.db", "threads": 2,
 "limits": {"rate_per_token": 100000000, "rate_burst": 100000000, "max_connections": 1200, "sse_max_streams": 1100},
 "worker_keys": [{"name": "bench", "key_file": "$T/worker.key"}], "tokens": [$tokens]}
CONF
"$BUILD/broker/shardnet-broker" --config "$T/broker.json" --port-file "$T/port" 2> "$T/broker.log" &
PIDS+=($!)
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
BP=$(cat "$T/port")
curl -s -o /dev/null -X POST -H "Authorization: Bearer s-0" "http://127.0.0.1:$BP/v1/runs" -d '{"id":"watched"}'
export SHARDNET_BENCH_TOKEN=$TOKEN
run_wrk() {  # -> "req/s p99"
    wrk -t"$THREADS" -c"$CONN" -d"$DUR" --latency -s "$TOP/tests/bench/heartbeat.lua" "http://127.0.0.1:$BP" > "$T/wrk.out" 2>&1
    grep -q "Non-2xx" "$T/wrk.out" && { echo "non-2xx heartbeat answers:" >&2; cat "$T/wrk.out" >&2; }
    echo "$(awk '/Requests\/sec/ {print $2}' "$T/wrk.out") $(awk '$1 == "99%" {print $2}' "$T/wrk.out")"
}
hold() {  # TOKENS PER-TOKEN -> holds the streams until killed; writes "held refused" to $T/held
    /usr/bin/python3 - "$BP" "$1" "$2" "$T/held" <<'PY' &
import socket, sys, time
port, tokens, each, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
held, refused = [], 0
for t in range(tokens):
    for _ in range(each):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET /v1/runs/watched/events?follow=1 HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer s-%d\r\n\r\n" % t)
        s.settimeout(5)
        head = s.recv(200)
        if head.startswith(b"HTTP/1.1 200"): held.append(s)   # and never read again
        else: refused += 1; s.close()
open(out, "w").write("%d %d\n" % (len(held), refused))
time.sleep(3600)
PY
    HOLDER=$!
    for _ in $(seq 600); do [ -s "$T/held" ] && break; sleep 0.1; done
}
read -r b_rps b_p99 <<<"$(run_wrk)"
printf '%-34s %8s %8s %12s %9s %8s\n' scenario held refused heartbeats/s p99 ratio
printf '%-34s %8s %8s %12s %9s %8s\n' "baseline (no streams)" 0 0 "$b_rps" "$b_p99" "1.00x"
rm -f "$T/held"; hold 1 1000
read -r held refused < "$T/held"
read -r rps p99 <<<"$(run_wrk)"
printf '%-34s %8s %8s %12s %9s %8s\n' "one token asks for 1000 streams" "$held" "$refused" "$rps" "$p99" "$(awk -v a="$rps" -v b="$b_rps" 'BEGIN{printf "%.2fx", a/b}')"
kill $HOLDER; sleep 1
rm -f "$T/held"; hold 125 8
read -r held refused < "$T/held"
read -r rps p99 <<<"$(run_wrk)"
printf '%-34s %8s %8s %12s %9s %8s\n' "125 tokens x 8 unread streams" "$held" "$refused" "$rps" "$p99" "$(awk -v a="$rps" -v b="$b_rps" 'BEGIN{printf "%.2fx", a/b}')"
echo "streams open at the broker: $(curl -s "http://127.0.0.1:$BP/metrics" | awk '$1 == "shardnet_event_streams" {print $2}')"
kill $HOLDER
