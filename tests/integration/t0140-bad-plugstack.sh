#!/bin/bash
# A bad plugstack argument: a clear "shardnet:" error naming it, and the
# plugin (marked required) refuses to run rather than guessing.
. "$(dirname "$0")/lib.sh"
check() {  # ARGS EXPECTED-TEXT
    plugstack alpha "$1"
    if as_user alpha srun -N1 --shardnet true > "$WORK/out" 2>&1; then fail "srun ran with plugstack '$1'"; fi
    grep -q "shardnet: .*$2" "$WORK/out" || fail "no clear error for '$1': $(cat "$WORK/out")"
    ok "'$1' -> $(grep -o "shardnet: .*" "$WORK/out" | head -1)"
}
check "bogus=1" "unknown plugstack argument 'bogus'"
check "heartbeat_min=fast" "heartbeat_min=fast"
check "broker=ftp://x" "broker=ftp://x"
check "ckpt_root=../scratch" "ckpt_root=../scratch"
check "heartbeat_min=30 heartbeat_max=10" "heartbeat_min (30) is above heartbeat_max (10)"
check "mode=required" "mode=required needs broker"
# sbatch refuses the same way.
plugstack alpha "bogus=1"
as_user alpha sbatch --wrap true > "$WORK/sb" 2>&1 && fail "sbatch accepted a job with a bad plugstack line"
grep -q "shardnet: unknown plugstack argument 'bogus'" "$WORK/sb" || fail "sbatch: $(cat "$WORK/sb")"
ok "sbatch refuses too"
# The slurmstepd side logs it in slurmd's log: bad line only on the node side.
plugstack alpha ""
