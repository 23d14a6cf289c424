#!/bin/bash
# User-supplied checkpoint paths: "..", relative paths, symlinks into other
# users' trees and directories of other owners are refused with a clear
# message; an accepted dir is made by and owned by the job user.
. "$(dirname "$0")/lib.sh"
refuse() {  # WHAT EXPECTED ARGS...
    local what=$1 expect=$2; shift 2
    if as_user alpha srun -N1 "$@" true > "$WORK/out" 2>&1; then fail "$what was accepted"; fi
    grep -q "shardnet: .*$expect" "$WORK/out" || fail "$what: unclear refusal: $(cat "$WORK/out")"
    ok "$what refused: $(grep -o 'shardnet: .*' "$WORK/out" | head -1)"
}
refuse "../../etc" "not absolute" --shardnet --shardnet-ckpt-dir=../../etc
refuse "/home/../etc" "'..' component" --shardnet --shardnet-ckpt-dir=$TEST_HOME/../../etc
refuse "/etc/shardnet" "is outside" --shardnet --shardnet-ckpt-dir=/etc/shardnet

# A symlink in the user's home that points into root's tree.
mkdir -p /root/shardnet-victim
rm -f "$TEST_HOME/evil"; ln -s /root/shardnet-victim "$TEST_HOME/evil"; chown -h "$TEST_USER": "$TEST_HOME/evil"
refuse "symlink into /root" "is a symlink" --shardnet --shardnet-ckpt-dir=$TEST_HOME/evil/run
[ -z "$(ls -A /root/shardnet-victim)" ] || fail "something was created in /root/shardnet-victim"
# Same refusal when the path only arrives through the environment.
if as_user alpha env SHARDNET_CKPT_DIR=$TEST_HOME/evil/run srun -N1 true > "$WORK/out" 2>&1; then fail "env symlink accepted"; fi
grep -q "is a symlink" "$WORK/out" || fail "env fallback: $(cat "$WORK/out")"
ok "SHARDNET_CKPT_DIR through a symlink refused"

# A directory in the user's home owned by someone else.
mkdir -p "$TEST_HOME/rootowned"; chown root: "$TEST_HOME/rootowned"
refuse "root-owned dir in home" "not to the job user" --shardnet --shardnet-ckpt-dir=$TEST_HOME/rootowned/run

# The step daemon applies the rule itself. A hostile user passes sbatch's
# check with a path that does not exist yet, then plants a symlink before
# the job starts: slurmstepd (root) must refuse it.
rm -rf "$TEST_HOME/race"
j=$(as_user alpha sbatch --parsable --hold -N1 -o "$WORK/race.out" --shardnet --shardnet-ckpt-dir=$TEST_HOME/race/run --wrap 'echo ran')
ln -s /root/shardnet-victim "$TEST_HOME/race"; chown -h "$TEST_USER": "$TEST_HOME/race"
slurm alpha scontrol release "$j"
wait_job alpha "$j"
[ -z "$(ls -A /root/shardnet-victim)" ] || fail "the step created something under /root"
grep -qx ran "$WORK/race.out" 2>/dev/null && fail "the job ran with a checkpoint dir through a symlink"
grep -q "shardnet: this step was refused: checkpoint dir refused: .*race' is a symlink" "$WORK/race.out" \
    || fail "the job's output lacks the refusal: $(cat "$WORK/race.out")"
grep -q "\[$j.batch\] error: shardnet: checkpoint dir refused: .*race' is a symlink" "$SCRATCH"/alpha/log/slurmd.alpha*.log \
    || fail "slurmd log lacks the refusal for job $j"
[ "$(job_state alpha "$j")" = FAILED ] || fail "job $j ended $(job_state alpha "$j"), expected FAILED"
# A user's bad input must never drain a node.
[ -z "$(slurm alpha sinfo -h -R)" ] || fail "a node was drained: $(slurm alpha sinfo -h -R)"
ok "slurmstepd refuses a symlink planted after submission: job FAILED with the reason, no node drained"

# An accepted path: made as the job user, mode 700, nested dirs too.
as_user alpha srun -N2 --shardnet --shardnet-ckpt-dir=$TEST_HOME/ckpt/deep/run1 true || fail "valid ckpt dir refused"
for d in "$TEST_HOME/ckpt" "$TEST_HOME/ckpt/deep" "$TEST_HOME/ckpt/deep/run1"; do
    [ "$(stat -c '%U %a' "$d")" = "$TEST_USER 700" ] || fail "$d is $(stat -c '%U %a' "$d")"
done
ok "nested ckpt dir created by the job user (700)"

# A site checkpoint root.
mkdir -p "$SCRATCH/ckroot"; chmod 1777 "$SCRATCH/ckroot"
plugstack alpha "ckpt_root=$SCRATCH/ckroot"
as_user alpha srun -N1 --shardnet=rootrun bash -c 'echo $SHARDNET_CKPT_DIR' > "$WORK/root.out" || fail "default under ckpt_root failed"
[ "$(cat "$WORK/root.out")" = "$SCRATCH/ckroot/$TEST_USER/rootrun" ] || fail "default ckpt dir $(cat "$WORK/root.out")"
[ "$(stat -c %U "$SCRATCH/ckroot/$TEST_USER/rootrun")" = "$TEST_USER" ] || fail "owner under ckpt_root"
ok "default dir under the site checkpoint root: $(cat "$WORK/root.out")"
rm -rf /root/shardnet-victim "$TEST_HOME/evil" "$TEST_HOME/race" "$TEST_HOME/rootowned"
