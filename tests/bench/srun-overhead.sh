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
SCRATCH=$(mktemp -d /tmp/shardnet-bench.XXXXXX); chmod 755 "$SCRATCH"
RX=""
cleanup() { [ -n "$RX" ] && kill $RX 2>/dev/null; "$HERE/harness/clusters.sh" down "$SCRATCH"; }
trap cleanup EXIT
SHARDNET_NODES=1 "$HERE/harness/clusters.sh" up "$SCRATCH" "$BUILD" bench >/dev/null
export SLURM_CONF=$SCRATCH/bench/slurm.conf
cd "$SCRATCH"

start_rx() {  # MODE: port in $SCRATCH/rx.MODE
    /usr/bin/python3 "$HERE/harness/receiver.py" --mode "$1" --port-file "$SCRATCH/rx.$1" --log "$SCRATCH/rx.log" \
        >/dev/null 2>&1 &
    RX="$RX $!"
    for _ in $(seq 50); do [ -s "$SCRATCH/rx.$1" ] && break; sleep 0.1; done
}
start_rx ok; ok_port=$(cat "$SCRATCH/rx.ok")
start_rx blackhole; bh_port=$(cat "$SCRATCH/rx.blackhole")
# The plugstack line the harness writes, with the broker argument varied.
base=$(printf 'required %s/lib/shardnet.so agent=%s/lib/shardnet-agent' "$SCRATCH" "$SCRATCH")
/usr/bin/python3 "$HERE/bench/srun_overhead.py" "$SLURM_CONF" "$SCRATCH/bench/plugstack.conf" "$RUNS" \
    "none=none::" \
    "loaded=$base::" \
    "receiver=$base broker=http://127.0.0.1:$ok_port heartbeat_min=1::--shardnet" \
    "blackhole=$base broker=http://127.0.0.1:$bh_port heartbeat_min=1::--shardnet" > "$SCRATCH/results"
row() { awk -F'\t' -v n="$1" '$1 == n { printf "%10s %8s", $2, $3 }' "$SCRATCH/results"; }
printf '%-44s %10s %8s %8s\n' "srun -N1 true, median of $RUNS (interleaved)" "ms" "ratio" "target"
printf '%-44s %s %8s\n' "no plugin" "$(row none)" "-"
printf '%-44s %s %8s\n' "plugin loaded, job without --shardnet" "$(row loaded)" "<=1.03"
printf '%-44s %s %8s\n' "--shardnet, receiver up" "$(row receiver)" "<=1.05"
printf '%-44s %s %8s\n' "--shardnet, broker blackholed" "$(row blackhole)" "<=1.05"
