#!/bin/bash
# The demo, for now: two real local Slurm clusters, a shardnet-broker, the
# nodes probed into it, a 2-node --shardnet job as an unprivileged user, its
# environment contract, the run as the broker saw it (workers, steps,
# events), then teardown.
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
echo "== starting shardnet-broker"
BPORT=$("$H/free_ports.py" 1)
AGENT_TOKEN=agent-$RANDOM$RANDOM; ADMIN_TOKEN=admin-$RANDOM$RANDOM
echo "$AGENT_TOKEN" > "$SCRATCH/agent.token"; chmod 600 "$SCRATCH/agent.token"
cat > "$SCRATCH/broker.json" <<CONF
{"listen": "127.0.0.1:$BPORT", "plain_http": true, "database": "$SCRATCH/broker.db", "cluster": "beta",
 "detector": {"misses": 3, "stall_seconds": 60, "summary_seconds": 1},
 "tokens": [{"name": "agents", "scope": "worker", "sha256": "$(printf %s "$AGENT_TOKEN" | sha256sum | cut -d' ' -f1)"},
            {"name": "ops", "scope": "admin", "sha256": "$(printf %s "$ADMIN_TOKEN" | sha256sum | cut -d' ' -f1)"}]}
CONF
"$BUILD/broker/shardnet-broker" --config "$SCRATCH/broker.json" 2> "$SCRATCH/broker.log" &
RX=$!
for _ in $(seq 100); do curl -s "127.0.0.1:$BPORT/v1/health" >/dev/null && break; sleep 0.05; done
B=http://127.0.0.1:$BPORT
"$H/clusters.sh" plugstack "$SCRATCH" beta "broker=$B token_file=$SCRATCH/agent.token heartbeat_min=1"
for n in beta1 beta2; do
    "$BUILD/hwloc-probe/shardnet-probe" --host "$n" --publish "$B" --token-file "$SCRATCH/agent.token" > /dev/null
done
echo "probed beta1, beta2 into the broker: $("$BUILD/hwloc-probe/shardnet-probe" --slurm-node --host beta1)"
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
echo "== the run as the broker saw it"
/usr/bin/python3 - "$B" "$ADMIN_TOKEN" <<'PY'
import json, sys, time, urllib.request
base, token = sys.argv[1], sys.argv[2]
def get(path):
    req = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + token})
    return json.load(urllib.request.urlopen(req, timeout=5))
r = get("/v1/runs/demo-run")
print(f"run {r['id']}  state {r['state']}  attempt {r['attempt']}")
for w in sorted(r["workers"], key=lambda w: w["node"]):
    print(f"  worker {w['node']:12} ranks {w['ranks']}  last step {w['step']}  ended {w['ended']}")
for e in get("/v1/runs/demo-run/events")["events"]:
    print(time.strftime("%H:%M:%S", time.localtime(e["time"])), f"{e['kind']:10}", e["cause"])
PY
echo "heartbeats taken: $(curl -s "$B/metrics" | awk '$1 == "shardnet_heartbeats_total" {print $2}')"
echo
echo "== tearing down"
