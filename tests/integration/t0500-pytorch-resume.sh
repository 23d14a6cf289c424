#!/bin/bash
# Issue 7: the PyTorch example (Debian's python3-torch, gloo across 2 nodes)
# run uninterrupted on alpha, and again on beta with a node killed mid-run
# and resumed on alpha through the peer broker: the final parameters are
# bitwise equal and the loss curves agree step by step. Then the newest
# checkpoint is corrupted and a resume falls back to the previous sealed one.
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (scripts/install-deps.sh installs it)"
start_federation
TRAIN=$(cd "$(dirname "$0")/../../etc/examples/pytorch" && pwd)/train.py
cp "$TRAIN" "$WORK/train.py"; chmod 755 "$WORK/train.py"
# The harness installs no Python package: the library beside the script (on its sys.path).
cp -r "$(dirname "$0")/../../python/shardnet" "$WORK/shardnet"; chmod -R a+rX "$WORK/shardnet"
STEPS=120
CK=$TEST_HOME/.shardnet/checkpoints
job() {  # CLUSTER RUN [sbatch args]
    local c=$1 r=$2; shift 2
    as_user "$c" sbatch --parsable -N2 -n2 -o "$WORK/$r-%j.out" --shardnet="$r" --shardnet-heartbeat=1 --shardnet-ckpt-every=10 "$@" \
        --wrap "srun /usr/bin/python3 $WORK/train.py --steps $STEPS --step-seconds 0.1"
}
losses() {  # RUN -> "step loss" lines, the last value of each step
    /usr/bin/python3 -c 'import sys
last = {}
for line in open(sys.argv[1]):
    s, l = line.split(); last[int(s)] = l
print("\n".join(f"{s} {last[s]}" for s in sorted(last)))' "$CK/$1.out/losses-rank0.tsv"
}

ref=$(job alpha pt-ref)
wait_job alpha "$ref" 120
fed_wait 20 'v["state"] == "SUCCEEDED"' A /v1/runs/pt-ref || fail "pt-ref did not succeed: $(cat "$WORK"/pt-ref-*.out | tail -5)"
ok "uninterrupted: $(grep -o 'done at step.*' "$WORK"/pt-ref-*.out)"

j=$(job beta pt-fault)
fed_wait 60 'any(e["kind"] == "SEALED" and e["evidence"]["checkpoint"] >= "checkpoint-000030" for e in v["events"])' B /v1/runs/pt-fault/events \
    || fail "pt-fault sealed nothing: $(fed_get B /v1/runs/pt-fault/events) $(tail -5 "$WORK"/pt-fault-*.out)"
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
fed_wait 90 'v["state"] == "SUCCEEDED"' A /v1/runs/pt-fault || fail "pt-fault did not finish at A: $(fed_get A /v1/runs/pt-fault/events) $(tail -8 "$WORK"/pt-fault-*.out)"
for b in B A; do
    fed_get $b /v1/runs/pt-fault/events | /usr/bin/python3 -c '
import json, sys, time
for e in json.load(sys.stdin)["events"]:
    if e["kind"] != "SEALED": print("   ", time.strftime("%H:%M:%S", time.localtime(e["time"])), "%-10s" % e["kind"], e["cause"][:140])'
done
grep 'resumed from\|done at step' "$WORK"/pt-fault-*.out | sed 's/^/  /'
a=$(cat "$CK/pt-ref.out/final.sha256"); b=$(cat "$CK/pt-fault.out/final.sha256")
[ "$a" = "$b" ] || fail "final parameters differ: uninterrupted $a, resumed $b"
diff <(losses pt-ref) <(losses pt-fault) > "$WORK/loss.diff" || fail "loss curves differ: $(head "$WORK/loss.diff")"
[ "$(losses pt-ref | wc -l)" = "$STEPS" ] || fail "the loss curve has $(losses pt-ref | wc -l) steps, not $STEPS"
ok "killed on beta, resumed on alpha: final parameters bitwise equal ($a), $STEPS losses equal step by step"
# Its checkpoint was sealed at beta's broker; the decision carried the seal
# (name, files, root, receipt), so alpha's broker vouches for it: the resume
# at alpha is checked against it, with no fallback to the manifest alone.
if grep -q "sealed digests could not be had\|sealed_elsewhere" "$WORK"/pt-fault-*.out; then
    fail "the resume at alpha fell back to the manifest: $(grep -h 'could not be had' "$WORK"/pt-fault-*.out | head -2)"
