#!/bin/bash
# A 2-node srun --shardnet and an sbatch --shardnet job, as the test user,
# see the full environment contract in every task, with correct ranks.
. "$(dirname "$0")/lib.sh"
VARS="SHARDNET_RUN SHARDNET_ATTEMPT SHARDNET_RANK SHARDNET_WORLD_SIZE SHARDNET_LOCAL_RANK SHARDNET_CKPT_DIR SHARDNET_RESUME_FROM SHARDNET_CKPT_EVERY SHARDNET_PROGRESS"
cat > "$WORK/show.sh" <<SH
#!/bin/bash
line="node=\$SLURMD_NODENAME procid=\$SLURM_PROCID localid=\$SLURM_LOCALID ntasks=\$SLURM_NTASKS"
for v in $VARS; do
    [ "\${!v+set}" = set ] || { echo "MISSING \$v"; continue; }
    line="\$line \$v=\${!v}"
done
echo "\$line"
SH
chmod 755 "$WORK/show.sh"

check_lines() {  # FILE EXPECTED_TASKS RUN
    local f=$1 n=$2 run=$3
    grep -q MISSING "$f" && fail "a task lacks part of the contract: $(grep MISSING "$f" | head -3)"
    [ "$(grep -c 'SHARDNET_RUN=' "$f")" = "$n" ] || fail "expected $n task lines in $f, got: $(cat "$f")"
    /usr/bin/python3 - "$f" "$n" "$run" "$TEST_HOME" <<'PY'
import sys
f, n, run, home = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = [dict(kv.split("=", 1) for kv in l.split()) for l in open(f) if "SHARDNET_RUN=" in l]
ranks = sorted(int(r["SHARDNET_RANK"]) for r in rows)
assert ranks == list(range(n)), f"ranks {ranks}"
for r in rows:
    assert r["SHARDNET_RANK"] == r["procid"], r
    assert r["SHARDNET_LOCAL_RANK"] == r["localid"], r
    assert r["SHARDNET_WORLD_SIZE"] == str(n) == r["ntasks"], r
    assert r["SHARDNET_RUN"] == run, r
    assert r["SHARDNET_ATTEMPT"] == "1", r
    assert r["SHARDNET_CKPT_DIR"] == f"{home}/.shardnet/checkpoints/{run}", r
    assert r["SHARDNET_CKPT_EVERY"] == "100", r
    assert r["SHARDNET_RESUME_FROM"] == "", r
    assert r["SHARDNET_PROGRESS"].endswith("/rank-" + r["SHARDNET_RANK"]), r
nodes = {r["node"] for r in rows}
assert len(nodes) == 2, f"tasks ran on {nodes}, expected 2 nodes"
print("contract ok:", len(rows), "tasks on", sorted(nodes))
PY
}

as_user alpha srun -N2 -n4 --shardnet=contract-srun --shardnet-ckpt-every=100 "$WORK/show.sh" > "$WORK/srun.out" 2>&1 \
    || fail "srun failed: $(cat "$WORK/srun.out")"
check_lines "$WORK/srun.out" 4 contract-srun || fail "srun contract"
ok "srun -N2 -n4: contract in every task"

cat > "$WORK/batch.sh" <<SH
#!/bin/bash
srun $WORK/show.sh
SH
chmod 755 "$WORK/batch.sh"
j=$(as_user beta sbatch --parsable -N2 -n4 -o "$WORK/batch.out" --shardnet=contract-sbatch --shardnet-ckpt-every=100 "$WORK/batch.sh")
wait_job beta "$j"
check_lines "$WORK/batch.out" 4 contract-sbatch || fail "sbatch contract: $(cat "$WORK/batch.out")"
ok "sbatch -N2 -n4 with srun inside: contract in every task"

# Env fallbacks, as jobs arriving through slurmrestd carry them.
j=$(as_user beta env SHARDNET_RUN=contract-env SHARDNET_CKPT_EVERY=100 sbatch --parsable -N2 -n4 -o "$WORK/env.out" "$WORK/batch.sh")
wait_job beta "$j"
check_lines "$WORK/env.out" 4 contract-env || fail "env fallback contract: $(cat "$WORK/env.out")"
ok "SHARDNET_* env fallbacks give the same contract"

# The checkpoint dir exists, belongs to the job user, is private.
d=$TEST_HOME/.shardnet/checkpoints/contract-srun
[ "$(stat -c '%U %a' "$d")" = "$TEST_USER 700" ] || fail "ckpt dir $d is $(stat -c '%U %a' "$d")"
ok "checkpoint dir made by the job user, mode 700"

# Without --shardnet nothing of the contract appears.
as_user alpha srun -N1 env > "$WORK/plain.out"
# (The contract's names: a SHARDNET_* knob of the runner's, e.g.
# SHARDNET_K9_SEED, reaches every job through the caller's environment.)
grep -E '^SHARDNET_(RUN|ATTEMPT|RANK|WORLD_SIZE|LOCAL_RANK|CKPT_DIR|RESUME_FROM|CKPT_EVERY|PROGRESS)=' "$WORK/plain.out" \
    && fail "a job without --shardnet got the contract's SHARDNET_ variables"
ok "jobs without --shardnet are untouched"
