#!/bin/bash
# The shard CLI on the real harness with the real brokers (issue 6): capacity
# matches the clusters; an example spec runs to SUCCEEDED; bad specs submit
# nothing; shard watch shows a fault's FAULT, PLACEMENT and RECOVERED,
# following the run to the broker it moved to.
. "$(dirname "$0")/lib.sh"
start_federation
EX=$(cd "$(dirname "$0")/../../etc/examples" && pwd)
cp "$EX/small.yaml" "$WORK/small.yaml"; chmod 644 "$WORK/small.yaml"

# Capacity, as JSON, against Slurm's own view. The last test's jobs may
# still be leaving the nodes, so a reading counts when sinfo says the same
# before and after it; a capacity that disagrees with a steady sinfo fails.
# Idle as the broker counts it: state exactly "idle" (not "idle*", a node
# that stopped answering).
idle_of() { slurm "$1" sinfo -h -N -o '%N %T' | awk '$2 == "idle" {print $1}' | sort -u | wc -l; }
idle_counts() { echo "$(idle_of alpha) $(idle_of beta)"; }
steady=0
for _ in $(seq 30); do
    before=$(idle_counts)
    cap=$(shard capacity --json) || fail "shard capacity failed"
    after=$(idle_counts)
    [ "$before" = "$after" ] || { sleep 1; continue; }
    steady=1
    /usr/bin/python3 - "$cap" $after <<'PY' || fail "capacity does not match the clusters ($after idle): $cap"
import json, sys
v = json.loads(sys.argv[1]); idle = {"alpha": int(sys.argv[2]), "beta": int(sys.argv[3])}
got = {}
for r in v["clusters"]:
    got[r["cluster"]] = got.get(r["cluster"], 0) + r["idle_nodes"]
assert got == idle, (got, idle)
PY
    break
done
[ $steady = 1 ] || fail "sinfo never held still for one capacity query"
shard capacity | sed 's/^/  /'
ok "shard capacity --json matches sinfo on both clusters"

# Bad specs: clear errors, exit 2, nothing submitted.
printf 'command: x\nfabrik: ib\n' > "$WORK/bad1.yaml"
printf 'command: x\ngpus: lots\n' > "$WORK/bad2.yaml"
printf 'command: x\naccelerator: h900\n' > "$WORK/bad3.yaml"
chmod 644 "$WORK"/bad*.yaml
for f in bad1 bad2 bad3; do
    rc=0; out=$(shard run "$WORK/$f.yaml" 2>&1) || rc=$?
    [ $rc = 2 ] || fail "$f: exit $rc, expected 2: $out"
    echo "  $out"
done
grep -q . <(slurm alpha squeue -h; slurm beta squeue -h) && fail "a bad spec submitted a job"
[ "$(shard runs --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["runs"]))')" = 0 ] || fail "a bad spec created a run"
rc=0; out=$(shard run "$WORK/small.yaml" --cluster nowhere 2>&1) || rc=$?
[ $rc = 4 ] || fail "an impossible cluster: exit $rc, expected 4: $out"
ok "bad specs (unknown key, wrong type, impossible class, no such cluster) exit 2/4 and submit nothing"

# Dry run: the script and the sbatch line, nothing submitted.
shard run "$WORK/small.yaml" --dry-run > "$WORK/dry.out" || fail "dry run failed: $(cat "$WORK/dry.out")"
grep -q -- "--shardnet=small-" "$WORK/dry.out" && grep -q "nothing submitted" "$WORK/dry.out" || fail "dry run: $(cat "$WORK/dry.out")"
[ -z "$(slurm beta squeue -h)" ] || fail "the dry run submitted"

# A real run to its end.
out=$(shard run "$WORK/small.yaml" --cluster beta) || fail "shard run: $out"
echo "$out" | sed 's/^/  /'
run=$(awk '$1 == "run" {print $2}' <<<"$out")
rc=0; timeout 60 bash -c "$(declare -f shard); FED=$FED WORK=$WORK TEST_USER=$TEST_USER BUILD=$BUILD shard watch $run" > "$WORK/watch1.out" || rc=$?
sed 's/^/  /' "$WORK/watch1.out"
[ $rc = 0 ] || fail "shard watch of $run exited $rc"
grep -q "SUCCEEDED" "$WORK/watch1.out" || fail "no SUCCEEDED in the watch"
ok "shard run small.yaml on beta ends SUCCEEDED (watch exit 0)"

# A fault: watch shows FAULT, PLACEMENT, RECOVERED, across brokers.
write_trainer "$WORK/train.sh"
cat > "$WORK/long.yaml" <<YAML
name: long
command: $WORK/train.sh
nodes: 2
heartbeat: 1
requeue: federated
YAML
chmod 644 "$WORK/long.yaml"
out=$(shard run "$WORK/long.yaml" --cluster beta) || fail "shard run long: $out"
run=$(awk '$1 == "run" {print $2}' <<<"$out")
timeout 90 bash -c "$(declare -f shard); FED=$FED WORK=$WORK TEST_USER=$TEST_USER BUILD=$BUILD shard watch $run" > "$WORK/watch2.out" &
W=$!
fed_wait 30 'any(e["kind"] == "SEALED" for e in v["events"])' B "/v1/runs/$run/events" || fail "$run sealed nothing"
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
fed_wait 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' A "/v1/runs/$run/events" || fail "$run not recovered at A: B: $(fed_get B /v1/runs/$run/events)"
sleep 2
shard --broker "https://127.0.0.1:$A_PORT" --ca-file "$FED/a.crt" cancel "$run" > /dev/null || fail "shard cancel at A"
rc=0; wait $W || rc=$?
sed 's/^/  /' "$WORK/watch2.out"
[ $rc = 1 ] || fail "watch of a cancelled run exited $rc, expected 1"
for k in FAULT PLACEMENT MOVED "following $run to broker alpha-broker" RECOVERED CANCELLED; do
    grep -q "$k" "$WORK/watch2.out" || fail "shard watch did not show $k"
done
ok "shard watch showed FAULT, PLACEMENT, MOVED, followed the run to alpha-broker, RECOVERED, and exited 1 on CANCELLED"
slurm alpha scancel -u "$TEST_USER"; slurm beta scancel -u "$TEST_USER"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2
for _ in $(seq 150); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done
