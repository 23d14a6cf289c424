#!/bin/bash
# The live demo: two real local Slurm clusters (alpha, beta), one broker
# each (TLS, peered), the nodes probed into them, and the PyTorch example
# submitted with `shard run`: once uninterrupted on alpha, once on beta where
# a node is killed at a checkpoint boundary and the run resumes on alpha.
# Prints the run-state timeline, the final loss beside the uninterrupted
# run's, and tears everything down. Logs stay in the scratch dir on failure.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
H=$TOP/tests/harness
SCRATCH=$(mktemp -d /tmp/shardnet-demo.XXXXXX); chmod 755 "$SCRATCH"
export SCRATCH BUILD
echo "== starting clusters alpha and beta (slurmctld + 2 slurmd each, munge)"
"$H/clusters.sh" up "$SCRATCH" "$BUILD" alpha beta
. "$TOP/tests/integration/lib.sh"
trap 'cleanup_lib; "$H/clusters.sh" down "$SCRATCH"' EXIT
trap 'echo "demo failed; logs kept in $SCRATCH (brokers: $FED/*.log, Slurm: $SCRATCH/*/log)" >&2; trap - EXIT; cleanup_lib; "$H/clusters.sh" down "$SCRATCH"' ERR
echo "== starting alpha-broker and beta-broker (TLS, peer tokens, pinned certificates)"
start_federation
fed_receipts   # each broker signs receipts of what it records (doc/receipts.md)
for n in alpha1 alpha2 beta1 beta2; do
    b=$([ "${n:0:1}" = a ] && echo A || echo B)
    "$BUILD/hwloc-probe/shardnet-probe" --host "$n" > "$WORK/$n.json"
    curl -sf --cacert "$(fed_crt $b)" -H "Authorization: Bearer $ADMIN_TOKEN" -X POST --data-binary @"$WORK/$n.json" \
        "https://127.0.0.1:$(fed_port $b)/v1/nodes" > /dev/null
done
echo "probed the nodes into their brokers: $("$BUILD/hwloc-probe/shardnet-probe" --slurm-node --host beta1)"
# The example imports the trainer library (python/shardnet): beside it, as
# `make install` would put it where /usr/bin/python3 looks.
mkdir -p "$WORK/example"; cp "$TOP/etc/examples/pytorch/train.py" "$WORK/example/"; cp -r "$TOP/python/shardnet" "$WORK/example/"
chmod -R a+rX "$WORK/example"
sed "s|/opt/shardnet/examples/pytorch|$WORK/example|" "$TOP/etc/examples/pytorch/spec.yaml" > "$WORK/spec.yaml"; chmod 644 "$WORK/spec.yaml"
echo; echo "== shard capacity"; shard capacity
CK=$TEST_HOME/.shardnet/checkpoints

echo; echo "== shard run spec.yaml --cluster alpha   (the uninterrupted reference)"
out=$(shard run "$WORK/spec.yaml" --cluster alpha); echo "$out"
ref=$(awk '$1 == "run" {print $2}' <<<"$out")
shard --broker "https://127.0.0.1:$A_PORT" --ca-file "$FED/a.crt" watch "$ref" | tail -2

echo; echo "== shard run spec.yaml --cluster beta   (a node of beta will die)"
out=$(shard run "$WORK/spec.yaml" --cluster beta); echo "$out"
run=$(awk '$1 == "run" {print $2}' <<<"$out")
shard watch "$run" > "$WORK/watch.out" &
WATCH=$!
fed_wait 90 'sum(e["kind"] == "SEALED" for e in v["events"]) >= 4' B "/v1/runs/$run/events" || { echo "no checkpoints sealed"; false; }
"$H/clusters.sh" kill-node "$SCRATCH" beta beta2   # right after a seal: a checkpoint boundary
echo "killed beta2 (slurmd, step daemons and tasks, kill -9) at $(date +%H:%M:%S)"
wait $WATCH || true
echo; echo "== shard watch $run"; sed 's/^/  /' "$WORK/watch.out"

