#!/bin/bash
# A time limit (issue 27 B): a 2-node job with --time=1 on a cluster whose
# plugstack sends SIGUSR1 40 s before the limit. The trainer writes an
# emergency checkpoint at the signal. With --shardnet-on-timeout=requeue,
# Slurm's TIMEOUT is a FAULT no node is to blame for: attempt 2 runs (on the
# same nodes: none is excluded) from the checkpoint sealed after the signal,
# with the option again. Without it, the same job ends FAILED naming the
# time limit, and nothing is submitted.
. "$(dirname "$0")/lib.sh"
start_broker 600
for c in alpha beta; do plugstack $c "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1 prelimit=USR1@40"; done
cat > "$WORK/tr.sh" <<'SH'
#!/bin/bash
# A step every 0.5 s; a checkpoint at step 4, then one at the step after SIGUSR1.
start=0; last=""; due=0
trap 'due=1' USR1
if [ -n "$SHARDNET_RESUME_FROM" ]; then start=$(cat "$SHARDNET_RESUME_FROM/rank-$SHARDNET_RANK.step"); last=$(basename "$SHARDNET_RESUME_FROM"); fi
echo "attempt=$SHARDNET_ATTEMPT rank=$SHARDNET_RANK node=$SLURMD_NODENAME resume='$SHARDNET_RESUME_FROM' start=$start"
for s in $(seq $((start + 1)) 100000); do
    if [ "$s" = 4 ] || [ "$due" = 1 ]; then
        [ "$due" = 1 ] && echo "rank $SHARDNET_RANK: emergency checkpoint at step $s"
        due=0; last=$(printf 'checkpoint-%04d' "$s"); d=$SHARDNET_CKPT_DIR/$last; mkdir -p "$d"
        echo "$s" > "$d/rank-$SHARDNET_RANK.step"
        echo "$(sha256sum < "$d/rank-$SHARDNET_RANK.step" | cut -d' ' -f1) $(stat -c %s "$d/rank-$SHARDNET_RANK.step") rank-$SHARDNET_RANK.step" \
            > "$d/rank-$SHARDNET_RANK.manifest"
    fi
    echo "$s${last:+ committed $last}" > "$SHARDNET_PROGRESS"
    sleep 0.5 & wait $!
done
SH
chmod 755 "$WORK/tr.sh"
events() { broker_get "/v1/runs/$1/events"; }

# The same job twice at once: asking for the requeue on alpha, not on beta.
j=$(as_user alpha sbatch --parsable -N2 -n2 --time=1 -o "$WORK/to-a%j.out" --shardnet=to-rq --shardnet-heartbeat=1 \
    --shardnet-on-timeout=requeue --wrap "srun $WORK/tr.sh")
k=$(as_user beta sbatch --parsable -N2 -n2 --time=1 -o "$WORK/to-b%j.out" --shardnet=to-fail --shardnet-heartbeat=1 --wrap "srun $WORK/tr.sh")
wait_for 30 'sum(1 for w in v["workers"] if w["node"].endswith("/0") and w["health"] == "healthy") == 2' /v1/runs/to-rq || fail "to-rq never ran on 2 nodes"
# The limit (60 s), Slurm's kill, the judgment and the new job.
wait_for 150 'any(e["kind"] == "RECOVERING" for e in v["events"])' /v1/runs/to-rq/events || fail "to-rq was not requeued: $(events to-rq)"
sealed=$(grep -h "emergency checkpoint" "$WORK/to-a$j.out" | head -1 | sed 's/.*at step //')
[ -n "$sealed" ] || fail "the trainer wrote no emergency checkpoint: $(cat "$WORK/to-a$j.out")"
name=$(printf 'checkpoint-%04d' "$sealed")
events to-rq | /usr/bin/python3 -c '
import json, sys
ev = json.load(sys.stdin)["events"]
f = [e for e in ev if e["kind"] == "FAULT"]
assert len(f) == 1, [e["kind"] for e in ev]
assert "(TIMEOUT) after checkpoint " + sys.argv[1] + " was sealed past the pre-limit signal" in f[0]["cause"], f[0]["cause"]
assert f[0]["evidence"]["on_timeout"] == "requeue" and f[0]["evidence"]["sealed_after_prelimit"] == sys.argv[1], f[0]["evidence"]
p = [e for e in ev if e["kind"] == "PLACEMENT"][0]
assert p["evidence"]["excluded"] == "", p["evidence"]
assert not [e for e in ev if e["kind"] == "FAILED"]' "$name" || fail "to-rq's TIMEOUT: $(events to-rq)"
ok "TIMEOUT of job $j after $name was sealed past the pre-limit signal: a FAULT no node is to blame for, requeued"
for _ in $(seq 100); do [ "$(grep -c '^attempt=2 ' "$WORK/to-a$j.out")" = 2 ] && break; sleep 0.3; done
grep '^attempt=' "$WORK/to-a$j.out" | sed 's/^/  /'
[ "$(grep -c "^attempt=2 .*resume='[^']*/$name' start=$sealed" "$WORK/to-a$j.out")" = 2 ] || fail "attempt 2 did not resume both ranks from $name: $(grep attempt= "$WORK/to-a$j.out")"
new=$(slurm alpha squeue -h -u "$TEST_USER" -o '%i')
slurm alpha scontrol show job "$new" | grep -q 'TimeLimit=00:01:00' || fail "attempt 2 is not the submitted job: $(slurm alpha scontrol show job "$new")"
ok "attempt 2 (job $new) resumed both ranks from $name at step $sealed, with the same time limit"

wait_for 60 'v["state"] == "FAILED"' /v1/runs/to-fail || fail "to-fail did not end FAILED: $(events to-fail)"
events to-fail | grep -q 'the job reached its time limit (Slurm: TIMEOUT)' || fail "to-fail's FAILED does not name the limit: $(events to-fail)"
[ -z "$(slurm beta squeue -h -u "$TEST_USER")" ] || fail "something was submitted for to-fail: $(slurm beta squeue -u "$TEST_USER")"
ok "without --shardnet-on-timeout the same TIMEOUT of job $k is FAILED, naming the limit; nothing submitted"
slurm alpha scancel -u "$TEST_USER"
