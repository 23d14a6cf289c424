#!/bin/bash
# One user cannot make another's jobs fail. The hostile neighbour
# (shardtest2) squats the names a --shardnet step uses: the old default
# /tmp/shardnet.UID (a dir, a symlink, a FIFO), the progress root itself
# where a site put it somewhere users can write, and the default checkpoint
# dir ckpt_root/USER. In mode=optional the victim's job still runs and ends
# 0, with one "shardnet: warning:" line saying why where ShardNet had to
# step aside; in mode=required the step is refused with the reason. A
# user's own bad option is still refused.
. "$(dirname "$0")/lib.sh"
VICTIM_UID=$(id -u "$TEST_USER")
OTHER_UID=$(id -u "$OTHER_USER")
SQUAT=/tmp/shardnet.$VICTIM_UID
SITE_ROOT=/tmp/shardnet-site-root.$$   # a site's progress_root under /tmp: squattable
cleanup() { rm -rf "$SQUAT" "$SITE_ROOT"; cleanup_lib; }
trap cleanup EXIT
squat() {  # KIND PATH: as the neighbour, make PATH a dir, a symlink or a FIFO
    rm -rf "$2"
    case $1 in
    dir) as_other alpha mkdir -m 777 "$2" ;;
    symlink) as_other alpha ln -s /etc "$2" ;;
    fifo) as_other alpha mkfifo -m 666 "$2" ;;
    esac
    [ "$(stat -c %u "$2")" = "$OTHER_UID" ] || fail "the neighbour could not make $2"
}
# runs_ok NAME WARNING|- [sbatch args]: the job ends 0; its output has the
# warning (a regex) once, or none with "-".
JOBS=()
runs_ok() {
    local name=$1 warn=$2; shift 2
    local out=$WORK/$name.out j
    j=$(as_user alpha sbatch --parsable -N1 -o "$out" --shardnet "$@" \
        --wrap 'echo "ran progress=${SHARDNET_PROGRESS:-none}"')
    wait_job alpha "$j"
    slurm alpha scontrol show job "$j" | grep -q 'ExitCode=0:0' \
        || fail "$name: job $j ended $(job_state alpha "$j") $(slurm alpha scontrol show job "$j" | grep -o 'ExitCode=[0-9:]*'): $(cat "$out")"
    grep -q '^ran ' "$out" || fail "$name: the job's script did not run: $(cat "$out")"
    if [ "$warn" = - ]; then
        grep -q 'shardnet:' "$out" && fail "$name: unexpected shardnet message: $(cat "$out")"
        grep -q '^ran progress=/' "$out" || fail "$name: ran without ShardNet: $(cat "$out")"
    else
        [ "$(grep -c 'shardnet: warning:' "$out")" = 1 ] || fail "$name: expected one warning: $(cat "$out")"
        grep -q "shardnet: warning: .*$warn.*this step runs without ShardNet (mode=optional)" "$out" \
            || fail "$name: unclear warning: $(cat "$out")"
        grep -q "\[$j.batch\] shardnet: warning: .*$warn" "$SCRATCH"/alpha/log/slurmd.alpha*.log \
            || fail "$name: slurmd log lacks the warning for job $j"
    fi
    JOB_OUT=$out
    JOBS+=("$j")
    ok "$name: job $j ExitCode=0:0, output: $(tr '\n' '|' < "$out")"
}

plugstack alpha ""
# 1. The old default name in /tmp, squatted three ways: no longer used at
#    all (the default root is /run/shardnet, which only root can write).
for kind in dir symlink fifo; do
    squat "$kind" "$SQUAT"
    runs_ok "tmp-squat-$kind" -
    grep -q "^ran progress=/run/shardnet/alpha\.[0-9]*\.batch\.n0\.[0-9a-f]*/rank-0$" "$JOB_OUT" \
        || fail "progress dir not below /run/shardnet: $(cat "$JOB_OUT")"
done
[ "$(stat -c '%U %a' /run/shardnet)" = "root 755" ] || fail "/run/shardnet is $(stat -c '%U %a' /run/shardnet)"
for try in "mkdir /run/shardnet/shardnet.$VICTIM_UID" "ln -s /etc /run/shardnet/x" "mkfifo /run/shardnet/y"; do
    # shellcheck disable=SC2086
    if as_other alpha $try 2>/dev/null; then fail "the neighbour could $try"; fi
done
ok "the neighbour cannot create anything below /run/shardnet"
# Each step removes its own dir when it ends (a step whose node was killed
# cannot: other tests leave those, so only this test's jobs are looked at).
left=$(for j in "${JOBS[@]}"; do find /run/shardnet -mindepth 1 -maxdepth 1 -newer "$WORK" -name "alpha.$j.*"; done)
[ -z "$left" ] || fail "step dirs left in /run/shardnet: $left"
ok "step progress dirs are removed at the step's end"

# 2. A site that kept progress_root=/tmp: the squats do not matter either
#    (root makes a fresh, exclusive name for each step).
plugstack alpha progress_root=/tmp
for kind in dir symlink fifo; do
    squat "$kind" "$SQUAT"
    runs_ok "tmp-root-squat-$kind" -
