#!/bin/bash
# Issue 31, tier 0: recovery inside the allocation. On a 4-node cluster
# (gamma, added for this test), `sbatch -N3 --no-kill --shardnet-spares=1`
# runs a 2-rank PyTorch DDP job (gloo, one srun task per rank) through
# `shard launch`: ranks on two nodes, the batch host waits as the spare.
# Rank 0's node is killed (its slurmd, step daemons and tasks at once): the
# supervisor sees the broker's FAULT, ends the step and relaunches it on the
# survivor and the spare, in the same Slurm job, from the sealed checkpoint;
# the run SUCCEEDS without a requeue. A rank's own error with every node
# alive is not retried. Spares without no-kill (-k, or SBATCH_NO_KILL)
# are refused; with SBATCH_NO_KILL the job outlives a node.
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (scripts/install-deps.sh installs it)"
"$HARNESS/clusters.sh" add "$SCRATCH" "$BUILD" gamma 4 >/dev/null || fail "the 4-node cluster gamma did not come up"
cleanup_gamma() { "$HARNESS/clusters.sh" remove "$SCRATCH" gamma || true; cleanup_lib; }
trap cleanup_gamma EXIT
start_broker 600
plugstack gamma "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"
cp "$(dirname "$0")/../../etc/examples/pytorch/train.py" "$WORK/train.py"
cp -r "$(dirname "$0")/../../python/shardnet" "$WORK/shardnet"
install -m 755 "$BUILD/sbatch-wrappers/shard" "$WORK/shard"
chmod -R a+rX "$WORK/shardnet" "$WORK/train.py"
show_events() {
    broker_get "/v1/runs/$1/events" | /usr/bin/python3 -c '
import json, sys, time
for e in json.load(sys.stdin)["events"]:
    if e["kind"] != "SEALED": print("   ", time.strftime("%H:%M:%S", time.localtime(e["time"])), "%-16s" % e["kind"], e["cause"][:160])'
}
# Each rank says where it runs and what it was given, then trains.
cat > "$WORK/rank.sh" <<SH
#!/bin/bash
echo "where: rank=\$RANK node=\$SLURMD_NODENAME restart=\$SHARDNET_RESTART trc=\$TORCHELASTIC_RESTART_COUNT master=\$MASTER_ADDR:\$MASTER_PORT step=\$SLURM_STEP_ID"
exec /usr/bin/python3 $WORK/\$1 "\${@:2}"
SH
chmod 755 "$WORK/rank.sh"

# 0. Spares the plugin cannot vouch for: refused on the user's terminal.
for how in "--shardnet-spares=1" "--shardnet-spares 1"; do
    # shellcheck disable=SC2086
    out=$(as_user gamma sbatch --parsable -N3 --shardnet=refused $how --wrap true 2>&1) && fail "spares without no-kill were taken ($how): $out"
    grep -q "needs a job that survives a node's death: add --no-kill (-k)" <<<"$out" || fail "the refusal does not say to add --no-kill: $out"
done
out=$(as_user gamma env SHARDNET_SPARES=1 sbatch --parsable -N3 --shardnet=refused --wrap true 2>&1) && fail "SHARDNET_SPARES without no-kill was taken: $out"
out=$(as_user gamma sbatch --parsable -N3 --no-kill=off --shardnet=refused --shardnet-spares=1 --wrap true 2>&1) && fail "--no-kill=off was taken for no-kill: $out"
ok "spares without --no-kill refused: $(grep -o 'shardnet: --shardnet-spares needs[^;]*' <<<"$out")"

# 1. Rank 0's node dies.
j=$(as_user gamma sbatch --parsable -N3 --no-kill --ntasks-per-node=1 -o "$WORK/sp-%j.out" --shardnet=spare-run --shardnet-spares=1 \
    --shardnet-heartbeat=2 --shardnet-ckpt-every=10 --wrap "exec $WORK/shard launch -- $WORK/rank.sh train.py --steps 400 --step-seconds 0.1")
OUT=$WORK/sp-$j.out
wait_for 90 'any(e["kind"] == "SEALED" and e["evidence"]["checkpoint"] >= "checkpoint-000020" for e in v["events"])' /v1/runs/spare-run/events \
    || fail "spare-run sealed nothing: $(show_events spare-run) $(tail -8 "$OUT")"