fi
resumed=$(grep -ho 'resumed from checkpoint-[0-9]*' "$WORK"/pt-fault-*.out | head -1 | awk '{print $3}')
[ -n "$resumed" ] || fail "pt-fault did not resume at alpha: $(tail -5 "$WORK"/pt-fault-*.out)"
carried=$(fed_get A "/v1/runs/pt-fault/checkpoints/$resumed/files?rank=1") || fail "alpha serves no seal of $resumed"
at_beta=$(fed_get B "/v1/runs/pt-fault/checkpoints/$resumed/files?rank=1") || fail "beta serves no seal of $resumed"
# What alpha serves is beta's seal as carried, and only that: a commit of
# the name by attempt 2's agents is answered with the carried seal (no seal
# of alpha's own, no SEALED event there), and the receipt it names is
# beta's claim, not alpha's.
alpha_ckpts=$(fed_get A /v1/runs/pt-fault/checkpoints) || fail "alpha lists no checkpoints of pt-fault"
alpha_events=$(fed_get A /v1/runs/pt-fault/events) || fail "alpha lists no events of pt-fault"
/usr/bin/python3 - "$carried" "$at_beta" "$alpha_ckpts" "$alpha_events" "$resumed" <<'PY' || fail "alpha's seal of $resumed: $carried (beta's: $at_beta)"
import json, sys
v, b, ck, ev, name = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5]
assert b["sealed_by"] == "beta-broker" and not b.get("carried"), b
assert v.get("carried") and v["sealed_by"] == "beta-broker" and v["attempt"] == b["attempt"], v
assert v["receipt"] is None, v
if b["receipt"] is None:
    assert "sender_receipt" not in v, v
else:
    claim = v["sender_receipt"]
    assert claim["broker"] == "beta-broker" and claim["checked"] is False, v
    assert (claim["seq"], claim["digest"]) == (b["receipt"]["seq"], b["receipt"]["digest"]), (v, b)
assert v["list"] == b["list"], (v["list"], b["list"])
assert v["list"]["count"] == 2 and len(v["files"]) == 1 and v["files"][0]["inclusion"] is not None, v
assert name not in [c["name"] for c in ck["checkpoints"]], ("alpha sealed the resumed checkpoint again", ck)
resealed = [e for e in ev["events"] if e["kind"] == "SEALED" and e["evidence"].get("checkpoint") == name]
assert not resealed, ("alpha sealed the resumed checkpoint again", resealed)
PY
ok "the resume at alpha from $resumed (sealed at beta) was checked against the seal beta's decision carried: no manifest-only fallback"

# Corrupt the newest checkpoint of pt-ref; a resume from it falls back.
newest=$(ls -d "$CK"/pt-ref/checkpoint-* | sort | tail -1)
printf 'garbage' | dd of="$newest/rank-0.pt" bs=1 seek=100 conv=notrunc 2>/dev/null
rm -f "$CK/pt-ref.out/final.sha256"
r=$(job alpha pt-ref --shardnet-resume="$(basename "$newest")" --export=SHARDNET_ATTEMPT=2)
wait_job alpha "$r" 120
grep -q "fell back to checkpoint-" "$WORK/pt-ref-$r.out" || fail "no fallback: $(cat "$WORK/pt-ref-$r.out")"
grep 'fell back\|resumed from' "$WORK/pt-ref-$r.out" | sed 's/^/  /'
[ "$(cat "$CK/pt-ref.out/final.sha256")" = "$a" ] || fail "after the fallback the final parameters differ"
ok "corrupt $(basename "$newest"): both ranks fell back to the previous sealed checkpoint and ended bitwise equal"

