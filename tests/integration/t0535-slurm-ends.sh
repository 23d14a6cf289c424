#!/bin/bash
# How Slurm ended a job decides, every node alive. 1: an admin's `scontrol
# requeue` of a running 2-node job: the batch script is killed, and that is
# no failure: REQUEUED (Slurm's own, counted apart), the run stays RUNNING,
# nothing is submitted by ShardNet, and when Slurm starts the job again the
# same attempt goes on. 2: the user's own scancel: CANCELLED, not FAILED.
. "$(dirname "$0")/lib.sh"
start_broker 600
for c in alpha beta; do plugstack $c "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"; done
cat > "$WORK/train.sh" <<'SH'
#!/bin/bash
echo "rank=$SHARDNET_RANK attempt=$SHARDNET_ATTEMPT restart=${SLURM_RESTART_COUNT:-0}"
for s in $(seq 1 600); do echo $s > "$SHARDNET_PROGRESS"; sleep 0.5; done
SH
chmod 755 "$WORK/train.sh"
events() { broker_get "/v1/runs/$1/events"; }

# 1. Slurm's own requeue.
j=$(as_user alpha sbatch --parsable -N2 -n2 --requeue -o "$WORK/rq-%j.out" --shardnet=slurm-rq --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
wait_for 30 'sum(1 for w in v["workers"] if w["node"].endswith("/0") and w["health"] == "healthy") == 2' /v1/runs/slurm-rq || fail "slurm-rq never ran on 2 nodes"
slurm alpha scontrol requeue "$j"
wait_for 60 'any(e["kind"] == "REQUEUED" for e in v["events"])' /v1/runs/slurm-rq/events || fail "no REQUEUED: $(events slurm-rq)"
events slurm-rq | /usr/bin/python3 -c '
import json, sys
ev = json.load(sys.stdin)["events"]
r = [e for e in ev if e["kind"] == "REQUEUED"][0]
assert r["cause"].startswith("Slurm requeued job " + sys.argv[1] + " itself"), r["cause"]
assert r["evidence"]["slurm_job_state"] in ("PENDING", "REQUEUED", "REQUEUE_HOLD"), r["evidence"]
bad = [e["kind"] for e in ev if e["kind"] in ("FAILED", "FAULT", "PLACEMENT", "CANCELLED")]
assert not bad, bad' "$j" || fail "Slurm's requeue was judged a failure: $(events slurm-rq)"
broker_get /v1/runs/slurm-rq | grep -q '"state":"RUNNING"' || fail "the run is not RUNNING after Slurm's requeue: $(broker_get /v1/runs/slurm-rq)"
curl -s "$BROKER_URL/metrics" | grep -q '^shardnet_slurm_requeues_total 1' || fail "Slurm's requeue not counted apart"
[ "$(slurm alpha squeue -h -u "$TEST_USER" | wc -l)" = 1 ] || fail "ShardNet submitted a job beside Slurm's requeued one: $(slurm alpha squeue -u "$TEST_USER")"
ok "scontrol requeue of job $j: REQUEUED (Slurm's own, counted apart), the run stays RUNNING, nothing else submitted"
# Slurm holds a requeued job until its credentials expire (~120 s), then starts it again.
for _ in $(seq 200); do grep -q 'restart=1' "$WORK/rq-$j.out" 2>/dev/null && break; sleep 1; done
grep -q 'restart=1' "$WORK/rq-$j.out" || fail "Slurm did not start job $j again: $(slurm alpha squeue -j "$j")"
wait_for 30 'sum(1 for w in v["workers"] if w["node"].endswith("/0") and w["health"] == "healthy" and w["attempt"] == 1) == 2' /v1/runs/slurm-rq \
    || fail "the restarted job's ranks do not report: $(broker_get /v1/runs/slurm-rq)"
broker_get /v1/runs/slurm-rq | grep -q '"state":"RUNNING"' || fail "not RUNNING once Slurm started it again"
ok "Slurm started job $j again: attempt 1 goes on, its ranks report, the run RUNNING"
slurm alpha scancel "$j"

# 2. The user's scancel.
k=$(as_user alpha sbatch --parsable -N1 -n1 -o "$WORK/cx-%j.out" --shardnet=slurm-cx --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
wait_for 30 'any(w["node"].endswith("/0") for w in v["workers"])' /v1/runs/slurm-cx || fail "slurm-cx never ran"
as_user alpha scancel "$k"
wait_for 60 'v["state"] != "RUNNING"' /v1/runs/slurm-cx || fail "slurm-cx still RUNNING after scancel"
broker_get /v1/runs/slurm-cx | grep -q '"state":"CANCELLED"' || fail "scancel ended the run as $(broker_get /v1/runs/slurm-cx | grep -o '"state":"[A-Z]*"'): $(events slurm-cx)"
ok "the user's scancel of job $k: CANCELLED, not FAILED"
