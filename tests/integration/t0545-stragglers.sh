#!/bin/bash
# Issue 31, stragglers: a 3-rank job whose ranks step apart (each trains on
# its own, checkpointing every 8 steps; local SGD, a sweep) runs on a 4-node
# cluster through `shard launch` with one spare and
# --shardnet-straggler=replace. From step 240 the rank on gamma3 runs at a
# fifth of the others' pace. The broker (3 s windows, 2 in a row, under 0.5 x
# the median) names gamma3 in a STRAGGLER event; shard launch waits for the
# next sealed checkpoint, then relaunches the step with the spare in
# gamma3's place, in the same job, from that checkpoint. Nothing else is
# ever named: not before the slowdown, not after the swap, not the spare.
. "$(dirname "$0")/lib.sh"
"$HARNESS/clusters.sh" add "$SCRATCH" "$BUILD" gamma 4 >/dev/null || fail "the 4-node cluster gamma did not come up"
cleanup_gamma() { "$HARNESS/clusters.sh" remove "$SCRATCH" gamma || true; cleanup_lib; }
trap cleanup_gamma EXIT
DETECTOR_EXTRA='"straggler_fraction": 0.5, "straggler_window_seconds": 3, "straggler_windows": 2' start_broker 600
plugstack gamma "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"
install -m 755 "$BUILD/sbatch-wrappers/shard" "$WORK/shard"
show_events() {
    broker_get "/v1/runs/$1/events" | /usr/bin/python3 -c '
import json, sys, time
for e in json.load(sys.stdin)["events"]:
    if e["kind"] != "SEALED": print("   ", time.strftime("%H:%M:%S", time.localtime(e["time"])), "%-16s" % e["kind"], e["cause"][:170])'
}
# Each rank on its own (lib.sh's trainer): 20 steps/s, 4 on SLOW_NODE from
# step SLOW_FROM; a checkpoint (its rank's step, its manifest) every 8 steps.
write_trainer "$WORK/apart.sh"

rm -rf "$TEST_HOME/.shardnet/checkpoints/slow-run"   # a run of the same name before: its seals are not this run's
j=$(as_user gamma env TRAINER_STEPS=600 TRAINER_CKPT=8 STEP_SLEEP=0.05 SLOW_NODE=gamma3 SLOW_FROM=240 SLOW_SLEEP=0.25 sbatch --parsable -N4 --no-kill --ntasks-per-node=1 -o "$WORK/st-%j.out" \
    --shardnet=slow-run --shardnet-spares=1 --shardnet-straggler=replace --shardnet-heartbeat=1 --shardnet-ckpt-every=8 \
    --wrap "exec $WORK/shard launch -- $WORK/apart.sh")
OUT=$WORK/st-$j.out
wait_for 120 'any(e["kind"] == "STRAGGLER" for e in v["events"])' /v1/runs/slow-run/events \
    || fail "no STRAGGLER event: $(show_events slow-run) $(tail -8 "$OUT")"
named=$(date +%s.%N)
wait_for 60 'any(e["kind"] == "RESTARTED" for e in v["events"])' /v1/runs/slow-run/events \
    || fail "no swap after the STRAGGLER event: $(show_events slow-run) $(grep 'shard launch' "$OUT")"
swapped=$(date +%s.%N)
wait_for 120 'v["state"] == "SUCCEEDED"' /v1/runs/slow-run || fail "slow-run did not succeed: $(show_events slow-run) $(tail -12 "$OUT")"
show_events slow-run
grep 'shard launch' "$OUT" | sed 's/^/  /'
grep -q "restart 0: ranks on gamma2,gamma3,gamma4; spare gamma1" "$OUT" || fail "not launched on gamma2-4 with gamma1 spare: $(grep 'shard launch' "$OUT")"
grep -q "the broker names node gamma3 a straggler: swapped for spare gamma1 at the next sealed checkpoint" "$OUT" \
    || fail "shard launch did not take the STRAGGLER event: $(grep 'shard launch' "$OUT")"
broker_get /v1/runs/slow-run/events | /usr/bin/python3 -c '
import json, sys
ev = json.load(sys.stdin)["events"]
st = [e for e in ev if e["kind"] == "STRAGGLER"]
assert len(st) == 1, ["%s %s" % (e["evidence"]["node"], e["cause"]) for e in st]
s = st[0]["evidence"]
assert s["node"] == "gamma3" and s["attempt"] == 1 and s["nodes"] == 3 and s["rate"] < 0.5 * s["median"], s
assert s["windows"] == 2 and s["window_seconds"] == 3, s
r = [e for e in ev if e["kind"] == "RESTARTED"]
assert len(r) == 1, r
r = r[0]
assert r["evidence"]["straggler"] == "gamma3" and r["evidence"]["took"] == ["gamma1"], r
assert sorted(r["evidence"]["nodes"]) == ["gamma1", "gamma2", "gamma4"], r
# The swap came at a checkpoint sealed after the STRAGGLER event.
assert any(e["kind"] == "SEALED" and st[0]["id"] < e["id"] < r["id"] for e in ev), "no seal between the STRAGGLER and the swap"
assert not any(e["kind"] in ("FAULT", "PLACEMENT", "RECOVERING", "FAILED") for e in ev), [e["kind"] for e in ev]' \
    || fail "the events do not tell gamma3 named once and swapped for gamma1 at a seal: $(show_events slow-run)"
ok "gamma3 named a straggler $(awk -v a="$named" -v b="$swapped" 'BEGIN{printf "%.0f", b-a}') s before its swap for gamma1 at a sealed checkpoint; nobody else named, before or after"
resumed=$(sed -n 's/^shard launch: checkpoint \(checkpoint-[0-9]*\) sealed: swapping straggler gamma3.*/\1/p' "$OUT" | tail -1)
[ -n "$resumed" ] || fail "shard launch did not say at which seal it swapped: $(grep 'shard launch' "$OUT")"
want=$((10#${resumed#checkpoint-}))
for r in 0 1 2; do
    line=$(grep "^attempt=1 .* restart=1 rank=$r/3 " "$OUT") || fail "rank $r was not relaunched: $(grep '^attempt=' "$OUT")"
    [ "$(sed -n 's/.*start=\([0-9]*\)$/\1/p' <<<"$line")" = "$want" ] || fail "rank $r did not resume at $resumed: $line"
done
grep '^attempt=1 .* restart=1 ' "$OUT" | grep -q gamma3 && fail "the straggler gamma3 is in the relaunched step"
[ "$(grep -c '^done: ' "$OUT")" = 3 ] || fail "not every rank finished: $(grep -E '^(attempt=|done)' "$OUT")"
broker_get /v1/runs/slow-run | /usr/bin/python3 -c 'import json,sys; v=json.load(sys.stdin); assert v["attempt"] == 1, v["attempt"]' \
    || fail "the run went to another attempt"
[ "$(slurm gamma squeue -h -u "$TEST_USER")" = "" ] || fail "a job is left: $(slurm gamma squeue -u "$TEST_USER")"
ok "same job $j: relaunched on gamma1,gamma2,gamma4 from $resumed, every rank finished; SUCCEEDED"
