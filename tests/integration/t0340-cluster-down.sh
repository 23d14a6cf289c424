#!/bin/bash
# Issue 5 test c: all of beta goes down at once (slurmctld and every slurmd
# killed -9) under a 2-node run. Broker B cannot ask beta for anything: it
# requeues from the job spec it kept when the attempt started, and hands the
# run to broker A, which resumes it on alpha. Prints fault -> RECOVERED.
. "$(dirname "$0")/lib.sh"
start_federation
write_trainer "$WORK/train.sh"
j=$(as_user beta sbatch --parsable -N2 -n2 -o "$WORK/down-%j.out" --shardnet=down-run --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
fed_wait 30 'sum(e["kind"] == "SEALED" for e in v["events"]) >= 2' B /v1/runs/down-run/events \
    || fail "no checkpoints sealed at B: $(fed_get B /v1/runs/down-run/events)"
t0=$(date +%s.%N)
"$HARNESS/clusters.sh" kill-cluster "$SCRATCH" beta
fed_wait 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' A /v1/runs/down-run/events \
    || fail "no RECOVERED at A: B: $(fed_get B /v1/runs/down-run/events) A: $(fed_get A /v1/runs/down-run/events)"
dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
for b in B A; do
    echo "  broker $b:"
    fed_get $b /v1/runs/down-run/events | /usr/bin/python3 -c '
import json, sys, time
for e in json.load(sys.stdin)["events"]:
    if e["kind"] != "SEALED": print("   ", time.strftime("%H:%M:%S", time.localtime(e["time"])), "%-10s" % e["kind"], e["cause"][:160])'
done
fed_get B /v1/runs/down-run/events | grep -q 'cluster beta unreachable' || fail "the FAULT does not say beta is unreachable"
fed_get B /v1/runs/down-run/events | grep -q 'beta rejected: slurmctld did not answer' || fail "the PLACEMENT does not name beta's reason"
for _ in $(seq 50); do [ "$(grep -c 'attempt=2 cluster=alpha' "$WORK/down-$j.out" 2>/dev/null)" = 2 ] && break; sleep 0.2; done
[ "$(grep -c 'attempt=2 cluster=alpha' "$WORK/down-$j.out")" = 2 ] || fail "attempt 2 did not run 2 ranks on alpha: $(cat "$WORK/down-$j.out")"
grep -q "attempt=2 .*resume='.*checkpoint-[0-9]*' start=[1-9]" "$WORK/down-$j.out" || fail "attempt 2 did not resume: $(grep attempt=2 "$WORK/down-$j.out")"
ok "all of beta killed: attempt 2 resumed on alpha from $(grep -o "checkpoint-[0-9]*' start=[0-9]*" "$WORK/down-$j.out" | head -1); fault -> RECOVERED ${dt}s"
new=$(slurm alpha squeue -h -o '%i %k' | awk '/shardnet-decision/ {print $1}')
slurm alpha scancel $new
"$HARNESS/clusters.sh" start-cluster "$SCRATCH" beta
# beta's slurmctld remembers the old job and would requeue it: it goes.
for _ in $(seq 100); do slurm beta scancel "$j" 2>/dev/null && break; sleep 0.3; done
wait_job beta "$j" 60
for _ in $(seq 150); do [ "$(slurm beta sinfo -h -o %T 2>/dev/null | sort -u | tr '\n' ' ')" = "idle " ] && break; sleep 0.3; done
