#!/bin/bash
# Seconds from a node's death to training again, per recovery tier, for one
# job shape: 2 ranks of PyTorch DDP (gloo, one srun task per rank, one rank
# per node), the example trainer, a checkpoint sealed every 10 steps; rank
# 0's node killed -9 (slurmd, step daemons and tasks at once), on the real
# harness (SlurmdTimeout=10):
#   tier 0  in the allocation: sbatch -N3 --no-kill --shardnet-spares=1 and
#           `shard launch` relaunch the step on the survivor and the spare
#           (cluster gamma, 4 nodes, its own broker);
#   tier 1  a new job on the same cluster (--shardnet-requeue=local, gamma),
#           idle: two nodes free; full: another user's 40 s job holds them,
#           so the new job waits in the queue;
#   tier 2  a peer broker's cluster (beta has no room left: alpha, through
#           broker A).
# For each: kill -> FAULT (detection), kill -> the step relaunched or the
# new attempt's first heartbeat (RESTARTED / RECOVERED), kill -> rank 0
# training again (its "resumed from" line), the steps it redid, and each
# tier's time to training against tier 0's.
#   tests/bench/recovery-tiers.sh [BUILD]
set -uo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
[ "$(id -u)" = 0 ] || { echo "recovery-tiers: must run as root (starts Slurm daemons)"; exit 1; }
exec 9>/tmp/shardnet-harness.lock
flock -n 9 || { echo "recovery-tiers: another harness run holds /tmp/shardnet-harness.lock; waiting"; flock 9; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "recovery-tiers: python3-torch is not installed"; exit 1; }
SCRATCH=$(mktemp -d /tmp/shardnet-bench.XXXXXX); chmod 755 "$SCRATCH"
trap '"$TOP/tests/harness/clusters.sh" down "$SCRATCH" 9>&-' EXIT
"$TOP/tests/harness/clusters.sh" up "$SCRATCH" "$BUILD" alpha beta 9>&- || exit 1
export SCRATCH BUILD
. "$TOP/tests/integration/lib.sh"
"$HARNESS/clusters.sh" add "$SCRATCH" "$BUILD" gamma 4 >/dev/null 9>&- || fail "the 4-node cluster gamma did not come up"
trap 'cleanup_lib; "$TOP/tests/harness/clusters.sh" down "$SCRATCH" 9>&-' EXIT
# gamma's own broker (gamma only, so that a local requeue stays there); no
# quarantine: each tier's victim is back before the next tier starts.
export DETECTOR_EXTRA='"quarantine_seconds": 0'
cp "$SCRATCH/clusters" "$SCRATCH/clusters.all"; echo gamma > "$SCRATCH/clusters"
start_broker 600 9>&-
mv "$SCRATCH/clusters.all" "$SCRATCH/clusters"
plugstack gamma "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"
start_federation 9>&-
cp "$TOP/etc/examples/pytorch/train.py" "$WORK/train.py"
cp -r "$TOP/python/shardnet" "$WORK/shardnet"
install -m 755 "$BUILD/sbatch-wrappers/shard" "$WORK/shard"
chmod -R a+rX "$WORK/shardnet" "$WORK/train.py"
TRAIN="/usr/bin/python3 $WORK/train.py --steps 3000 --step-seconds 0.1"
COMMON=(--ntasks-per-node=1 --shardnet-heartbeat=1 --shardnet-ckpt-every=10)

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b-a}'; }
# KIND, the events on stdin: the time of the first event of that kind, or "".
first_event() { /usr/bin/python3 -c 'import json,sys
t=[e["time"] for e in json.load(sys.stdin)["events"] if e["kind"] == sys.argv[1]]
print(t[0] if t else "")' "$1"; }
# PATTERN A: waits for rank 0 of attempt A to say it resumed, in any output
# of the tier; its time seen, and the step it resumed at.
training_again() {
    local pattern=$1 attempt=$2 f
    for _ in $(seq 900); do
        for f in $pattern; do
            [ -f "$f" ] || continue
            if grep -q "^\[rank 0 attempt $attempt\] resumed from" "$f"; then
                RESUMED_AT=$(now)
                RESUMED_STEP=$(sed -n "s/^\[rank 0 attempt $attempt\] resumed from .* at step \([0-9]*\).*/\1/p" "$f" | tail -1)
                return 0
            fi
        done
        sleep 0.1
    done
    return 1
}
last_step() { { tail -1 "$1" 2>/dev/null || true; } | cut -f1; }
rows=()
# tier name, broker getter, run, kill time, output pattern, attempt, losses file
measure() {
    local tier=$1 get=$2 run=$3 t0=$4 pattern=$5 attempt=$6 step_at_kill=$7 back_kind=$8
    training_again "$pattern" "$attempt" || fail "$tier: rank 0 never trained again: $($get "/v1/runs/$run/events" | head -c 1500)"
    local ev t_fault t_back
    ev=$($get "/v1/runs/$run/events")
    t_fault=$(first_event FAULT <<<"$ev")
    t_back=$(first_event "$back_kind" <<<"$ev")
    [ -n "$t_fault" ] && [ -n "$t_back" ] || fail "$tier: no FAULT or $back_kind: $ev"
    rows+=("$tier|$(secs "$t0" "$t_fault")|$(secs "$t0" "$t_back") ($back_kind)|$(secs "$t0" "$RESUMED_AT")|$((step_at_kill - RESUMED_STEP))")
}
broker_events() { broker_get "$1"; }
fed_b() { fed_get B "$1"; }

# Tier 0: a spare in the allocation.
j=$(as_user gamma sbatch --parsable -N3 --no-kill "${COMMON[@]}" -o "$WORK/t0-%j.out" --shardnet=tier0 --shardnet-spares=1 \
    --wrap "exec $WORK/shard launch -- $TRAIN")
wait_for 120 'sum(e["kind"] == "SEALED" for e in v["events"]) >= 2' /v1/runs/tier0/events || fail "tier0 sealed nothing: $(tail -5 "$WORK/t0-$j.out")"
victim=$(sed -n 's/.*restart 0: ranks on \([a-z0-9]*\),.*/\1/p' "$WORK/t0-$j.out" | head -1)
[ -n "$victim" ] || fail "tier0: no rank placement in $(grep 'shard launch' "$WORK/t0-$j.out")"
LOSSES0=$TEST_HOME/.shardnet/checkpoints/tier0.out/losses-rank0.tsv
t0=$(now); "$HARNESS/clusters.sh" kill-node "$SCRATCH" gamma "$victim" 9>&-
step=$(last_step "$LOSSES0")
measure "tier 0 (spare, same job)" broker_events tier0 "$t0" "$WORK/t0-$j.out" 1 "${step:-0}" RESTARTED
slurm gamma scancel "$j"; wait_job gamma "$j" 60
"$HARNESS/clusters.sh" start-node "$SCRATCH" gamma "$victim" 9>&-
for _ in $(seq 150); do slurm gamma sinfo -h -n "$victim" -o %T | grep -qx idle && break; sleep 0.2; done

# Tier 1: a new job on the same cluster, two nodes idle.
j=$(as_user gamma sbatch --parsable -N2 "${COMMON[@]}" -o "$WORK/t1-%j.out" --shardnet=tier1 --shardnet-requeue=local \
    --wrap "srun $TRAIN")
wait_for 120 'sum(e["kind"] == "SEALED" for e in v["events"]) >= 2' /v1/runs/tier1/events || fail "tier1 sealed nothing: $(tail -5 "$WORK/t1-$j.out")"
victim=$(SLURM_CONF=$SCRATCH/gamma/slurm.conf scontrol show hostnames "$(slurm gamma squeue -h -j "$j" -o %N)" | head -1)
LOSSES1=$TEST_HOME/.shardnet/checkpoints/tier1.out/losses-rank0.tsv
t0=$(now); "$HARNESS/clusters.sh" kill-node "$SCRATCH" gamma "$victim" 9>&-
step=$(last_step "$LOSSES1")
measure "tier 1 (new job, idle cluster)" broker_events tier1 "$t0" "$WORK/t1-*.out" 2 "${step:-0}" RECOVERED
slurm gamma scancel -u "$TEST_USER"
"$HARNESS/clusters.sh" start-node "$SCRATCH" gamma "$victim" 9>&-
for _ in $(seq 150); do [ "$(slurm gamma sinfo -h -t idle -o %D)" = 4 ] && break; sleep 0.2; done

# Tier 1 on a full cluster (RECOVERY_TIERS_FULL=0 leaves it out): another
# user's job holds the two free nodes for 40 s after the kill; the new
# attempt waits for them in gamma's queue.
if [ "${RECOVERY_TIERS_FULL:-1}" = 1 ]; then
    j=$(as_user gamma sbatch --parsable -N2 "${COMMON[@]}" -o "$WORK/t1f-%j.out" --shardnet=tier1f --shardnet-requeue=local \
        --wrap "srun $TRAIN")
    wait_for 120 'sum(e["kind"] == "SEALED" for e in v["events"]) >= 2' /v1/runs/tier1f/events || fail "tier1f sealed nothing"
    victim=$(SLURM_CONF=$SCRATCH/gamma/slurm.conf scontrol show hostnames "$(slurm gamma squeue -h -j "$j" -o %N)" | head -1)
    mine=$(SLURM_CONF=$SCRATCH/gamma/slurm.conf scontrol show hostnames "$(slurm gamma squeue -h -j "$j" -o %N)")
    others=$(slurm gamma sinfo -h -N -p main -o %N | grep -vxF "$mine" | paste -sd,)
    blocker=$(as_other gamma sbatch --parsable -N2 -w "$others" --exclusive -o /dev/null --wrap "sleep 40")
    for _ in $(seq 100); do [ "$(job_state gamma "$blocker")" = RUNNING ] && break; sleep 0.2; done
    LOSSES1F=$TEST_HOME/.shardnet/checkpoints/tier1f.out/losses-rank0.tsv
    t0=$(now); "$HARNESS/clusters.sh" kill-node "$SCRATCH" gamma "$victim" 9>&-
    step=$(last_step "$LOSSES1F")
    measure "tier 1 (new job, full cluster)" broker_events tier1f "$t0" "$WORK/t1f-*.out" 2 "${step:-0}" RECOVERED
    slurm gamma scancel -u "$TEST_USER"; slurm gamma scancel "$blocker"
    "$HARNESS/clusters.sh" start-node "$SCRATCH" gamma "$victim" 9>&-

fi

# Tier 2: beta's two nodes hold the job; one dies, beta has no room: alpha,
# through broker A.
j=$(as_user beta sbatch --parsable -N2 "${COMMON[@]}" -o "$WORK/t2-%j.out" --shardnet=tier2 --wrap "srun $TRAIN")
fed_wait 120 'sum(e["kind"] == "SEALED" for e in v["events"]) >= 2' B /v1/runs/tier2/events || fail "tier2 sealed nothing: $(tail -5 "$WORK/t2-$j.out")"
victim=$(SLURM_CONF=$SCRATCH/beta/slurm.conf scontrol show hostnames "$(slurm beta squeue -h -j "$j" -o %N)" | head -1)
LOSSES2=$TEST_HOME/.shardnet/checkpoints/tier2.out/losses-rank0.tsv
t0=$(now); "$HARNESS/clusters.sh" kill-node "$SCRATCH" beta "$victim" 9>&-
step=$(last_step "$LOSSES2")
fed_wait 120 'any(e["kind"] == "RECOVERED" for e in v["events"])' A /v1/runs/tier2/events || fail "tier2 not recovered at broker A: $(fed_b /v1/runs/tier2/events | head -c 1500)"
fed_a() { fed_get A "$1"; }
# The FAULT is broker B's, RECOVERED broker A's: both clocks are this machine's.
training_again "$WORK/t2-*.out" 2 || fail "tier 2: rank 0 never trained again"
t_fault=$(fed_b /v1/runs/tier2/events | first_event FAULT)
t_back=$(fed_a /v1/runs/tier2/events | first_event RECOVERED)
rows+=("tier 2 (peer broker's cluster)|$(secs "$t0" "$t_fault")|$(secs "$t0" "$t_back") (RECOVERED)|$(secs "$t0" "$RESUMED_AT")|$((${step:-0} - RESUMED_STEP))")
slurm beta scancel -u "$TEST_USER"; slurm alpha scancel -u "$TEST_USER"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta "$victim" 9>&-

unset DETECTOR_EXTRA
echo "# recovery tiers: 2-rank DDP (gloo), rank 0's node killed -9, SlurmdTimeout=10, heartbeat 1 s, a seal every 10 steps (0.1 s each)"
printf '%-32s %10s %22s %12s %8s %10s\n' tier "->FAULT s" "->relaunch/new job s" "->training s" "redone" "vs tier 0"
base=""
for r in "${rows[@]}"; do
    IFS='|' read -r tier fault back train redone <<<"$r"
    [ -n "$base" ] || base=$train
    printf '%-32s %10s %22s %12s %8s %9sx\n' "$tier" "$fault" "$back" "$train" "$redone" "$(awk -v a="$train" -v b="$base" 'BEGIN{printf "%.1f", a/b}')"
done
