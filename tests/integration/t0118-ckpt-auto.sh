#!/bin/bash
# Issue 18: --shardnet-ckpt-every=auto on the real harness. The PyTorch
# example runs on beta with the broker computing its checkpoint interval;
# its node is killed twice (attempt 2 on beta's other node, attempt 3 on
# alpha). The policy's write time, step time, M and R come from the
# broker's own measurements (shard ckpt policy shows each with its source),
# and the trainer changes its interval while it runs.
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (scripts/install-deps.sh installs it)"
# A prior of 3 node-minutes between interruptions, so that the interval is
# a few seconds (steps of 0.2 s) and a test-length run sees it change.
BROKER_EXTRA='"checkpoint_policy": {"mtbf_node_hours": 0.05, "restart_seconds": 20, "min_seconds": 1, "max_seconds": 600}'
start_broker 600
for c in alpha beta; do plugstack "$c" "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"; done
cp "$(dirname "$0")/../../etc/examples/pytorch/train.py" "$WORK/train.py"; chmod 755 "$WORK/train.py"
cp -r "$(dirname "$0")/../../python/shardnet" "$WORK/shardnet"; chmod -R a+rX "$WORK/shardnet"
SHARD=$BUILD/sbatch-wrappers/shard
RUN=ck-auto
killed=()
cleanup() {
    for n in "${killed[@]:-}"; do [ -n "$n" ] && "$HARNESS/clusters.sh" start-node "$SCRATCH" "${n%%[0-9]*}" "$n"; done
    for n in "${killed[@]:-}"; do
        [ -n "$n" ] || continue
        for _ in $(seq 150); do slurm "${n%%[0-9]*}" sinfo -h -n "$n" -o %T | grep -qx idle && break; sleep 0.2; done
    done
    cleanup_lib
}
trap cleanup EXIT
policy() { broker_get /v1/runs/$RUN/policy; }

j=$(as_user beta sbatch --parsable -N1 -n1 -o "$WORK/$RUN-%j.out" --open-mode=append --shardnet=$RUN --shardnet-heartbeat=1 --shardnet-ckpt-every=auto \
    --wrap "srun /usr/bin/python3 $WORK/train.py --steps 600 --step-seconds 0.2")
OUT=$WORK/$RUN-$j.out
wait_for 60 'v.get("version", 0) >= 1' /v1/runs/$RUN/policy || fail "no policy in force: $(policy) $(tail -5 "$OUT" 2>/dev/null)"
for _ in $(seq 100); do grep -q "checkpoint interval now" "$OUT" 2>/dev/null && break; sleep 0.2; done
grep -q "checkpoint interval now" "$OUT" || fail "the trainer did not take the policy: $(tail -5 "$OUT") $(policy)"
ok "attempt 1: $(grep -o 'checkpoint interval now.*' "$OUT" | head -1)"

