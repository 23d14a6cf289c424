#!/bin/sh
# Save overhead of the Python library against a bare torch.save of a ~100 MB
# state (tests/bench/pylib_save.py), under Debian's /usr/bin/python3.
# Usage: tests/bench/pylib-save.sh [MB (100)] [ROUNDS (5)]; BENCH_DIR: where
# to write (default a temporary directory in TMPDIR or /var/tmp, removed).
top=$(cd "$(dirname "$0")/../.." && pwd)
if [ -n "$BENCH_DIR" ]; then dir=$BENCH_DIR/pylib-save.$$; else dir=$(mktemp -d "${TMPDIR:-/var/tmp}/pylib-save.XXXXXX"); fi
trap 'rm -rf "$dir"' EXIT
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$top/python" nice -n 10 /usr/bin/python3 "$top/tests/bench/pylib_save.py" "$dir" "$@"
