#!/bin/bash
# mode=required: a step does not start when the broker cannot be reached,
# and says why; with the broker up it runs.
. "$(dirname "$0")/lib.sh"
port=$(closed_port)
plugstack alpha broker=http://127.0.0.1:$port mode=required timeout_ms=500
# (Slurm 22.05's srun reports the failed launch but may still exit 0.)
as_user alpha srun -N1 --shardnet echo ran > "$WORK/out" 2>&1 || true
grep -qx ran "$WORK/out" && fail "the task ran with the broker down in required mode"
grep -q "shardnet: this step was refused: broker .* did not take the first heartbeat" "$WORK/out" || fail "user sees no reason: $(cat "$WORK/out")"
grep -h "did not take the first heartbeat" "$SCRATCH"/alpha/log/slurmd.alpha*.log | tail -1 | grep -q "required" \
    || fail "slurmd log lacks the reason"
ok "required + broker down: refused ($(grep -h 'did not take' "$SCRATCH"/alpha/log/slurmd.alpha*.log | tail -1 | sed 's/.*shardnet:/shardnet:/'))"
# Jobs without --shardnet are not affected by the broker at all.
as_user alpha srun -N1 echo plain > "$WORK/plain" 2>&1 || fail "plain job failed in required mode"
ok "jobs without --shardnet still run"
start_receiver ok
plugstack alpha broker=http://127.0.0.1:$RX_PORT mode=required timeout_ms=500
as_user alpha srun -N1 --shardnet echo ran > "$WORK/out2" 2>&1 || fail "required + broker up failed: $(cat "$WORK/out2")"
ok "required + broker up: runs"