done
as_user alpha srun -N1 --shardnet bash -c 'd=$(dirname "$SHARDNET_PROGRESS"); stat -c "%U %a" "$d"; echo x > "$SHARDNET_PROGRESS"' \
    > "$WORK/own.out" 2>&1 || fail "srun with progress_root=/tmp: $(cat "$WORK/own.out")"
[ "$(head -1 "$WORK/own.out")" = "$TEST_USER 700" ] || fail "step dir under /tmp is $(cat "$WORK/own.out")"
ok "progress_root=/tmp: the step's own dir, $TEST_USER 700, despite the squats"

# 3. A progress root where users can write, squatted before root made it:
#    the step runs without ShardNet, and says why.
plugstack alpha "progress_root=$SITE_ROOT"
squat dir "$SITE_ROOT";     runs_ok "site-root-dir" "progress root refused: '$SITE_ROOT' belongs to uid $OTHER_UID, not to uid 0"
squat symlink "$SITE_ROOT"; runs_ok "site-root-symlink" "progress root refused: '$SITE_ROOT' is a symlink"
squat fifo "$SITE_ROOT";    runs_ok "site-root-fifo" "progress root refused: '$SITE_ROOT' is not a directory"
rm -rf "$SITE_ROOT"
plugstack alpha "progress_root=$WORK/no/such/root"
runs_ok "site-root-missing" "progress root refused: cannot create '$WORK/no/such/root'"

# 4. The default checkpoint dir ckpt_root/USER, made first by the neighbour.
CK=$WORK/ckroot; mkdir -p "$CK"; chmod 1777 "$CK"
plugstack alpha "ckpt_root=$CK"
squat dir "$CK/$TEST_USER";     runs_ok "ckpt-foreign-dir" "default checkpoint dir refused: '$CK/$TEST_USER' belongs to uid $OTHER_UID"
squat symlink "$CK/$TEST_USER"; runs_ok "ckpt-symlink" "default checkpoint dir refused: '$CK/$TEST_USER' is a symlink"
squat dir "$CK/$TEST_USER"
as_user alpha srun -N1 -n2 --shardnet true > "$WORK/n2.out" 2>&1 || fail "srun -n2 with a squatted ckpt dir: $(cat "$WORK/n2.out")"
[ "$(grep -c 'shardnet: warning:' "$WORK/n2.out")" = 1 ] || fail "expected one warning for two tasks: $(cat "$WORK/n2.out")"
ok "srun -n2: one warning, both tasks ran"
plugstack alpha "ckpt_root=$WORK/no-such-ckpt-root"
runs_ok "ckpt-root-missing" "default checkpoint dir refused: cannot resolve '$WORK/no-such-ckpt-root'"

# 5. The user's own bad option is still refused, with the reason.
if as_user alpha sbatch --parsable -N1 -o "$WORK/etc.out" --shardnet --shardnet-ckpt-dir=/etc --wrap true > "$WORK/etc.err" 2>&1; then
    fail "--shardnet-ckpt-dir=/etc was accepted"
fi
grep -q "shardnet: --shardnet-ckpt-dir refused: '/etc' is outside" "$WORK/etc.err" || fail "unclear refusal: $(cat "$WORK/etc.err")"
ok "--shardnet-ckpt-dir=/etc refused: $(grep -o 'shardnet: .*' "$WORK/etc.err" | head -1)"

# 6. mode=required: the same squat refuses the step, with the reason.
start_receiver ok
plugstack alpha "broker=http://127.0.0.1:$RX_PORT mode=required ckpt_root=$CK"
j=$(as_user alpha sbatch --parsable -N1 -o "$WORK/req.out" --shardnet --wrap 'echo ran')
wait_job alpha "$j"
grep -qx ran "$WORK/req.out" && fail "required mode ran the job with a squatted checkpoint dir"
grep -q "shardnet: this step was refused: default checkpoint dir refused: '$CK/$TEST_USER' belongs to uid $OTHER_UID.*(mode=required: the step does not start)" \
    "$WORK/req.out" || fail "required mode: unclear refusal: $(cat "$WORK/req.out")"
[ "$(job_state alpha "$j")" = FAILED ] || fail "required: job $j ended $(job_state alpha "$j")"
[ -z "$(slurm alpha sinfo -h -R)" ] || fail "a node was drained: $(slurm alpha sinfo -h -R)"
ok "mode=required: refused ($(grep -o 'shardnet: .*' "$WORK/req.out" | head -1))"

# 7. A worker key others can read is refused by name, owner and mode, in slurmd's log.
secret > "$WORK/open.key"; chmod 644 "$WORK/open.key"
plugstack alpha "broker=http://127.0.0.1:$RX_PORT worker_key_file=$WORK/open.key"
runs_ok "open-key" -
grep -q "error: shardnet: secret file '$WORK/open.key' is owned by uid 0 with mode 0644.*the job goes on without heartbeats" \
    "$SCRATCH"/alpha/log/slurmd.alpha*.log || fail "slurmd log lacks the key refusal"
ok "a world-readable worker key: $(grep -ho "shardnet: secret file '$WORK/open.key'[^;]*" "$SCRATCH"/alpha/log/slurmd.alpha*.log | tail -1)"