echo; echo "== run-state timeline"
/usr/bin/python3 - "$run" <(fed_get B "/v1/runs/$run/events") <(fed_get A "/v1/runs/$run/events") <<'PY'
import json, sys, time
run = sys.argv[1]
ev = json.load(open(sys.argv[2]))["events"] + json.load(open(sys.argv[3]))["events"]
ev.sort(key=lambda e: e["time"])
fault = next(e for e in ev if e["kind"] == "FAULT")
sealed = [e for e in ev if e["kind"] == "SEALED" and e["time"] < fault["time"]][-1]
placement = next(e for e in ev if e["kind"] == "PLACEMENT" and e["time"] >= fault["time"] and "alpha" in e["cause"] and "job" in e["cause"])
recovered = next(e for e in ev if e["kind"] == "RECOVERED")
t = lambda e: time.strftime("%H:%M:%S", time.localtime(e["time"]))
ck = sealed["evidence"]["checkpoint"]
print(f"    {t(sealed)} SEALED     {ck} committed by all ranks   optimizer + RNG + model state + data position")
print(f"    {t(fault)} FAULT      {fault['cause'][:60]}   communication group degraded")
print(f"    {t(placement)} PLACEMENT  {placement['cause'][:60]}   nodes / fabric / checkpoint storage matched")
print(f"    {t(recovered)} RECOVERED  state restored / group re-formed   resume from {ck}")
print(f"    fault -> RECOVERED: {recovered['time'] - fault['time']:.1f} s after the FAULT; "
      f"{recovered['time'] - sealed['time']:.1f} s after the last seal")
PY
echo; echo "== final loss, uninterrupted vs killed-and-moved"
/usr/bin/python3 - "$CK/$ref.out" "$CK/$run.out" <<'PY'
import sys
def last(d):
    rows = {}
    for line in open(d + "/losses-rank0.tsv"):
        s, l = line.split(); rows[int(s)] = l
    return rows
a, b = last(sys.argv[1]), last(sys.argv[2])
n = max(a)
print(f"    step {n}: uninterrupted loss {a[n]}   resumed loss {b[n]}")
print(f"    loss curves equal step by step: {a == b}  ({len(a)} steps)")
ha, hb = (open(d + "/final.sha256").read().strip() for d in sys.argv[1:3])
print(f"    final parameters bitwise equal: {ha == hb}  ({ha[:16]}...)")
PY
echo; echo "== checkpoint overhead (the trainer's own measure, attempt 2 on alpha)"
grep -h "checkpoint overhead" "$WORK/$run"-*.out | sed 's/^/    /' || true
echo; echo "== shard verify $run   (the receipts of both brokers, offline, each broker's public key pinned to it)"
final=$(ls -d "$CK/$run"/checkpoint-* | sort | tail -1)
shard verify "$run" --key beta-broker="$FED/b.receipts.pub" --key alpha-broker="$FED/a.receipts.pub" --checkpoint-dir "$final" | sed 's/^/    /'

echo; echo "== the dashboard (served by each broker)"
echo "$ADMIN_TOKEN" > "$FED/admin.token"; chmod 600 "$FED/admin.token"
echo "    beta-broker  https://127.0.0.1:$B_PORT/#/runs/$run"
echo "    alpha-broker https://127.0.0.1:$A_PORT/#/runs/$run"
echo "    sign in with the admin token in $FED/admin.token (self-signed certificates: $FED/*.crt)"
. "$TOP/tests/web/lib.sh"
if (web_deps >/dev/null) && nice -n 10 node "$WEB_TESTS/screenshot.mjs" "https://127.0.0.1:$B_PORT" "$ADMIN_TOKEN" "$run" "$BUILD/demo-run.png"; then
    echo "    a screenshot of the run page: $BUILD/demo-run.png"
else
    echo "    (no screenshot: chromium or puppeteer-core could not run)"
fi
# On a terminal (not in CI) the brokers stay up to be looked at.
if [ -t 0 ] && [ -t 1 ] && [ -z "${CI:-}" ]; then
    read -r -p "    the clusters and brokers stay up until you press Enter " _ || true
fi
echo; echo "== tearing down"
