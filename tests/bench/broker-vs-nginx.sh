#!/bin/bash
# Authenticated heartbeat POSTs against the broker, and the same wrk load
# against nginx answering a static 204, in the same run, in alternating
# rounds. Prints requests/s, p99 latency and the ratio (target >= 1.0x nginx).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
DUR=${DUR:-5s}; CONN=${CONN:-64}; THREADS=${THREADS:-2}; BROKER_THREADS=${BROKER_THREADS:-2}
T=$(mktemp -d); chmod 755 "$T"
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; sleep 0.2; rm -rf "$T"' EXIT
free_port() { "$TOP/tests/harness/free_ports.py" 1; }

# nginx: a static 204 for any method.
NP=$(free_port)
. "$TOP/tests/bench/nginx204.sh"
nginx_204_conf "$T/nginx" "$NP" 2
nginx -c "$T/nginx/nginx.conf" -g 'daemon off;' &
PIDS+=($!)

# The broker, plain HTTP on loopback, with a worker token.
# A job's token, as slurmstepd derives it (the broker takes heartbeats from no other):
# a step of 1000 tasks, one per node heartbeat.lua names (cluster alpha is not the
# broker's, so its token's step is the job's cap: a smaller one answers 409s).
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/worker.key"; chmod 600 "$T/worker.key"
TOKEN=$("$TOP/tests/harness/worker_token.py" "$T/worker.key" bench 1 1000 "$(id -u)" 1 alpha)
cat > "$T/broker.json" <<CONF
{"listen": "127.0.0.1:0", "plain_http": true, "database": "$T/broker.db", "threads": $BROKER_THREADS,
 "limits": {"rate_per_token": 100000000, "rate_burst": 100000000},
 "worker_keys": [{"name": "bench", "key_file": "$T/worker.key"}]}
CONF
"$BUILD/broker/shardnet-broker" --config "$T/broker.json" --port-file "$T/port" 2> "$T/broker.log" &
PIDS+=($!)
for _ in $(seq 50); do [ -s "$T/port" ] && curl -s "127.0.0.1:$NP" >/dev/null && break; sleep 0.1; done
BP=$(cat "$T/port")

# The agent's heartbeat, from 1000 nodes in turn (tests/bench/heartbeat.lua).
export SHARDNET_BENCH_TOKEN=$TOKEN   # read by heartbeat.lua
# CPU time (user + system, clock ticks) of every thread of the given processes.
cpu_ticks() {
    local sum=0 f
    for pid in "$@"; do
        for t in /proc/"$pid"/task/*/stat; do
            read -r -a f < <(sed 's/.*) //' "$t")
            sum=$((sum + f[11] + f[12]))
        done
    done
    echo $sum
}
run_wrk() {  # URL PID... -> "req/s p99_ms server-CPU-us-per-request"
    local url=$1; shift
    local c0 c1; c0=$(cpu_ticks "$@")
    wrk -t"$THREADS" -c"$CONN" -d"$DUR" --latency -s "$TOP/tests/bench/heartbeat.lua" "$url" > "$T/wrk.out" 2>&1
    c1=$(cpu_ticks "$@")
    local rps p99 codes n
    rps=$(awk '/Requests\/sec/ {print $2}' "$T/wrk.out")
    p99=$(awk '$1 == "99%" {print $2}' "$T/wrk.out")
    n=$(awk '/requests in/ {print $1}' "$T/wrk.out")
    codes=$(grep -c "Non-2xx" "$T/wrk.out" || true)
    [ "$codes" = 0 ] || { echo "non-2xx answers from $url:" >&2; cat "$T/wrk.out" >&2; }
    echo "$rps $p99 $(/usr/bin/python3 -c "print('%.2f' % (($c1 - $c0) / $(getconf CLK_TCK) / $n * 1e6))")"
}
# Rounds alternate nginx and the broker: on a shared machine the load from
# elsewhere drifts, and a ratio taken within one round is what it can be
# trusted for. Printed: per round, then the medians.
ROUNDS=${ROUNDS:-5}
# CPU: the server's own (user + system) per request, all its threads.
NGINX_PIDS=$(cat "$T/nginx/nginx.pid"; pgrep -P "$(cat "$T/nginx/nginx.pid")")
printf '%-7s %12s %10s %8s %12s %10s %8s %8s\n' "round" "nginx req/s" "p99" "CPU/req" "broker req/s" "p99" "CPU/req" "ratio"
: > "$T/rounds"
for r in $(seq "$ROUNDS"); do
    # shellcheck disable=SC2086
    read -r n_rps n_p99 n_cpu < <(run_wrk "http://127.0.0.1:$NP" $NGINX_PIDS)
    read -r b_rps b_p99 b_cpu < <(run_wrk "http://127.0.0.1:$BP" "${PIDS[1]}")
    ratio=$(/usr/bin/python3 -c "print('%.2f' % ($b_rps / $n_rps))")
    printf '%-7s %12s %10s %6sus %12s %10s %6sus %7sx\n' "$r" "$n_rps" "$n_p99" "$n_cpu" "$b_rps" "$b_p99" "$b_cpu" "$ratio"
    echo "$n_rps $n_p99 $b_rps $b_p99 $ratio $n_cpu $b_cpu" >> "$T/rounds"
done
accepted=$(curl -s "127.0.0.1:$BP/metrics" | awk '$1 == "shardnet_heartbeats_total" {print $2}')
/usr/bin/python3 - "$T/rounds" "$THREADS" "$CONN" "$DUR" "$BROKER_THREADS" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
def ms(v):  # wrk prints 812.00us, 3.62ms or 1.02s
    for unit, f in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if v.endswith(unit): return float(v[:-len(unit)]) * f
med = lambda i, f=float: st.median(f(r[i]) for r in rows)
print("wrk -t%s -c%s -d%s per round, heartbeat POST from 1000 nodes, median of %d rounds:" % (sys.argv[2], sys.argv[3], sys.argv[4], len(rows)))
print("  %-52s %12.0f req/s  p99 %6.2f ms" % ("nginx, static 204", med(0), med(1, ms)))
print("  %-52s %12.0f req/s  p99 %6.2f ms" % ("shardnet-broker, authenticated heartbeat (%s threads)" % sys.argv[5], med(2), med(3, ms)))
print("  %-52s %12.2fx  (rounds: %s; target >= 1.0x)" % ("ratio broker / nginx", med(4), " ".join(r[4] for r in rows)))
print("  %-52s %9.2f us nginx, %.2f us broker" % ("server CPU per request (user + system)", med(5), med(6)))
PY
echo "heartbeats accepted by the broker: $accepted"
