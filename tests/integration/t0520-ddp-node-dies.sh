#!/bin/bash
# Issue 27: a job shaped like PyTorch's multinode DDP tutorial (2 nodes x 1
# task, one srun task per rank, gloo). When a node dies, the survivor's
# collective fails at once and the batch script exits non-zero long before
# Slurm marks the node down; the broker classifies that end with Slurm
# (the dead node's slurmd does not answer) as a FAULT and recovers the run
# (here on alpha: beta has no second node left) from its checkpoint. When a
# rank fails on its own with every node alive, the run is FAILED within
# seconds, naming that rank, its node, its exit code, and no requeue.
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (scripts/install-deps.sh installs it)"
start_broker 600
for c in alpha beta; do plugstack $c "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"; done
cp "$(dirname "$0")/../../etc/examples/pytorch/train.py" "$WORK/train.py"; chmod 755 "$WORK/train.py"
cp -r "$(dirname "$0")/../../python/shardnet" "$WORK/shardnet"; chmod -R a+rX "$WORK/shardnet"
CK=$TEST_HOME/.shardnet/checkpoints
show_events() {
    broker_get "/v1/runs/$1/events" | /usr/bin/python3 -c '
import json, sys, time
for e in json.load(sys.stdin)["events"]:
    if e["kind"] != "SEALED": print("   ", time.strftime("%H:%M:%S", time.localtime(e["time"])), "%-10s" % e["kind"], e["cause"][:200])'
}

# 1. A node dies. The heartbeat interval (20 s: a deadline of 60 s) keeps
# the detector's silence verdict out of it: the batch script's exit is what
# the broker hears first, and must not be taken as the run's end. (The
# agent commits checkpoints at its heartbeats: the first seal comes at 20 s.)
j=$(as_user beta sbatch --parsable -N2 --ntasks-per-node=1 -o "$WORK/ddp-%j.out" --shardnet=ddp-node \
    --shardnet-heartbeat=20 --shardnet-ckpt-every=10 --wrap "srun /usr/bin/python3 $WORK/train.py --steps 400 --step-seconds 0.1")
wait_for 90 'any(e["kind"] == "SEALED" and e["evidence"]["checkpoint"] >= "checkpoint-000010" for e in v["events"])' /v1/runs/ddp-node/events \
    || fail "ddp-node sealed nothing: $(broker_get /v1/runs/ddp-node/events) $(tail -5 "$WORK"/ddp-*.out)"
t0=$(date +%s.%N)
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
wait_for 60 'any(e["kind"] in ("FAULT", "FAILED") for e in v["events"])' /v1/runs/ddp-node/events || fail "no verdict: $(show_events ddp-node)"
dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
show_events ddp-node
broker_get /v1/runs/ddp-node/events | /usr/bin/python3 -c '
import json, sys
ev = json.load(sys.stdin)["events"]
assert not any(e["kind"] == "FAILED" for e in ev), "the run was ended FAILED"
f = next(e for e in ev if e["kind"] == "FAULT")
# The classification of the failed rank of the survivor (or of the end
# of the batch script), not the silence verdict of the detector.
assert "beta2 died" in f["cause"] and ("rank 0 exited" in f["cause"] or "batch script" in f["cause"]), f["cause"]
assert f["evidence"]["node_failure"] is True, f["evidence"]' || fail "the batch end was not classified as beta2's death"
ok "beta2 killed: the survivor's rank failed; FAULT (node beta2 died) ${dt}s after the kill, not FAILED"
wait_for 150 'v["state"] == "SUCCEEDED"' /v1/runs/ddp-node || fail "ddp-node did not finish: $(show_events ddp-node) $(tail -8 "$WORK"/ddp-*.out)"
show_events ddp-node | grep -E "PLACEMENT|RECOVERED|SUCCEEDED"
grep -q "resumed from checkpoint-" "$WORK/ddp-$j.out" || fail "attempt 2 did not resume from a checkpoint: $(tail -5 "$WORK/ddp-$j.out")"
grep 'resumed from\|done at step' "$WORK/ddp-$j.out" | sed 's/^/  /'
ok "recovered on alpha from its sealed checkpoint and SUCCEEDED"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2
for _ in $(seq 150); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done