grep -q "restart 0: ranks on gamma2,gamma3; spare gamma1" "$OUT" || fail "not launched on gamma2,gamma3 with gamma1 spare: $(grep 'shard launch' "$OUT")"
rank0=$(sed -n 's/^where: rank=0 node=\([a-z0-9]*\) restart=0 .*/\1/p' "$OUT" | head -1)
[ "$rank0" = gamma2 ] || fail "rank 0 runs on '$rank0', not gamma2: $(grep '^where' "$OUT")"
sealed_before=$(broker_get /v1/runs/spare-run/events | /usr/bin/python3 -c 'import json,sys; print(max(e["evidence"]["checkpoint"] for e in json.load(sys.stdin)["events"] if e["kind"] == "SEALED"))')
LOSSES=$TEST_HOME/.shardnet/checkpoints/spare-run.out/losses-rank0.tsv
t0=$(date +%s.%N)
"$HARNESS/clusters.sh" kill-node "$SCRATCH" gamma "$rank0"
# Rank 0 wrote its last loss line before it died: a line after these is
# the relaunched step's rank 0 training again.
lines=$(wc -l < "$LOSSES")
restarted=""; back=""
for _ in $(seq 200); do
    [ -n "$restarted" ] || ! broker_get /v1/runs/spare-run/events | grep -q '"RESTARTED"' || restarted=$(date +%s.%N)
    [ -n "$back" ] || [ "$(wc -l < "$LOSSES")" -le "$lines" ] || back=$(date +%s.%N)
    [ -n "$restarted" ] && [ -n "$back" ] && break
    sleep 0.1
done
show_events spare-run
grep 'shard launch' "$OUT" | sed 's/^/  /'
[ -n "$restarted" ] || fail "no RESTARTED event 20 s after the kill: $(tail -20 "$OUT")"
[ -n "$back" ] || fail "training not back 20 s after the kill: $(tail -20 "$OUT")"
dt_restart=$(awk -v a="$t0" -v b="$restarted" 'BEGIN{printf "%.1f", b-a}')
dt_back=$(awk -v a="$t0" -v b="$back" 'BEGIN{printf "%.1f", b-a}')
broker_get /v1/runs/spare-run/events | /usr/bin/python3 -c '
import json, sys
ev = json.load(sys.stdin)["events"]
f = next(e for e in ev if e["kind"] == "FAULT")
assert f["evidence"]["node_failure"] is True and f["evidence"]["node"].startswith("gamma2/"), f
r = next(e for e in ev if e["kind"] == "RESTARTED")
assert r["evidence"]["dead"] == ["gamma2"] and r["evidence"]["took"] == ["gamma1"], r
assert sorted(r["evidence"]["nodes"]) == ["gamma1", "gamma3"] and r["evidence"]["restart"] == 1, r
assert not any(e["kind"] in ("PLACEMENT", "RECOVERING", "FAILED") for e in ev), [e["kind"] for e in ev]' \
    || fail "the events do not tell gamma2's FAULT and the restart on gamma1: $(show_events spare-run)"
ok "gamma2 (rank 0's node) killed: RESTARTED ${dt_restart}s after the kill, training back ${dt_back}s after it"
wait_for 120 'v["state"] == "SUCCEEDED"' /v1/runs/spare-run || fail "spare-run did not succeed: $(show_events spare-run) $(tail -12 "$OUT")"
awk -v b="$dt_back" 'BEGIN{exit !(b <= 20)}' || fail "training came back ${dt_back}s after the kill (more than 20 s)"
# Same job: the run has one attempt, and its job is the one submitted.
broker_get /v1/runs/spare-run | /usr/bin/python3 -c '
import json, sys
v = json.load(sys.stdin)
assert v["attempt"] == 1, v["attempt"]' || fail "the run went to another attempt: $(broker_get /v1/runs/spare-run)"
[ "$(grep -c '^where: ' "$OUT")" = 4 ] || fail "expected 2 ranks x 2 launches: $(grep '^where' "$OUT")"
grep -q '^where: rank=0 node=gamma1 restart=1 trc=1 ' "$OUT" || fail "restart 1's rank 0 is not on the spare gamma1 (MASTER_ADDR there): $(grep '^where' "$OUT")"
grep -q '^where: rank=1 node=gamma3 restart=1 trc=1 ' "$OUT" || fail "restart 1's rank 1 is not on the survivor gamma3: $(grep '^where' "$OUT")"
grep '^where: .* restart=1 ' "$OUT" | grep -q gamma2 && fail "the dead gamma2 is in the relaunched step"
resumed=$(sed -n 's/.*\[rank 0 attempt 1\] resumed from \(checkpoint-[0-9]*\) at step.*/\1/p' "$OUT" | tail -1)
[ -n "$resumed" ] || fail "the relaunched step did not resume from a checkpoint: $(tail -12 "$OUT")"
[[ "$resumed" < "$sealed_before" ]] && fail "resumed from $resumed, older than $sealed_before, sealed before the kill"
grep -q "done at step 400" "$OUT" || fail "training did not finish: $(tail -5 "$OUT")"
[ "$(slurm gamma squeue -h -u "$TEST_USER")" = "" ] || fail "a job is left: $(slurm gamma squeue -u "$TEST_USER")"
ok "same job $j, relaunched on gamma1 (spare, rank 0 and MASTER_ADDR now) + gamma3, gamma2 left out; resumed from $resumed (sealed $sealed_before before the kill); SUCCEEDED"
"$HARNESS/clusters.sh" start-node "$SCRATCH" gamma gamma2
for _ in $(seq 200); do slurm gamma sinfo -h -n gamma2 -o %T | grep -qx idle && break
    slurm gamma scontrol update nodename=gamma2 state=resume 2>/dev/null || true; sleep 0.2; done