current_node() {  # CLUSTER NODE of the run's current job
    local cluster job node
    # The first job, or the one the newest placement submitted.
    read -r cluster job < <(broker_get /v1/runs/$RUN/events | /usr/bin/python3 -c '
import json, sys
p = [e["evidence"] for e in json.load(sys.stdin)["events"] if e["kind"] == "PLACEMENT" and "new_job" in e["evidence"]]
print(*(("beta", sys.argv[1]) if not p else (p[-1]["target"], p[-1]["new_job"])))' "$j")
    node=$(slurm "$cluster" squeue -h -j "$job" -o %N)
    [ -n "$node" ] || fail "job $job of $RUN is not running on $cluster"
    echo "$cluster $node"
}
# Each kill after a checkpoint of the attempt was sealed; each recovery is
# measured once its new attempt made a step.
for round in 1 2; do
    a=$round
    wait_for 60 "any(e['kind'] == 'SEALED' and e['evidence']['attempt'] == $a for e in v['events'])" /v1/runs/$RUN/events \
        || fail "attempt $a sealed nothing: $(tail -5 "$OUT")"
    read -r vcluster victim < <(current_node)
    [ -n "$victim" ] || fail "no node to kill for attempt $a"
    killed+=("$victim")   # in this shell: the cleanup starts it again
    "$HARNESS/clusters.sh" kill-node "$SCRATCH" "$vcluster" "$victim"
    wait_for 90 "any(e['kind'] == 'RECOVERED' and e['evidence']['attempt'] == $((a + 1)) for e in v['events'])" /v1/runs/$RUN/events \
        || fail "no RECOVERED of attempt $((a + 1)) after $victim was killed: $(broker_get /v1/runs/$RUN/events | tail -c 1500)"
    wait_for 60 "(v['inputs']['restart_seconds']['samples'] >= $round)" /v1/runs/$RUN/policy \
        || fail "recovery $round not measured: $(policy)"
    ok "node $victim killed: attempt $((a + 1)) RECOVERED and its recovery measured"
done
wait_for 60 'v["inputs"]["mtbf_seconds"]["interruptions"] >= 2 and v["inputs"]["write_seconds"] and v["inputs"]["step_seconds"]' \
    /v1/runs/$RUN/policy || fail "the policy's inputs are not the broker's measurements: $(policy)"
report=$("$SHARD" --broker "$BROKER_URL" --token "$ADMIN_TOKEN" ckpt policy $RUN) || fail "shard ckpt policy failed: $report"
echo "$report" | sed 's/^/  /'
policy | /usr/bin/python3 -c '
import json, sys
v = json.load(sys.stdin); i = v["inputs"]
assert v["state"] == "in_force" and v["version"] >= 1, v
assert i["write_seconds"]["source"] == "measured" and i["write_seconds"]["samples"] >= 1, i["write_seconds"]
assert 0 < i["write_seconds"]["value"] < 30, i["write_seconds"]
assert i["step_seconds"]["source"] == "measured" and 0.15 < i["step_seconds"]["value"] < 2, i["step_seconds"]
m = i["mtbf_seconds"]
assert m["source"] == "measured+prior" and m["interruptions"] == 2 and m["node_hours_observed"] > 0, m
# (prior + observed) / (1 + interruptions), for the run of one node
assert abs(m["node_value"] - (0.05 * 3600 + m["node_hours_observed"] * 3600) / 3) < 1e-6 * m["node_value"], m
r = i["restart_seconds"]
assert r["source"] == "measured" and r["samples"] == 2, r
tiers = {t["tier"]: t for t in r["tiers"]}
assert set(tiers) == {"same_cluster", "other_cluster"}, tiers
for t in tiers.values():
    assert t["recoveries"] == 1 and t["detect"] > 0.5 and t["start"] > 0 and t["total"] < 120, t
' || fail "policy inputs: $(policy)"
echo "$report" | grep -q "2 interruptions" || fail "shard ckpt policy does not show the interruptions: $report"
ok "policy inputs from the broker: write time, step time measured; M from 2 interruptions + prior; R from 2 recoveries (same_cluster, other_cluster)"
wait_for 150 'v["state"] == "SUCCEEDED"' /v1/runs/$RUN || fail "the run did not finish: $(broker_get /v1/runs/$RUN/events | tail -c 800) $(tail -5 "$OUT")"
broker_get /v1/runs/$RUN/events | /usr/bin/python3 -c '
import json, sys, time
for e in json.load(sys.stdin)["events"]:
    ev = e["evidence"]
    what = ev.get("checkpoint") or ev.get("resume") or ""
    print("   ", time.strftime("%H:%M:%S", time.localtime(e["time"])), "%-10s" % e["kind"], "attempt", ev.get("attempt", "-"), what, e["cause"][:90])'
changes=$(grep -c "checkpoint interval now" "$OUT")
grep "checkpoint interval now\|resumed from\|done at step" "$OUT" | sed 's/^/  /'
versions=$(broker_get /v1/runs/$RUN/events | /usr/bin/python3 -c 'import json,sys; print(sum(e["kind"] == "POLICY" for e in json.load(sys.stdin)["events"]))')
[ "$versions" -ge 1 ] || fail "no POLICY event"
ok "SUCCEEDED; $versions policy version(s), the trainer changed its interval $changes time(s) while running"
