#!/bin/bash
# What the plugin costs a job step: median wall time of `srun -N1 true`
# over RUNS runs on a real local cluster, for
#   none        no plugin in plugstack.conf
#   loaded      plugin loaded, job without --shardnet
#   receiver    --shardnet, heartbeat receiver up
#   blackhole   --shardnet, broker accepts connections and never answers
# and the ratios to `none`. Targets: loaded <= 1.03x, --shardnet <= 1.05x.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
RUNS=${RUNS:-40}
command -v hyperfine >/dev/null || { echo "bench: hyperfine not installed (make deps)"; exit 1; }
SCRATCH=$(mktemp -d /tmp/shardnet-bench.XXXXXX); chmod 755 "$SCRATCH"
RX=""
cleanup() { [ -n "$RX" ] && kill $RX 2>/dev/null; "$HERE/harness/clusters.sh" down "$SCRATCH"; }
trap cleanup EXIT
SHARDNET_NODES=1 "$HERE/harness/clusters.sh" up "$SCRATCH" "$BUILD" bench >/dev/null
export SLURM_CONF=$SCRATCH/bench/slurm.conf
cd "$SCRATCH"

measure() {  # NAME PLUGSTACK-LINE|"" SRUN-ARGS...
    local name=$1 line=$2; shift 2
    if [ "$line" = none ]; then : > "$SCRATCH/bench/plugstack.conf"
    else "$HERE/harness/clusters.sh" plugstack "$SCRATCH" bench "$line"; fi
    hyperfine -N --style none --warmup 3 --runs "$RUNS" --export-json "$SCRATCH/$name.json" \
        "srun -N1 $* true" >/dev/null 2>&1
    /usr/bin/python3 -c 'import json,sys,statistics as s
r=json.load(open(sys.argv[1]))["results"][0]["times"]; print("%.2f" % (s.median(r)*1000))' "$SCRATCH/$name.json"
}
start_rx() {
    rm -f "$SCRATCH/rx.port"
    /usr/bin/python3 "$HERE/harness/receiver.py" --mode "$1" --port-file "$SCRATCH/rx.port" --log "$SCRATCH/rx.log" &
    RX=$!
    for _ in $(seq 50); do [ -s "$SCRATCH/rx.port" ] && break; sleep 0.1; done
}

none=$(measure none none)
loaded=$(measure loaded "")
start_rx ok
recv=$(measure receiver "broker=http://127.0.0.1:$(cat "$SCRATCH/rx.port") heartbeat_min=1" --shardnet)
kill $RX; start_rx blackhole
black=$(measure blackhole "broker=http://127.0.0.1:$(cat "$SCRATCH/rx.port") heartbeat_min=1" --shardnet)
kill $RX; RX=""

ratio() { /usr/bin/python3 -c "print('%.3f' % ($1 / $none))"; }
printf '%-44s %10s %8s %8s\n' "srun -N1 true, median of $RUNS" "ms" "ratio" "target"
printf '%-44s %10s %8s %8s\n' "no plugin" "$none" "1.000" "-"
printf '%-44s %10s %8s %8s\n' "plugin loaded, job without --shardnet" "$loaded" "$(ratio "$loaded")" "<=1.03"
printf '%-44s %10s %8s %8s\n' "--shardnet, receiver up" "$recv" "$(ratio "$recv")" "<=1.05"
printf '%-44s %10s %8s %8s\n' "--shardnet, broker blackholed" "$black" "$(ratio "$black")" "<=1.05"
