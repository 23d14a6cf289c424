#!/bin/sh
# Runs each libFuzzer target for SECONDS on a working copy of its seed
# corpus (the seeds in the repository stay as they are) and prints the
# executions per target. Crashes land in DIR/artifacts/TARGET/; the exit
# status is 1 when any target found one.
#   run.sh DIR SECONDS TARGET...    (DIR: build-fuzz/tests/fuzz)
set -u
dir=$1 secs=$2; shift 2
src=$(cd "$(dirname "$0")" && pwd)
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed=0
summary=""
for t in "$@"; do
    bin="$dir/fuzz-$t"
    [ -x "$bin" ] || { echo "run.sh: $bin is not built" >&2; exit 2; }
    work="$dir/work/$t" art="$dir/artifacts/$t/" log="$dir/$t.log"
    mkdir -p "$work" "$art"
    extra=""
    # One Service for the whole run: its store thread's memory is not a
    # leak of an input, and a request may wait on it.
    [ "$t" = routes ] && extra="-detect_leaks=0 -timeout=60"
    echo "== fuzz-$t for ${secs}s (log: $log)"
    "$bin" -max_total_time="$secs" -print_final_stats=1 -max_len=16384 -rss_limit_mb=4096 \
        -artifact_prefix="$art" $extra "$work" "$src/corpus/$t" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
    line="fuzz-$t: ${execs:-?} executions in ${secs}s, ${cov:-cov: ?}, corpus $(ls "$work" | wc -l) files"
    if [ $rc -ne 0 ]; then
        failed=1
        line="$line  FAILED (rc $rc): $(ls "$art" | tr '\n' ' ')"
        tail -n 40 "$log"
    fi
    echo "$line"
    summary="$summary$line
"
done
echo "== executions per target"
printf '%s' "$summary"
exit $failed
