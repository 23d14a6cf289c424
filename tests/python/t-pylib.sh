#!/bin/sh
# The trainer-side Python library (python/shardnet) under Debian's
# /usr/bin/python3, the interpreter with python3-torch: unittest from the
# source tree. PYTHON overrides the interpreter (configure's TRAINER_PYTHON).
PY=${TRAINER_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
"$PY" -c 'import torch, numpy' 2>/dev/null || { echo "t-pylib: $PY cannot import torch and numpy (scripts/install-deps.sh installs python3-torch)"; exit 1; }
# The broker the sealed-digest tests start (make check's BROKER, relative to
# the build's tests/): made absolute before the cd.
[ -n "${BROKER:-}" ] && BROKER=$(cd "$(dirname "$BROKER")" && pwd)/$(basename "$BROKER") && export BROKER
# A torch built without libuv (Debian 13's 2.6) cannot give the two-rank
# tests' rendezvous the libuv store it asks for by default since 2.4.
case "$("$PY" -c 'import torch.distributed as d; d.TCPStore("127.0.0.1", 0, 1, True, use_libuv=True)' 2>&1)" in
    *"without libuv support"*) export USE_LIBUV=0 ;;
esac
cd "$here" && PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$here/../../python" exec nice -n 10 "$PY" -m unittest -v test_shardnet test_example
