#!/bin/bash
# Issue 31, tier 1 on a busy cluster: a node of a 2-node job dies while
# another user's job holds every other node (gamma, 4 nodes, a broker of
# its own: --shardnet-requeue=local has nowhere else to go). No node is
# idle, but nodes in use will be: the new attempt is submitted at once and
# waits in Slurm's queue (the job's own survivor and the other user's nodes
# may take it, the dead node never: --exclude), instead of being left
# DEGRADED for good. When the other job ends, the attempt starts and the run
# is RECOVERED on healthy nodes, resumed from its checkpoint.
. "$(dirname "$0")/lib.sh"
"$HARNESS/clusters.sh" add "$SCRATCH" "$BUILD" gamma 4 >/dev/null || fail "the 4-node cluster gamma did not come up"
cleanup_gamma() { "$HARNESS/clusters.sh" remove "$SCRATCH" gamma || true; cleanup_lib; }
trap cleanup_gamma EXIT
# The broker sees gamma only.
cp "$SCRATCH/clusters" "$SCRATCH/clusters.all"; echo gamma > "$SCRATCH/clusters"
start_broker 600
mv "$SCRATCH/clusters.all" "$SCRATCH/clusters"
plugstack gamma "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"
show_events() {
    broker_get "/v1/runs/$1/events" | /usr/bin/python3 -c '
import json, sys, time
for e in json.load(sys.stdin)["events"]:
    if e["kind"] != "SEALED": print("   ", time.strftime("%H:%M:%S", time.localtime(e["time"])), "%-11s" % e["kind"], e["cause"][:220])'
}
cat > "$WORK/job.sh" <<'SH'
#!/bin/bash
echo "attempt=$SHARDNET_ATTEMPT resume=$SHARDNET_RESUME nodes=$SLURM_JOB_NODELIST"
srun sleep 600
SH
chmod 755 "$WORK/job.sh"

j=$(as_user gamma sbatch --parsable -N2 --ntasks-per-node=1 -o "$WORK/full-%j.out" --shardnet=full --shardnet-requeue=local \
    --shardnet-heartbeat=1 "$WORK/job.sh")
wait_for 60 'v["state"] == "RUNNING"' /v1/runs/full || fail "the run did not start: $(show_events full)"
mine=$(SLURM_CONF=$SCRATCH/gamma/slurm.conf scontrol show hostnames "$(slurm gamma squeue -h -j "$j" -o %N)")
victim=$(head -1 <<<"$mine")
others=$(slurm gamma sinfo -h -N -p main -o %N | grep -vxF "$mine" | paste -sd,)
blocker=$(as_other gamma sbatch --parsable -N2 -w "$others" --exclusive -o /dev/null --wrap "sleep 40")
for _ in $(seq 100); do [ "$(job_state gamma "$blocker")" = RUNNING ] && break; sleep 0.2; done
[ "$(job_state gamma "$blocker")" = RUNNING ] || fail "the other user's job did not start: $(slurm gamma squeue)"
for _ in $(seq 50); do [ -z "$(slurm gamma sinfo -h -t idle -o %N)" ] && break; sleep 0.2; done
[ -z "$(slurm gamma sinfo -h -t idle -o %N)" ] || fail "gamma still has idle nodes: $(slurm gamma sinfo; slurm gamma squeue)"
t_block=$(date +%s)
"$HARNESS/clusters.sh" kill-node "$SCRATCH" gamma "$victim"

# 1. Submitted at once, to wait in the queue, never on the dead node.
wait_for 60 'any(e["kind"] == "PLACEMENT" for e in v["events"])' /v1/runs/full/events || fail "no PLACEMENT: $(show_events full)"
show_events full
broker_get /v1/runs/full/events | /usr/bin/python3 -c '
import json, sys
victim = sys.argv[1]
ev = json.load(sys.stdin)["events"]
p = next(e for e in ev if e["kind"] == "PLACEMENT")
assert "queued for 2 node(s): no idle room" in p["cause"] and victim in p["evidence"]["exclude"], p
assert p["evidence"]["new_job"] > 0 and p["evidence"]["queued"] == 2, p["evidence"]' "$victim" || fail "not queued without $victim"
j2=$(broker_get /v1/runs/full/events | /usr/bin/python3 -c '
import json, sys
print(next(e for e in json.load(sys.stdin)["events"] if e["kind"] == "PLACEMENT")["evidence"]["new_job"])')
[ "$(job_state gamma "$j2")" = PENDING ] || fail "attempt 2's job $j2 is $(job_state gamma "$j2"), not waiting ($(slurm gamma squeue))"
slurm gamma scontrol show job "$j2" | grep -q "ExcNodeList=$victim" || fail "job $j2 does not exclude $victim: $(slurm gamma scontrol show job "$j2")"
[ "$(job_state gamma "$blocker")" = RUNNING ] || fail "the other user's job was disturbed: $(job_state gamma "$blocker")"
ok "$victim killed with no idle node: attempt 2 (job $j2) waits in gamma's queue, $victim excluded; the other user's job runs on"

# 2. The other job ends: attempt 2 runs on healthy nodes and the run recovers.
wait_for 120 'v["state"] == "RUNNING" and v["attempt"] == 2' /v1/runs/full || fail "not RECOVERED: $(show_events full) $(slurm gamma squeue)"
dt=$(( $(date +%s) - t_block ))
on=$(SLURM_CONF=$SCRATCH/gamma/slurm.conf scontrol show hostnames "$(slurm gamma squeue -h -j "$j2" -o %N)" | tr '\n' ' ')
grep -qw "$victim" <<<"$on" && fail "attempt 2 runs on the dead node: $on"
show_events full | grep -E "RECOVERED"
grep -q "attempt=2 resume=" "$WORK/full-$j2.out" 2>/dev/null || grep -q "attempt=2" "$WORK"/full-*.out || fail "attempt 2's script did not run: $(cat "$WORK"/full-*.out)"
ok "RECOVERED on $on${dt}s after the other job took the nodes (it held them 40 s)"
slurm gamma scancel "$j2"
"$HARNESS/clusters.sh" start-node "$SCRATCH" gamma "$victim"
