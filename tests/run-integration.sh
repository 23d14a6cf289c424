#!/bin/bash
# Integration tests on real local Slurm clusters (tests/harness/clusters.sh)
# with the built plugin. Runs every tests/integration/t*.sh (or those named),
# tears the clusters down, keeps logs of failed tests under BUILD/test-logs.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-build}" && pwd); shift || true
[ "$(id -u)" = 0 ] || { echo "run-integration: must run as root (starts Slurm daemons)"; exit 1; }
# One harness at a time on a machine: the clusters share munged and the
# test users' jobs. A second run (another checkout's) waits its turn.
exec 9>/tmp/shardnet-harness.lock
flock -n 9 || { echo "run-integration: another harness run holds /tmp/shardnet-harness.lock; waiting"; flock 9; }
# The lock is this process's alone: a daemon the harness or a test starts
# (munged, slurmctld, a broker) must not inherit it, or it would hold the
# lock after this run ends and every later run would wait for good.
harness() { "$HERE/harness/clusters.sh" "$@" 9>&-; }
# The tests' jobs inherit this environment: a knob of this script's must
# not reach them (t0110 checks that a plain job sees no SHARDNET_*).
KEEP_OUTPUT=${SHARDNET_KEEP_OUTPUT:-}
unset SHARDNET_KEEP_OUTPUT
SCRATCH=$(mktemp -d /tmp/shardnet-it.XXXXXX)
chmod 755 "$SCRATCH"
LOGS=$BUILD/test-logs
rm -rf "$LOGS"; mkdir -p "$LOGS"
trap 'harness down "$SCRATCH"' EXIT

harness up "$SCRATCH" "$BUILD" alpha beta || { cp -r "$SCRATCH" "$LOGS/harness"; exit 1; }

tests=("$@"); [ ${#tests[@]} -gt 0 ] || tests=("$HERE"/integration/t*.sh)
pass=0; fail=0; failed=()
for t in "${tests[@]}"; do
    name=$(basename "$t" .sh)
    out=$SCRATCH/$name.out
    start=$(date +%s.%N)
    if SCRATCH=$SCRATCH BUILD=$BUILD timeout 300 bash "$t" >"$out" 2>&1 9>&-; then
        printf 'PASS: %-28s %5.1fs\n' "$name" "$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')"
        pass=$((pass + 1))
        # SHARDNET_KEEP_OUTPUT=1: a passing test's output is kept too (its figures).
        [ -z "$KEEP_OUTPUT" ] || { mkdir -p "$LOGS/$name"; cp "$out" "$LOGS/$name/"; }
    else
        printf 'FAIL: %-28s (output and Slurm logs in %s)\n' "$name" "$LOGS/$name"
        mkdir -p "$LOGS/$name"; cp "$out" "$LOGS/$name/"
        for c in $(cat "$SCRATCH/clusters"); do cp -r "$SCRATCH/$c/log" "$LOGS/$name/$c-log"; done
        # The brokers' logs (the test's own work dir, the newest): a crash's stack is there.
        w=$(ls -td "$SCRATCH"/work.* 2>/dev/null | head -1)
        [ -z "$w" ] || (cd "$w" && find . -maxdepth 3 -name '*.log' -size -50M -print0 | tar --null -cf - -T - 2>/dev/null) |
            (mkdir -p "$LOGS/$name/work" && cd "$LOGS/$name/work" && tar -xf - 2>/dev/null) || true
        sed 's/^/    | /' "$out" | tail -25
        fail=$((fail + 1)); failed+=("$name")
        # What it broke (a node left dead, a job left running) is mended, so
        # that one failure does not fail the tests after it.
        harness heal "$SCRATCH"
    fi
    # Each test leaves the plugstack lines as it found them.
    for c in $(cat "$SCRATCH/clusters"); do harness plugstack "$SCRATCH" "$c" ""; done
done
echo "# integration: $pass passed, $fail failed${failed:+ (${failed[*]})}"
[ "$fail" = 0 ]
