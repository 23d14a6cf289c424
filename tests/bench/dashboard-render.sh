#!/bin/bash
# The dashboard's cost: a standalone broker holding RUNS (1,000) runs and
# EVENTS (20,000) events, one run with BIG (2,000) of them
# (dashboard_fill.py, straight into its database before it starts); time to
# first render of the runs page and of that run's page in Debian's chromium
# (median of ROUNDS, target <= 300 ms each); then heartbeat throughput
# (wrk, tests/bench/heartbeat.lua as in broker-vs-nginx.sh) without and
# with a browser on the UI (runs page refreshing, run page following).
# Usage: tests/bench/dashboard-render.sh [BUILD]
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
BROKER=$BUILD/broker/shardnet-broker
RUNS=${RUNS:-1000}; EVENTS=${EVENTS:-20000}; BIG=${BIG:-2000}; ROUNDS=${ROUNDS:-5}
DUR=${DUR:-10}; CONN=${CONN:-64}; THREADS=${THREADS:-2}
T=$(mktemp -d); chmod 755 "$T"; BROKER_PID=""; POLL=""
trap '[ -n "$POLL" ] && kill $POLL 2>/dev/null; [ -n "$BROKER_PID" ] && kill -9 $BROKER_PID 2>/dev/null && wait $BROKER_PID 2>/dev/null; rm -rf "$T"' EXIT
. "$TOP/tests/web/lib.sh"
web_deps
web_config "$T/broker.db"
# A job's token for the heartbeats, as slurmstepd derives it.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/worker.key"; chmod 600 "$T/worker.key"
export SHARDNET_BENCH_TOKEN
SHARDNET_BENCH_TOKEN=$("$TOP/tests/harness/worker_token.py" "$T/worker.key" bench 1 1000 "$(id -u)" 1 alpha)
/usr/bin/python3 - "$T/broker.json" "$T/worker.key" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update({"threads": 2, "worker_keys": [{"name": "bench", "key_file": sys.argv[2]}],
          "limits": {"rate_per_token": 100000000, "rate_burst": 100000000}})
json.dump(c, open(sys.argv[1], "w"))
PY
web_start; web_stop   # the schema
/usr/bin/python3 "$TOP/tests/bench/dashboard_fill.py" "$T/broker.db" "$RUNS" "$EVENTS" "$BIG" daemon
web_start

echo "time to first render in chromium (navigation start -> page's mark, data on the page), $ROUNDS loads each:"
nice -n 15 node "$TOP/tests/bench/dashboard_render.mjs" "http://127.0.0.1:$P" admin-t run-big "$ROUNDS" > "$T/render.json"
/usr/bin/python3 - "$T/render.json" "$RUNS" "$BIG" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for k, what in (("runs", f"runs page, {sys.argv[2]} runs"), ("run", f"run page, {sys.argv[3]} events")):
    v = r[k]
    print(f"  {what:28s} median {v['median']:6.1f} ms (data there at {v['data']:6.1f} ms)  max {v['max']:6.1f} ms  target <= 300 ms: {'met' if v['median'] <= 300 else 'NOT met'}  loads {v['all']}")
PY

cpu_ticks() {
    local sum=0 f t
    for t in /proc/"$1"/task/*/stat; do read -r -a f < <(sed 's/.*) //' "$t"); sum=$((sum + f[11] + f[12])); done
    echo $sum
}
hb_round() {  # -> "req/s p99 broker-CPU-us-per-request"
    local c0 c1 n
    c0=$(cpu_ticks "$BROKER_PID")
    wrk -t"$THREADS" -c"$CONN" -d"${DUR}s" --latency -s "$TOP/tests/bench/heartbeat.lua" "http://127.0.0.1:$P" > "$T/wrk.out" 2>&1
    c1=$(cpu_ticks "$BROKER_PID")
    n=$(awk '/requests in/ {print $1}' "$T/wrk.out")
    echo "$(awk '/Requests\/sec/ {print $2}' "$T/wrk.out") $(awk '$1 == "99%" {print $2}' "$T/wrk.out") $(/usr/bin/python3 -c "print('%.2f' % (($c1 - $c0) / $(getconf CLK_TCK) / $n * 1e6))")"
}
# What the UI alone costs the broker: its CPU while a browser follows the
# two pages and no heartbeat comes (the runs page's 2 s refresh of every
# run, the run page's stream and 5 s refresh).
nice -n 15 node "$TOP/tests/bench/dashboard_render.mjs" "http://127.0.0.1:$P" admin-t run-big poll "$((DUR + 8))" &
POLL=$!
sleep 6
u0=$(cpu_ticks "$BROKER_PID"); t0=$(date +%s.%N)
sleep "$DUR"
u1=$(cpu_ticks "$BROKER_PID"); t1=$(date +%s.%N)
wait $POLL || true; POLL=""
ui_cpu=$(/usr/bin/python3 -c "print('%.2f' % (($u1 - $u0) / $(getconf CLK_TCK) / ($t1 - $t0) * 100))")
echo "the UI alone (a browser on the runs page and a run page, no heartbeats): broker CPU ${ui_cpu}% of one core"
echo "heartbeat POSTs (wrk -t$THREADS -c$CONN -d${DUR}s), without and with a browser on the UI:"
read -r a_rps a_p99 a_cpu < <(hb_round)
nice -n 15 node "$TOP/tests/bench/dashboard_render.mjs" "http://127.0.0.1:$P" admin-t run-big poll "$((DUR + 8))" &
POLL=$!
sleep 6   # the pages loaded: what remains is their polling and the stream
read -r b_rps b_p99 b_cpu < <(hb_round)
wait $POLL || true; POLL=""
printf '  %-34s %12s %10s %14s\n' "" "req/s" "p99" "broker CPU/req"
printf '  %-34s %12s %10s %12sus\n' "no browser" "$a_rps" "$a_p99" "$a_cpu"
printf '  %-34s %12s %10s %12sus\n' "browser on runs + run page" "$b_rps" "$b_p99" "$b_cpu"
/usr/bin/python3 -c "print('  %-34s %11.2fx' % ('with / without', $b_rps / $a_rps))"
/usr/bin/python3 -c "print('  %-34s %12s us of it the UI alone costs per heartbeat (%s%% of a core / %s req/s)' % ('', '%.2f' % ($ui_cpu / 100 / $b_rps * 1e6), '$ui_cpu', '$b_rps'))"
echo "(2 CPUs here: chromium's own CPU competes with wrk and the broker; broker CPU/req says what the broker pays)"
