#!/bin/bash
# Partition names across clusters: a 2-node job in beta's partition
# "second" loses a node while beta has no spare. alpha is the only other
# cluster. 1: alpha's names table says it has no "second": alpha is left
# out with that reason (PLACEMENT, shard show), nothing is submitted and the
# run waits DEGRADED. 2: alpha calls the site's "second" "main": attempt 2
# runs on alpha in partition main, and the PLACEMENT event says so.
. "$(dirname "$0")/lib.sh"
cat > "$WORK/train.sh" <<'SH'
#!/bin/bash
echo "attempt=$SHARDNET_ATTEMPT cluster=$SLURM_CLUSTER_NAME partition=$SLURM_JOB_PARTITION rank=$SHARDNET_RANK"
for s in $(seq 1 240); do echo $s > "$SHARDNET_PROGRESS"; sleep 0.5; done
SH
chmod 755 "$WORK/train.sh"

# run_and_kill RUN: the job on beta's partition second, both ranks up, beta2 killed.
run_and_kill() {
    for c in alpha beta; do plugstack $c "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"; done
    JOB=$(as_user beta sbatch --parsable -p second -N2 -n2 -o "$WORK/$1-%j.out" --shardnet="$1" --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
    wait_for 20 'len([w for w in v["workers"] if w["node"].endswith("/0")]) == 2' "/v1/runs/$1" || fail "$1 never ran on 2 nodes"
    "$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
}
heal() {
    slurm beta scancel "$JOB" 2>/dev/null || true
    "$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2
    for _ in $(seq 150); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done
}
events() { broker_get "/v1/runs/$1/events"; }

# 1. No "second" on alpha, by its table.
CLUSTER_NAMES_alpha='{"partition": {"second": null}}' start_broker 600
run_and_kill pn-none
wait_for 60 'any(e["kind"] == "PLACEMENT" for e in v["events"])' /v1/runs/pn-none/events || fail "no PLACEMENT: $(events pn-none)"
events pn-none | /usr/bin/python3 -c '
import json, sys
ev = json.load(sys.stdin)["events"]
p = [e for e in ev if e["kind"] == "PLACEMENT"][0]
assert p["cause"].startswith("no placement for attempt 2"), p["cause"]
assert "alpha rejected: no partition for second" in p["cause"], p["cause"]
assert {"cluster": "alpha", "reason": "no partition for second"} in p["evidence"]["rejected"], p["evidence"]
assert not any(e["kind"] in ("RECOVERING", "FAILED") for e in ev), [e["kind"] for e in ev]' || fail "alpha's exclusion not named: $(events pn-none)"
[ -z "$(slurm alpha squeue -h -u "$TEST_USER")" ] || fail "something was submitted on alpha: $(slurm alpha squeue -u "$TEST_USER")"
ok "alpha's table has no partition for 'second': excluded with that reason, nothing submitted"
heal
kill -TERM "$BROKER_PID"; wait "$BROKER_PID" 2>/dev/null || true

# 2. alpha calls it "main".
CLUSTER_NAMES_alpha='{"partition": {"second": "main"}}' start_broker 600
run_and_kill pn-mapped
wait_for 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' /v1/runs/pn-mapped/events || fail "no RECOVERED: $(events pn-mapped)"
read -r target new <<<"$(events pn-mapped | /usr/bin/python3 -c '
import json, sys
p = [e for e in json.load(sys.stdin)["events"] if e["kind"] == "PLACEMENT"][0]
assert "names: partition second -> main" in p["cause"], p["cause"]
assert p["evidence"]["mapped"] == ["partition second -> main"], p["evidence"]
print(p["evidence"]["target"], p["evidence"]["new_job"])')" || fail "the mapping is not in PLACEMENT: $(events pn-mapped)"
[ "$target" = alpha ] || fail "placed on '$target', expected alpha"
part=$(slurm alpha scontrol show job "$new" | grep -o 'Partition=[^ ]*')
[ "$part" = Partition=main ] || fail "attempt 2's job $new is in $part, expected main"
for _ in $(seq 50); do grep -q 'attempt=2 cluster=alpha partition=main' "$WORK/pn-mapped-$JOB.out" 2>/dev/null && break; sleep 0.2; done
grep -q 'attempt=2 cluster=alpha partition=main' "$WORK/pn-mapped-$JOB.out" || fail "attempt 2 did not run in alpha's main: $(cat "$WORK/pn-mapped-$JOB.out")"
ok "alpha calls 'second' 'main': attempt 2 is job $new on alpha in Partition=main, said in PLACEMENT"
slurm alpha scancel "$new"
heal
