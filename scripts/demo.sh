#!/bin/bash
# The demo, for now: two real local Slurm clusters, a 2-node --shardnet job
# as an unprivileged user, its environment contract and the heartbeats
# received (by the test receiver until the broker lands), then teardown.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
H=$TOP/tests/harness
SCRATCH=$(mktemp -d /tmp/shardnet-demo.XXXXXX); chmod 755 "$SCRATCH"
RX=""
cleanup() { [ -n "$RX" ] && kill "$RX" 2>/dev/null; "$H/clusters.sh" down "$SCRATCH"; }
trap cleanup EXIT
trap 'echo "demo failed; Slurm logs kept in $SCRATCH/*/log" >&2' ERR

echo "== starting clusters alpha and beta (slurmctld + 2 slurmd each, munge)"
"$H/clusters.sh" up "$SCRATCH" "$BUILD" alpha beta
/usr/bin/python3 "$H/receiver.py" --port-file "$SCRATCH/rx.port" --log "$SCRATCH/rx.log" &
RX=$!
for _ in $(seq 50); do [ -s "$SCRATCH/rx.port" ] && break; sleep 0.1; done
"$H/clusters.sh" plugstack "$SCRATCH" beta "broker=http://127.0.0.1:$(cat "$SCRATCH/rx.port") heartbeat_min=1"
cat "$SCRATCH/beta/plugstack.conf"
SLURM_CONF=$SCRATCH/beta/slurm.conf sinfo

mkdir -p "$SCRATCH/job"; chmod 777 "$SCRATCH/job"
cat > "$SCRATCH/job/train.sh" <<'SH'
#!/bin/bash
echo "rank $SHARDNET_RANK/$SHARDNET_WORLD_SIZE on $SLURMD_NODENAME (local $SHARDNET_LOCAL_RANK): run=$SHARDNET_RUN attempt=$SHARDNET_ATTEMPT ckpt=$SHARDNET_CKPT_DIR every=$SHARDNET_CKPT_EVERY resume='$SHARDNET_RESUME_FROM'"
for step in $(seq 1 8); do echo "$step" > "$SHARDNET_PROGRESS"; sleep 0.5; done
SH
chmod 755 "$SCRATCH/job/train.sh"
echo
echo "== sbatch -N2 -n4 --shardnet=demo-run --shardnet-heartbeat=1 --shardnet-ckpt-every=100 (as user shardtest, cluster beta)"
cd "$SCRATCH/job"
j=$(runuser -u shardtest -- env SLURM_CONF="$SCRATCH/beta/slurm.conf" sbatch --parsable -N2 -n4 -o "$SCRATCH/job/out" \
    --shardnet=demo-run --shardnet-heartbeat=1 --shardnet-ckpt-every=100 --wrap "srun $SCRATCH/job/train.sh")
for _ in $(seq 100); do SLURM_CONF=$SCRATCH/beta/slurm.conf squeue -h -j "$j" | grep -q . || break; sleep 0.2; done
sort "$SCRATCH/job/out"
echo
echo "== heartbeats received"
/usr/bin/python3 - "$SCRATCH/rx.log" <<'PY'
import json, sys, time
for line in open(sys.argv[1]):
    r = json.loads(line); b = r["body"]
    ranks = " ".join(f"r{x['rank']}:step={x['step']}" + (f" exit={x['exit']['code']}" if x["exit"] else "") for x in b["ranks"])
    print(f"{time.strftime('%H:%M:%S', time.localtime(r['t']))} {b['cluster']}/{b['node']:7} {b['job']}.{b['step']:5} seq={b['seq']:<2} {b['state']:7} {ranks}")
PY
echo
echo "== tearing down"
