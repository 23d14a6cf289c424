#!/bin/bash
# Issue 27: attempt N is the job that was submitted. A job with a
# partition, an account, a QOS, a GPU per node, a task distribution and a
# memory binding, a time limit and a minimum,
# memory, CPUs per task, a name, a nice value, a comment, an error file and
# a variable of the submitter's
# environment loses a node on beta and is requeued on alpha: attempt 2's
# record in Slurm carries the same options (and the same GPU TRES), accounting
# (sacct) knows both jobs with that account and QOS, its task sees the variable (not
# the names of Slurm's or the host's), and the output file holds both
# attempts with a marker line between them. A run with
# --shardnet-max-attempts=1 that loses its node ends FAILED instead.
. "$(dirname "$0")/lib.sh"
start_broker 600
for c in alpha beta; do plugstack $c "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"; done
cat > "$WORK/fid.sh" <<'SH'
#!/bin/bash
echo "attempt=$SHARDNET_ATTEMPT rank=$SHARDNET_RANK MYVAR=${MYVAR-unset} PATH=$PATH job=$SLURM_JOB_ID dist=${SLURM_DISTRIBUTION-unset} membind=${SLURM_MEM_BIND-unset}"
for s in $(seq 1 600); do echo $s > "$SHARDNET_PROGRESS"; sleep 0.5; done
SH
chmod 755 "$WORK/fid.sh"
record() {  # CLUSTER JOB [FIRST-JOB] -> the fields a requeue must keep, one line (%j of the error file: the first job)
    slurm "$1" squeue --json | /usr/bin/python3 -c '
import json, sys
j = next(j for j in json.load(sys.stdin)["jobs"] if j["job_id"] == int(sys.argv[1]))
# 24.11 (data_parser v0.0.42) writes numbers as {set, infinite, number}.
for k, v in list(j.items()):
    if isinstance(v, dict) and "set" in v and "number" in v: j[k] = v["number"] if v["set"] else None
c = j["comment"].split(" shardnet-decision:")[0]
gpus = ",".join(t for t in j["tres_alloc_str"].split(",") if t.startswith("gres/gpu")) or "no-gpu-tres"
print(j["partition"], j["time_limit"], j["memory_per_node"], j["tasks_per_node"],
      j["name"], j["nice"], repr(c), j["requeue"], j["standard_error"].replace("%j", sys.argv[2]).rsplit("/", 1)[-1],
      sys.argv[3].strip(), j["account"], j["qos"], j["tres_per_node"], gpus)' "$2" "${3:-$2}" "$(slurm "$1" squeue -h -j "$2" -O cpus-per-task:12)"
}
accounted() {  # CLUSTER JOB -> the job as accounting (slurmdbd) holds it
    local out
    for _ in $(seq 50); do
        out=$(slurm "$1" sacct -X -n -P -M "$1" -j "$2" -o jobid,account,qos,alloctres 2>&1)
        grep -q "gres/gpu" <<<"$out" && break; sleep 0.2
    done
    echo "$out"
}
j=$(cd "$WORK" && runuser -u "$TEST_USER" -- env SLURM_CONF="$SCRATCH/beta/slurm.conf" PATH=/usr/bin:/bin:/opt/fid/bin MYVAR=kept-42 \
    sbatch --parsable -N2 --ntasks-per-node=1 -p second --account=ml --qos=high --gpus-per-node=1 \
    --distribution=block:cyclic --mem-bind=local --time=00:20:00 --mem=300 --cpus-per-task=2 -J fid-job \
    --nice=7 --comment="exp 7" --no-requeue -o "$WORK/fid-%j.out" -e "$WORK/fid-%j.err" \
    --shardnet=fid --shardnet-heartbeat=1 --wrap "srun $WORK/fid.sh")