# 2. A program's own error: rank 1 exits 3 at step 8, every node alive.
# shard launch does not relaunch it; the run is FAILED as any program error.
cat > "$WORK/ddp_bug.py" <<'PY'
import datetime, os, sys, time
import torch, torch.distributed as dist
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
os.environ.setdefault("USE_LIBUV", "0")
dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
t = torch.ones(4)
for step in range(1, 1000):
    if rank == 1 and step == 8:
        print("ValueError: rank 1 got a malformed batch (t0540-bug-marker)", file=sys.stderr, flush=True)
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
j=$(as_user gamma sbatch --parsable -N3 --no-kill --ntasks-per-node=1 -o "$WORK/bug-%j.out" --shardnet=spare-bug --shardnet-spares=1 \
    --shardnet-heartbeat=2 --wrap "exec $WORK/shard launch --grace 5 -- $WORK/rank.sh ddp_bug.py")
wait_job gamma "$j" 90
wait_for 15 'v["state"] == "FAILED"' /v1/runs/spare-bug || fail "spare-bug is not FAILED: $(show_events spare-bug) $(tail -8 "$WORK/bug-$j.out")"
show_events spare-bug
grep 'shard launch' "$WORK/bug-$j.out" | sed 's/^/  /'
grep -q "a program error, not retried" "$WORK/bug-$j.out" || fail "shard launch did not call it a program error: $(tail -8 "$WORK/bug-$j.out")"
grep -q "restart 1:" "$WORK/bug-$j.out" && fail "a program error was relaunched"
broker_get /v1/runs/spare-bug/events | /usr/bin/python3 -c '
import json, sys
ev = json.load(sys.stdin)["events"]
assert not any(e["kind"] in ("FAULT", "RESTARTED", "PLACEMENT") for e in ev), [e["kind"] for e in ev]
f = next(e for e in ev if e["kind"] == "FAILED")
assert f["evidence"]["first_failure"]["rank"] == 1 and f["evidence"]["first_failure"]["exit_code"] == 3, f' \
    || fail "spare-bug's events are not a program error's: $(show_events spare-bug)"
ok "rank 1 exits 3, every node alive: not relaunched, FAILED naming rank 1"

# 3. No-kill as SBATCH_NO_KILL, which the plugin accepts for spares: a node
# of the job dies (not the batch host); once Slurm has marked it DOWN and
# dropped it from the job, the job is still RUNNING (requeue off: the
# broker's FAULT for the node must not end the job here).
j=$(as_user gamma env SBATCH_NO_KILL=set sbatch --parsable -N2 -w gamma1,gamma4 -o "$WORK/nk-%j.out" --shardnet=spare-nokill \
    --shardnet-spares=1 --shardnet-requeue=off --shardnet-heartbeat=2 --wrap "sleep 120")
for _ in $(seq 100); do [ "$(job_state gamma "$j")" = RUNNING ] && break; sleep 0.2; done
[ "$(slurm gamma squeue -h -j "$j" -o %B)" = gamma1 ] || fail "job $j's batch host is not gamma1: $(slurm gamma squeue -h -j "$j" -o '%B %N')"
t0=$(date +%s.%N)
"$HARNESS/clusters.sh" kill-node "$SCRATCH" gamma gamma4
shrunk=""
for _ in $(seq 250); do
    [ "$(slurm gamma squeue -h -j "$j" -o %N)" = gamma1 ] && { shrunk=$(date +%s.%N); break; }
    sleep 0.2
done
state=$(job_state gamma "$j")
[ -n "$shrunk" ] || fail "job $j still holds gamma4 50 s after its death (job $state, nodes $(slurm gamma squeue -h -j "$j" -o %N))"
[ "$state" = RUNNING ] || fail "job $j is $state once Slurm dropped gamma4: no no-kill"
ok "SBATCH_NO_KILL=set with --shardnet-spares: Slurm dropped gamma4 from job $j $(awk -v a="$t0" -v b="$shrunk" 'BEGIN{printf "%.0f", b-a}') s after its death, the job still RUNNING on gamma1"
slurm gamma scancel "$j"
"$HARNESS/clusters.sh" start-node "$SCRATCH" gamma gamma4
