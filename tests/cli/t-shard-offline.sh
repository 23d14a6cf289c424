#!/bin/bash
# The shard commands that need no broker (issue 18): ckpt plan reproduces
# Daly's (2006) worked examples and Young's intervals; bad durations exit 2
# naming the option; ckpt simulate runs; validate and run --dry-run check a
# spec before they look for a broker (none is configured here).
set -euo pipefail
SHARD=${SHARD:?}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export HOME=$T; unset SHARD_BROKER SHARD_TOKEN SHARD_CA_FILE
fail() { echo "FAIL: $*" >&2; exit 1; }

# Daly: R = 10 min, delta = 5 min; M = 24 h, 6 h, 15 min.
for row in "24h 116.7 120.0" "6h 56.7 60.0" "15m 9.1 12.2"; do
    read -r m daly young <<<"$row"
    out=$("$SHARD" ckpt plan --write-cost 5m --mtbf "$m" --restart 10m)
    echo "$out" | grep -q "checkpoint every $daly min" || fail "M=$m: Daly's $daly min not printed: $out"
    echo "$out" | grep -q "Young 1974 (first order): $young min" || fail "M=$m: Young's $young min not printed: $out"
done
"$SHARD" ckpt plan --write-cost 5m --mtbf 24h --restart 10m --work 30d --json | /usr/bin/python3 -c '
import json, sys
v = json.load(sys.stdin)
assert abs(v["daly_s"] / 60 - 116.69) < 0.01, v
assert abs(v["young_s"] / 60 - 120.0) < 1e-9, v
assert 0 < v["expected_waste"] < 0.2, v
assert v["expected_wall_s"] > 30 * 86400, v' || fail "ckpt plan --json"
for bad in "--write-cost 5x --mtbf 1h --restart 1m:--write-cost 5x" "--mtbf 1h --restart 1m:--write-cost is required" \
           "--write-cost 5m --mtbf 0 --restart 1m:--mtbf 0: must be at least 1 ms" \
           "--write-cost 10d --mtbf 1s --restart 0:would almost never finish" "--write-cost 5m --mtbf -3h --restart 1m:--mtbf -3h"; do
    args=${bad%%:*}; want=${bad#*:}
    rc=0; err=$("$SHARD" ckpt plan $args 2>&1) || rc=$?
    [ $rc = 2 ] || fail "ckpt plan $args: exit $rc, expected 2"
    echo "$err" | grep -qF -- "$want" || fail "ckpt plan $args: error does not say '$want': $err"
done
"$SHARD" ckpt simulate --write-cost 5m --mtbf 6h --restart 10m | tail -1 | grep -q "worst: Daly's interval wastes" || fail "ckpt simulate"
# Inputs where failures outrun every write or restart end at once, with an error.
rc=0; err=$(timeout 20 "$SHARD" ckpt simulate --write-cost 10d --mtbf 1s --restart 1m 2>&1) || rc=$?
[ $rc = 2 ] && grep -q "almost never finish" <<<"$err" || fail "ckpt simulate of a run that never ends: exit $rc: $err"
timeout 20 "$SHARD" ckpt simulate --write-cost 1s --mtbf 1s --restart 7s > /dev/null || fail "ckpt simulate of a mostly failing run did not end in 20 s"
rc=0; "$SHARD" ckpt simulate --grid --mtbf 1h 2>/dev/null || rc=$?; [ $rc = 2 ] || fail "--grid with --mtbf: exit $rc"
rc=0; "$SHARD" ckpt simulate --seed x --write-cost 1s --mtbf 1h --restart 1m 2>/dev/null || rc=$?; [ $rc = 2 ] || fail "--seed x: exit $rc"
rc=0; "$SHARD" runs --mtbf 5m 2>/dev/null || rc=$?; [ $rc = 2 ] || fail "runs --mtbf: exit $rc"

# A spec, checked with no broker anywhere.
printf 'name: t\ncommand: "python3 train.py"\nnodes: 2\n' > "$T/good.yaml"
printf 'name: t\ncommand: "python3 train.py"\nnodez: 2\n' > "$T/bad.yaml"
"$SHARD" validate "$T/good.yaml" | grep -q ": ok: 2 node(s)" || fail "validate good.yaml"
for cmd in "validate" "run --dry-run"; do
    rc=0; err=$("$SHARD" $cmd "$T/bad.yaml" 2>&1) || rc=$?
    [ $rc = 2 ] || fail "$cmd bad.yaml: exit $rc, expected 2: $err"
    echo "$err" | grep -q "bad.yaml:3:" || fail "$cmd bad.yaml: no file:line:col in: $err"
    echo "$err" | grep -qi "broker" && fail "$cmd bad.yaml: speaks of a broker: $err"
done
# A good spec with no broker: the broker is what is missing.
rc=0; err=$("$SHARD" run --dry-run "$T/good.yaml" 2>&1) || rc=$?
[ $rc = 2 ] && echo "$err" | grep -qi "broker" || fail "run --dry-run good.yaml without a broker: exit $rc: $err"
echo "ok: shard ckpt plan/simulate and validate need no broker"