# 2. A program's own error: rank 1 raises at step 8 (exit 3), rank 0's
# collective fails after it. Every node is alive: FAILED, rank 1 named, and
# rank 1's last words (srun forwards them to the batch script's standard
# error, here the -o file) in the FAILED event and `shard show`. Rank 0
# leaves quietly: its own traceback would be the tail's last lines, and the
# line checked here is rank 1's.
cat > "$WORK/ddp_bug.py" <<'PY'
import datetime, os, sys, time
import torch, torch.distributed as dist
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
os.environ.setdefault("USE_LIBUV", "0")   # Debian 13's torch has no libuv (doc/slurm-versions.md)
dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
t = torch.ones(4)
for step in range(1, 1000):
    if rank == 1 and step == 8:
        print(f"ValueError: rank 1 got a malformed batch at step {step} (t0520-bug-marker)", file=sys.stderr, flush=True)
        sys.exit(3)
    try:
        dist.all_reduce(t)
    except RuntimeError:
        sys.exit(1)
    with open(os.environ["SHARDNET_PROGRESS"], "w") as f:
        f.write(f"{step}\n")
    time.sleep(0.1)
PY
chmod 755 "$WORK/ddp_bug.py"
j=$(as_user beta sbatch --parsable -N2 --ntasks-per-node=1 -o "$WORK/bug-%j.out" --shardnet=ddp-bug \
    --shardnet-heartbeat=30 --wrap "srun /usr/bin/python3 $WORK/ddp_bug.py")
wait_job beta "$j" 120
t_end=$(date +%s.%N)
wait_for 10 'v["state"] in ("FAILED", "DEGRADED", "RECOVERING")' /v1/runs/ddp-bug || fail "ddp-bug has no verdict: $(show_events ddp-bug)"
show_events ddp-bug
broker_get /v1/runs/ddp-bug/events | /usr/bin/python3 -c '
import json, sys
ev = json.load(sys.stdin)["events"]
assert not any(e["kind"] in ("FAULT", "PLACEMENT") for e in ev), "a program error was taken for a fault"
f = next(e for e in ev if e["kind"] == "FAILED")
ff = f["evidence"]["first_failure"]
assert ff["rank"] == 1 and ff["node"] == "beta2" and ff["exit_code"] == 3, f
assert f["cause"].startswith("rank 1 on beta2 exited 3"), f["cause"]' || fail "ddp-bug's FAILED does not name rank 1 on beta2, exit 3"
broker_get /v1/runs/ddp-bug/events | /usr/bin/python3 -c '
import json, sys
f = [e for e in json.load(sys.stdin)["events"] if e["kind"] == "FAILED"][0]
line = "ValueError: rank 1 got a malformed batch at step 8 (t0520-bug-marker)"
assert line in f["evidence"]["stderr_tail"].split("\n"), f["evidence"]
assert f["cause"].endswith("; stderr: " + line), f["cause"]' || fail "ddp-bug's FAILED lacks rank 1's stderr line: $(tail -12 "$WORK/bug-$j.out")"
show=$(SHARD_BROKER=$BROKER_URL SHARD_TOKEN=$ADMIN_TOKEN "$BUILD/sbatch-wrappers/shard" show ddp-bug)
echo "$show" | sed -n '/^FAILED/,$p' | sed 's/^/  /'
grep -q "^    | ValueError: rank 1 got a malformed batch at step 8 (t0520-bug-marker)$" <<<"$show" || fail "shard show lacks the stderr tail: $show"
failed_at=$(broker_get /v1/runs/ddp-bug/events | /usr/bin/python3 -c 'import json,sys; print([e["time"] for e in json.load(sys.stdin)["events"] if e["kind"] == "FAILED"][0])')
lag=$(awk -v a="$t_end" -v b="$failed_at" 'BEGIN{printf "%.1f", b-a}')
awk -v l="$lag" 'BEGIN{exit !(l < 5)}' || fail "FAILED came ${lag}s after the job left the queue"
[ "$(slurm beta squeue -h -u "$TEST_USER"; slurm alpha squeue -h -u "$TEST_USER")" = "" ] || fail "a job was submitted for a program's error"
ok "rank 1 exits 3 with every node alive: FAILED (${lag}s after the job ended), naming rank 1 on beta2, exit 3 and its stderr line; no requeue"
