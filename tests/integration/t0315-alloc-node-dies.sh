#!/bin/bash
# A node of a job's allocation dies before any worker there has reported
# (the batch script has not started its srun yet). The broker watches the
# allocation's nodes from the batch step's first heartbeat, so the failure is
# a FAULT within the deadline, confirmed with Slurm (slurmd unreachable),
# while Slurm itself still calls the job RUNNING and the node not DOWN.
. "$(dirname "$0")/lib.sh"
start_broker 600
plugstack beta "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"
j=$(as_user beta sbatch --parsable -N2 -o "$WORK/an-%j.out" --shardnet=an-run --shardnet-heartbeat=1 --shardnet-requeue=off \
    --wrap "sleep 120; srun hostname")
wait_for 20 'any(w["node"].endswith("/batch") for w in v["workers"])' /v1/runs/an-run || fail "an-run never ran"
batch=$(slurm beta scontrol -o show job "$j" | grep -o 'BatchHost=[^ ]*' | cut -d= -f2)
victim=$(slurm beta scontrol show hostnames "$(slurm beta squeue -h -j "$j" -o %N)" | grep -vx "$batch")
[ -n "$victim" ] || fail "no second node in job $j"
sleep 1  # the broker reads the job's allocation right after the batch step's first heartbeat
broker_get /v1/runs/an-run | /usr/bin/python3 -c 'import json,sys; v=json.load(sys.stdin); sys.exit(any("/alloc" in w["node"] for w in v["workers"]))' \
    || fail "allocation watches listed as workers"
t0=$(date +%s.%N)
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta "$victim"
wait_for 20 'any(e["kind"] == "FAULT" for e in v["events"])' /v1/runs/an-run/events \
    || fail "no FAULT: $(broker_get /v1/runs/an-run/events)"
dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
broker_get /v1/runs/an-run/events > "$WORK/an-events.json"
cause=$(/usr/bin/python3 - "$victim" "$WORK/an-events.json" <<'PY') || fail "FAULT evidence: $(cat "$WORK/an-events.json")"
import json, sys
victim = sys.argv[1]
f = [e for e in json.load(open(sys.argv[2]))["events"] if e["kind"] == "FAULT"]
assert len(f) == 1, f
ev = f[0]["evidence"]
assert ev["node"] == victim + "/alloc" and ev["no_worker_yet"] is True, ev
assert ev["slurmd_answers"] is False and ev["slurm_job_state"] == "RUNNING", ev
assert "DOWN" not in ev["slurm_node_state"], ev
assert "no worker there yet" in f[0]["cause"], f[0]["cause"]
print(f[0]["cause"])
PY
ok "allocation node $victim killed before any worker there: FAULT ${dt}s later, while Slurm still had job $j RUNNING: $cause"
slurm beta scancel "$j"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta "$victim"
for _ in $(seq 150); do slurm beta sinfo -h -n "$victim" -o %T | grep -qx idle && break; sleep 0.2; done
