#!/bin/bash
# Issue 31, tier 0 when the spares are spent: `shard launch` relaunches a
# 2-rank job on its one spare when rank 0's node dies; when a node of the
# relaunched step dies too, no spare is left: it gives up (RESTART_GAVE_UP,
# exit 75) and the run goes to today's requeue (tier 1: a PLACEMENT for
# attempt 2), with no second relaunch. Before that, signals to the batch
# script reach the ranks through `shard launch`: SIGUSR1 (a pre-limit
# signal) and supervision goes on; SIGTERM, and it ends, telling the broker.
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (scripts/install-deps.sh installs it)"
"$HARNESS/clusters.sh" add "$SCRATCH" "$BUILD" gamma 5 >/dev/null || fail "the 5-node cluster gamma did not come up"
cleanup_gamma() { "$HARNESS/clusters.sh" remove "$SCRATCH" gamma || true; cleanup_lib; }
trap cleanup_gamma EXIT
start_broker 600
plugstack gamma "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"
cp "$(dirname "$0")/../../etc/examples/pytorch/train.py" "$WORK/train.py"
cp -r "$(dirname "$0")/../../python/shardnet" "$WORK/shardnet"
install -m 755 "$BUILD/sbatch-wrappers/shard" "$WORK/shard"
chmod -R a+rX "$WORK/shardnet" "$WORK/train.py"
kinds() { broker_get "/v1/runs/$1/events" | /usr/bin/python3 -c 'import json,sys; print(" ".join(e["kind"] for e in json.load(sys.stdin)["events"] if e["kind"] != "SEALED"))'; }

# 0. Signals: one rank and one spare.
cat > "$WORK/sig.sh" <<SH
#!/bin/bash
trap 'echo "usr1 at rank \$RANK" >> $WORK/sig.log' USR1
trap 'echo "term at rank \$RANK" >> $WORK/sig.log; exit 7' TERM
echo "started rank \$RANK" >> $WORK/sig.log
for i in \$(seq 1500); do sleep 0.2; done
SH
chmod 755 "$WORK/sig.sh"; : > "$WORK/sig.log"; chmod 666 "$WORK/sig.log"
j=$(as_user gamma sbatch --parsable -N2 --no-kill -o "$WORK/sig-%j.out" --shardnet=sig-run --shardnet-spares=1 --shardnet-heartbeat=2 \
    --wrap "exec $WORK/shard launch -- $WORK/sig.sh")
for _ in $(seq 300); do grep -q "started rank 0" "$WORK/sig.log" && break; sleep 0.2; done
grep -q "started rank 0" "$WORK/sig.log" || fail "the signal job's rank never started: $(slurm gamma squeue -j "$j" 2>&1; cat "$WORK/sig-$j.out" 2>&1)"
slurm gamma scancel --batch -s USR1 "$j"
for _ in $(seq 50); do grep -q "usr1 at rank 0" "$WORK/sig.log" && break; sleep 0.2; done
grep -q "usr1 at rank 0" "$WORK/sig.log" || fail "SIGUSR1 to the batch script did not reach the rank: $(cat "$WORK/sig.log")"
[ "$(job_state gamma "$j")" = RUNNING ] || fail "SIGUSR1 ended the job: $(job_state gamma "$j")"
slurm gamma scancel --batch -s TERM "$j"
wait_job gamma "$j" 30
grep -q "term at rank 0" "$WORK/sig.log" || fail "SIGTERM to the batch script did not reach the rank: $(cat "$WORK/sig.log" "$WORK/sig-$j.out")"
grep -q "shard launch: got SIGTERM: passed to the step" "$WORK/sig-$j.out" || fail "shard launch did not say it passed SIGTERM: $(cat "$WORK/sig-$j.out")"
grep -q "gave up: the step ended 7 after SIGTERM" "$WORK/sig-$j.out" || fail "shard launch did not end with the step: $(cat "$WORK/sig-$j.out")"
wait_for 20 'any(e["kind"] == "RESTART_GAVE_UP" and "SIGTERM" in e["cause"] for e in v["events"])' /v1/runs/sig-run/events \
    || fail "the broker was not told why supervision ended: $(kinds sig-run)"
ok "SIGUSR1 to the batch script reached the rank and the job ran on; SIGTERM reached it, ended the supervision, told the broker ($(kinds sig-run))"