wait_for 30 'sum(1 for w in v["workers"] if w["node"].endswith("/0")) == 2' /v1/runs/fid || fail "fid never ran: $(cat "$WORK"/fid-*.err)"
before=$(record beta "$j")
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
wait_for 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' /v1/runs/fid/events || fail "no RECOVERED: $(broker_get /v1/runs/fid/events)"
new=$(broker_get /v1/runs/fid/events | /usr/bin/python3 -c 'import json,sys; print([e["evidence"]["new_job"] for e in json.load(sys.stdin)["events"] if e["kind"] == "PLACEMENT" and "new_job" in e["evidence"]][-1])')
after=$(record alpha "$new" "$j")
echo "  attempt 1 (beta/$j):  $before"
echo "  attempt 2 (alpha/$new): $after"
[ "$before" = "$after" ] || fail "attempt 2's options differ from attempt 1's"
# tres_per_node: 22.05 spells it gres:gpu:1, 24.11 gres/gpu:1.
grep -q "^second 20 300 1 fid-job 7 'exp 7' False fid-$j.err 2 ml high gres[:/]gpu:1 gres/gpu=2$" <<<"$after" || fail "attempt 1's record is not what was submitted: $before"
ok "attempt 2 on alpha has attempt 1's partition, account, QOS, GPUs (gres/gpu=2), time, mem, cpus-per-task, tasks per node, name, nice, comment, no-requeue, error file"
acct1=$(accounted beta "$j"); acct2=$(accounted alpha "$new")
echo "  sacct: $acct1 | $acct2"
grep -qx "$j|ml|high|.*gres/gpu=2.*" <<<"$acct1" || fail "sacct does not know attempt 1 (beta/$j) as ml/high with 2 GPUs: $acct1"
grep -qx "$new|ml|high|.*gres/gpu=2.*" <<<"$acct2" || fail "sacct does not know attempt 2 (alpha/$new) as ml/high with 2 GPUs: $acct2"
ok "accounting knows both jobs: account ml, QOS high, gres/gpu=2"
for _ in $(seq 50); do [ "$(grep -c '^attempt=2' "$WORK/fid-$j.out" 2>/dev/null)" = 2 ] && break; sleep 0.2; done
grep '^attempt=\|^===' "$WORK/fid-$j.out" | sed 's/^/  /'
grep -q "^attempt=2 rank=0 MYVAR=kept-42 PATH=/usr/bin:/bin:/opt/fid/bin" "$WORK/fid-$j.out" \
    || fail "attempt 2 did not see the submitter's environment: $(grep attempt= "$WORK/fid-$j.out")"
grep -q "^=== shardnet: attempt 2 of fid on alpha, job $new ===$" "$WORK/fid-$j.out" || fail "no marker line before attempt 2"
[ "$(grep -c '^attempt=1' "$WORK/fid-$j.out")" = 2 ] || fail "attempt 1's lines are gone: $(cat "$WORK/fid-$j.out")"
ok "attempt 2 sees MYVAR and the submitter's PATH; both attempts in fid-$j.out, the marker between them"
# Options Slurm's record lacks (sbatch hands them to the batch step's
# environment for its srun steps; srun gives its tasks the binding with its
# verbosity, quiet,local): the steps of both attempts have them.
for a in 1 2; do
    [ "$(grep -c "^attempt=$a .* dist=block:cyclic membind=quiet,local$" "$WORK/fid-$j.out")" = 2 ] \
        || fail "attempt $a's steps lack --distribution/--mem-bind: $(grep "^attempt=$a" "$WORK/fid-$j.out")"
done
ok "--distribution=block:cyclic and --mem-bind=local reach the steps of both attempts"
grep -q '"the job.s environment kept".*"run":"fid"' "$WORK/broker.log" || grep -q '"msg":"the job.s environment kept"' "$WORK/broker.log" \
    || fail "the broker did not keep the environment: $(grep -i environment "$WORK/broker.log" | tail -3)"
! grep -rq "kept-42" "$WORK/broker.log" || fail "a value of the environment reached the broker's log"
[ "$(stat -c %a "$WORK/decisions/fid.environment")" = 600 ] || fail "the kept environment is not 0600"
ok "kept root-only (0600), no value in the log"
slurm alpha scancel "$new"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2
for _ in $(seq 150); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done

# The attempt budget: one attempt, its node dies: FAILED, nothing submitted.
j=$(as_user beta sbatch --parsable -N1 -o "$WORK/budget-%j.out" --shardnet=budget --shardnet-heartbeat=1 --shardnet-max-attempts=1 \
    --wrap "srun $WORK/fid.sh")
wait_for 30 'any(w["node"].endswith("/0") for w in v["workers"])' /v1/runs/budget || fail "budget never ran"
victim=$(slurm beta squeue -h -j "$j" -o %N)
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta "$victim"
wait_for 60 'v["state"] == "FAILED"' /v1/runs/budget || fail "budget not FAILED: $(broker_get /v1/runs/budget/events)"
broker_get /v1/runs/budget/events | grep -q "attempt budget spent: 1 of 1 attempts used" || fail "no budget cause: $(broker_get /v1/runs/budget/events)"
others=$( (slurm alpha squeue -h -u "$TEST_USER" -o %i; slurm beta squeue -h -u "$TEST_USER" -o %i) | grep -vx "$j" || true)
[ -z "$others" ] || fail "a job was submitted past the budget: $others"
ok "--shardnet-max-attempts=1 and $victim killed: FAILED (attempt budget spent), no new job"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta "$victim"
for _ in $(seq 150); do slurm beta sinfo -h -n "$victim" -o %T | grep -qx idle && break; sleep 0.2; done