# Swapped consistently, by whoever can write the directory: the newest sealed
# checkpoint's rank-0 shard replaced by an older one's (a well-formed shard)
# and its manifest rewritten to match. The manifest agrees; the digest the
# broker sealed does not (fetched with the tasks' reader token), and the
# resume falls back.
newest=$(ls -d "$CK"/pt-ref/checkpoint-* | sort | tail -1)
older=$(ls -d "$CK"/pt-ref/checkpoint-* | sort | head -1)
[ "$newest" != "$older" ] || fail "pt-ref has one checkpoint only"
cp "$older/rank-0.pt" "$newest/rank-0.pt"
echo "$(sha256sum < "$newest/rank-0.pt" | cut -d' ' -f1) $(stat -c %s "$newest/rank-0.pt") rank-0.pt" > "$newest/rank-0.manifest"
chown "$TEST_USER" "$newest/rank-0.pt" "$newest/rank-0.manifest"
swapped=$(sha256sum < "$newest/rank-0.pt" | cut -d' ' -f1)
rm -f "$CK/pt-ref.out/final.sha256"
r=$(job alpha pt-ref --shardnet-resume="$(basename "$newest")" --export=SHARDNET_ATTEMPT=3)
wait_job alpha "$r" 120
grep -q "checkpoint $(basename "$newest") failed verification: $newest/rank-0.pt: sha256 $swapped ([0-9]* bytes), the broker sealed sha256 [0-9a-f]\{64\}" \
    "$WORK/pt-ref-$r.out" || fail "the swapped shard was not refused for the broker's sealed digest: $(grep -v '^step' "$WORK/pt-ref-$r.out" | tail -5)"
grep -q "fell back to checkpoint-" "$WORK/pt-ref-$r.out" || fail "no fallback after the swap: $(tail -5 "$WORK/pt-ref-$r.out")"
grep "failed verification: $newest\|fell back" "$WORK/pt-ref-$r.out" | cut -c1-220 | sed 's/^/  /'
[ "$(cat "$CK/pt-ref.out/final.sha256")" = "$a" ] || fail "after the swap's fallback the final parameters differ"
ok "shard and manifest swapped together in $(basename "$newest"): refused for the broker's sealed digest, fell back, ended bitwise equal"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2
for _ in $(seq 150); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done

# The pre-limit signal (SIGUSR1, what prelimit=USR1@S sends): an emergency
# checkpoint at the next step, off the regular interval.
E=$WORK/emergency; mkdir -p "$E/ck"; chmod -R 777 "$E"
runuser -u "$TEST_USER" -- env -i PATH=/usr/bin:/bin MASTER_ADDR=127.0.0.1 MASTER_PORT=$("$HARNESS/free_ports.py" 1) \
    SHARDNET_RANK=0 SHARDNET_WORLD_SIZE=1 SHARDNET_CKPT_DIR="$E/ck/run" SHARDNET_CKPT_EVERY=1000 SHARDNET_ATTEMPT=1 \
    SHARDNET_PROGRESS="$E/progress" /usr/bin/python3 "$WORK/train.py" --steps 400 --step-seconds 0.02 > "$E/out" 2>&1 &
P=$!
for _ in $(seq 100); do [ -s "$E/progress" ] && break; sleep 0.1; done
sleep 0.5; pkill -USR1 -f "train.py --steps 400 --step-seconds 0.02"; wait $P || fail "the example failed: $(cat "$E/out")"
grep -q "pre-limit signal: emergency checkpoint checkpoint-" "$E/out" || fail "no emergency checkpoint: $(cat "$E/out")"
name=$(grep -o "emergency checkpoint checkpoint-[0-9]*" "$E/out" | awk '{print $3}')
[ -f "$E/ck/run/$name/rank-0.pt" ] && [ -f "$E/ck/run/$name/rank-0.manifest" ] || fail "$name has no shard and manifest"
ok "SIGUSR1: emergency checkpoint $name written with its manifest (interval 1000)"
