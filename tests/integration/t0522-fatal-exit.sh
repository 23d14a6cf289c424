#!/bin/bash
# Issue 27: --shardnet-fatal-exit=CODES. A malformed list is refused at
# sbatch, naming the option (the command line and SHARDNET_FATAL_EXIT
# alike). A 2-node job (one srun task per node) whose rank 1 exits 3 under
# --shardnet-fatal-exit=3 ends FAILED within seconds of that exit, while
# rank 0 still runs (no Slurm judgment waits for the job's end), with a
# cause naming the rank, its node and the option, and nothing requeued.
# When the batch script ends later, its stderr tail (rank 1's last words,
# forwarded by srun) follows as a STDERR event, and `shard show` prints it
# under the FAILED cause.
. "$(dirname "$0")/lib.sh"
start_broker 600
for c in alpha beta; do plugstack $c "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"; done

# 1. Refused before anything runs.
for bad in 0 3,256 "3,,7" 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17; do
    if out=$(as_user beta sbatch --shardnet-fatal-exit="$bad" --wrap true 2>&1); then fail "--shardnet-fatal-exit=$bad was taken: $out"; fi
    grep -q -- "--shardnet-fatal-exit=$bad: expected exit codes from 1 to 255" <<<"$out" || fail "no reason naming the option: $out"
done
if out=$(cd "$WORK" && runuser -u "$TEST_USER" -- env SLURM_CONF="$SCRATCH/beta/slurm.conf" PATH=/usr/bin:/bin SHARDNET_FATAL_EXIT=x \
         sbatch --shardnet --wrap true 2>&1); then fail "SHARDNET_FATAL_EXIT=x was taken: $out"; fi
grep -q -- "--shardnet-fatal-exit=x: expected exit codes" <<<"$out" || fail "SHARDNET_FATAL_EXIT=x: no reason naming the option: $out"
ok "malformed --shardnet-fatal-exit (0, 256, an empty entry, 17 codes) and SHARDNET_FATAL_EXIT=x refused at sbatch, naming the option"

# 2. Rank 1 exits 3 at once; rank 0 goes on for a while.
cat > "$WORK/rank.sh" <<'SH'
#!/bin/bash
if [ "$SLURM_PROCID" = 1 ]; then
    sleep 2
    echo "FileNotFoundError: /data/shard-0042 is missing (t0522-fatal-marker)" >&2
    exit 3
fi
for s in $(seq 1 60); do echo "$s" > "$SHARDNET_PROGRESS"; sleep 0.5; done
SH
chmod 755 "$WORK/rank.sh"
cat > "$WORK/fatal.sbatch" <<SH
#!/bin/bash
#SBATCH -N2 --ntasks-per-node=1
#SBATCH --shardnet=fatal --shardnet-fatal-exit=3 --shardnet-heartbeat=30
srun $WORK/rank.sh
SH
j=$(as_user beta sbatch --parsable -o "$WORK/fatal-%j.out" "$WORK/fatal.sbatch")
wait_for 30 'v["state"] == "FAILED"' /v1/runs/fatal || fail "fatal did not end FAILED: $(broker_get /v1/runs/fatal/events) $(cat "$WORK/fatal-$j.out")"
slurm beta squeue -h -j "$j" | grep -q . || fail "job $j had ended already: the verdict waited for it"
broker_get /v1/runs/fatal/events | /usr/bin/python3 -c '
import json, sys
ev = json.load(sys.stdin)["events"]
assert not any(e["kind"] in ("FAULT", "PLACEMENT", "RECOVERING") for e in ev), [e["kind"] for e in ev]
f = [e for e in ev if e["kind"] == "FAILED"]
assert len(f) == 1, f
assert f[0]["cause"] == "rank 1 on beta2 exited 3, which --shardnet-fatal-exit says is not to be retried", f[0]["cause"]
assert f[0]["evidence"]["fatal_exit"] == {"node": "beta2", "rank": 1, "exit_code": 3}, f[0]["evidence"]' \
    || fail "the FAILED event is not the fatal exit's: $(broker_get /v1/runs/fatal/events)"
ok "rank 1 exited 3 on beta2: FAILED while job $j still runs, naming the rank, its node and --shardnet-fatal-exit"

# 3. The batch script ends when rank 0 does: its tail follows; nothing was requeued.
wait_job beta "$j" 60
wait_for 10 'any(e["kind"] == "STDERR" for e in v["events"])' /v1/runs/fatal/events \
    || fail "no STDERR event after the batch script's end: $(broker_get /v1/runs/fatal/events) $(cat "$WORK/fatal-$j.out")"
broker_get /v1/runs/fatal/events | /usr/bin/python3 -c '
import json, sys
s = [e for e in json.load(sys.stdin)["events"] if e["kind"] == "STDERR"][-1]
assert "t0522-fatal-marker" in s["evidence"]["stderr_tail"], s
assert s["cause"].endswith("stderr: FileNotFoundError: /data/shard-0042 is missing (t0522-fatal-marker)"), s["cause"]' \
    || fail "the STDERR event lacks rank 1's line: $(broker_get /v1/runs/fatal/events)"
show=$(SHARD_BROKER=$BROKER_URL SHARD_TOKEN=$ADMIN_TOKEN "$BUILD/sbatch-wrappers/shard" show fatal)
echo "$show" | sed 's/^/  /'
grep -q "^FAILED: rank 1 on beta2 exited 3, which --shardnet-fatal-exit says is not to be retried$" <<<"$show" || fail "shard show lacks the cause"
grep -q "^    | FileNotFoundError: /data/shard-0042 is missing (t0522-fatal-marker)$" <<<"$show" || fail "shard show lacks the stderr tail"
[ "$(broker_get /v1/runs/fatal | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = FAILED ] || fail "fatal is no longer FAILED"
[ "$(slurm beta squeue -h -u "$TEST_USER"; slurm alpha squeue -h -u "$TEST_USER")" = "" ] || fail "a job was submitted after a fatal exit"
ok "the batch script's stderr tail follows as STDERR, shard show prints it under the cause; no new job"