j=$(as_user gamma sbatch --parsable -N3 --no-kill --ntasks-per-node=1 -o "$WORK/sp-%j.out" --shardnet=spent-run --shardnet-spares=1 \
    --shardnet-heartbeat=2 --shardnet-ckpt-every=10 --shardnet-requeue=local \
    --wrap "exec $WORK/shard launch -- /usr/bin/python3 $WORK/train.py --steps 2000 --step-seconds 0.1")
OUT=$WORK/sp-$j.out
wait_for 90 'any(e["kind"] == "SEALED" for e in v["events"])' /v1/runs/spent-run/events || fail "spent-run sealed nothing: $(tail -8 "$OUT")"
"$HARNESS/clusters.sh" kill-node "$SCRATCH" gamma gamma2
wait_for 20 'any(e["kind"] == "RESTARTED" for e in v["events"])' /v1/runs/spent-run/events || fail "no relaunch on the spare: $(kinds spent-run) $(tail -8 "$OUT")"
for _ in $(seq 100); do grep -q "resumed from" "$OUT" && break; sleep 0.2; done
grep -q "resumed from" "$OUT" || fail "the relaunched step did not resume: $(tail -8 "$OUT")"
ok "gamma2 died: relaunched on gamma1 + gamma3 ($(kinds spent-run))"
t0=$(date +%s.%N)
"$HARNESS/clusters.sh" kill-node "$SCRATCH" gamma gamma3
wait_for 30 'any(e["kind"] == "RESTART_GAVE_UP" for e in v["events"]) and any(e["kind"] == "PLACEMENT" for e in v["events"])' /v1/runs/spent-run/events \
    || fail "no give-up and requeue after gamma3's death: $(kinds spent-run) $(grep 'shard launch' "$OUT")"
dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
grep 'shard launch' "$OUT" | sed 's/^/  /'
broker_get /v1/runs/spent-run/events | /usr/bin/python3 -c '
import json, sys
ev = json.load(sys.stdin)["events"]
print("   ", " ".join(e["kind"] for e in ev if e["kind"] != "SEALED"))
g = next(e for e in ev if e["kind"] == "RESTART_GAVE_UP")
assert "node gamma3 died and no spare node is left" in g["cause"], g["cause"]
assert sum(e["kind"] == "RESTARTED" for e in ev) == 1, "relaunched twice"
faults = [e for e in ev if e["kind"] == "FAULT"]
assert [f["evidence"]["node"].split("/")[0] for f in faults][:2] == ["gamma2", "gamma3"], [f["cause"] for f in faults]
p = next(e for e in ev if e["kind"] == "PLACEMENT" and e["id"] > faults[1]["id"])
print("    PLACEMENT:", p["cause"][:200])' || fail "the events do not show the spares spent and the requeue: $(kinds spent-run)"
grep -q "restart 2:" "$OUT" && fail "relaunched without a spare"
ok "gamma3 died with no spare left: shard launch gave up and the run went to the requeue (tier 1) ${dt}s after the kill"

# The requeued attempt holds a spare as the first did: the broker submits it
# (on gamma1, gamma4, gamma5) with --no-kill and --shardnet-spares=1 (the
# batch step said them), so its world is 2 ranks again, not 3.
wait_for 120 'any(e["kind"] == "SUPERVISED" and e["evidence"]["attempt"] == 2 for e in v["events"])' /v1/runs/spent-run/events \
    || fail "attempt 2 is not supervised: $(kinds spent-run) $(tail -5 "$OUT")"
broker_get /v1/runs/spent-run/events | /usr/bin/python3 -c '
import json, sys
ev = json.load(sys.stdin)["events"]
s = next(e for e in ev if e["kind"] == "SUPERVISED" and e["evidence"]["attempt"] == 2)
assert s["evidence"]["spares"] == 1 and len(s["evidence"]["nodes"]) == 2, s' \
    || fail "attempt 2 does not hold 1 spare and 2 ranks' nodes: $(kinds spent-run)"
j2=$(slurm gamma squeue -h -u "$TEST_USER" -o '%i %k' | awk '/shardnet-decision/ {print $1}' | head -1)
[ -n "$j2" ] && slurm gamma scancel "$j2"
ok "attempt 2 (job ${j2:-?}) runs with 1 spare and 2 ranks' nodes, as attempt 1 did: the requeue carried --no-kill and --shardnet-spares"
