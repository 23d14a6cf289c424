#!/bin/bash
# Issue 19 on real clusters: the federated PyTorch run of t0500 (killed on
# beta, resumed on alpha through the peer broker) yields one receipt chain
# across both brokers: attempt 1 on beta, its seals, the FAULT, the move,
# attempt 2 on alpha, its seals, the end; `shard verify RUN` passes with the
# two pinned public keys and re-hashes the final checkpoint on disk, and a
# shard changed after sealing is caught.
# (Written with the broker side of receipts; run by `make integration`.)
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (scripts/install-deps.sh installs it)"
start_federation
fed_receipts   # both brokers sign, each with its own key
TRAIN=$(cd "$(dirname "$0")/../../etc/examples/pytorch" && pwd)/train.py
cp "$TRAIN" "$WORK/train.py"; chmod 755 "$WORK/train.py"
cp -r "$(dirname "$0")/../../python/shardnet" "$WORK/shardnet"; chmod -R a+rX "$WORK/shardnet"
STEPS=120
CK=$TEST_HOME/.shardnet/checkpoints

j=$(as_user beta sbatch --parsable -N2 -n2 -o "$WORK/pt-rc-%j.out" --shardnet=pt-rc --shardnet-heartbeat=1 --shardnet-ckpt-every=10 \
    --wrap "srun /usr/bin/python3 $WORK/train.py --steps $STEPS --step-seconds 0.1")
fed_wait 60 'any(e["kind"] == "SEALED" and e["evidence"]["checkpoint"] >= "checkpoint-00000030" for e in v["events"])' B /v1/runs/pt-rc/events \
    || fail "pt-rc sealed nothing on beta: $(fed_get B /v1/runs/pt-rc/events) $(tail -5 "$WORK"/pt-rc-*.out)"
# A job's word on its node is checked against Slurm's: the job's own token
# naming a node Slurm did not give it is refused, naming both.
tok=$("$HARNESS/worker_token.py" "$FED/b.worker.key" pt-rc 1 2 "$(id -u "$TEST_USER")" "$j" beta)
code=$(curl -s -o "$WORK/forged.json" -w '%{http_code}' --cacert "$(fed_crt B)" -H "Authorization: Bearer $tok" \
    --data-binary '{"attempt":1,"world_size":2,"node":"alpha1","ranks":[{"rank":0}]}' "https://127.0.0.1:$(fed_port B)/v1/runs/pt-rc/ranks")
[ "$code" = 403 ] && grep -q "node alpha1 is not one of job beta/$j's nodes" "$WORK/forged.json" \
    && ok "a ranks' report naming a node the job does not hold: 403 ($(cut -c1-140 "$WORK/forged.json"))" \
    || fail "a forged node in a ranks' report: HTTP $code $(cat "$WORK/forged.json")"
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
fed_wait 90 'v["state"] == "SUCCEEDED"' A /v1/runs/pt-rc || fail "pt-rc did not finish at A: $(fed_get A /v1/runs/pt-rc/events)"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2
# Back in service before the next test asks for it (its old job still ends there).
for _ in $(seq 300); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done

# The chain, as the brokers list it: beta's part then alpha's.
kinds() { fed_get "$1" /v1/runs/pt-rc/receipts | /usr/bin/python3 -c '
import json, sys
print(" ".join("%d:%s" % (r["seq"], r["kind"]) for r in json.load(sys.stdin)["receipts"]))'; }
kb=$(kinds B); ka=$(kinds A)
echo "  beta:  $kb"; echo "  alpha: $ka"
grep -q "^1:attempt-started .*checkpoint-sealed.*attempt-ended.*attempt-ended$" <<<"$kb" \
    || fail "beta's part is not attempt 1, its seals, the FAULT and the move: $kb"
grep -q "^[0-9]*:attempt-started .*checkpoint-sealed.*attempt-ended [0-9]*:run-ended$" <<<"$ka" \
    || fail "alpha's part is not attempt 2, its seals and the end: $ka"
last_b=$(awk '{print $NF}' <<<"$kb" | cut -d: -f1); first_a=$(awk '{print $1}' <<<"$ka" | cut -d: -f1)
[ "$first_a" = $((last_b + 1)) ] || fail "alpha's chain does not go on from beta's: beta ends at $last_b, alpha starts at $first_a"
ok "one chain across the brokers: beta 1..$last_b, alpha $first_a..$(awk '{print $NF}' <<<"$ka" | cut -d: -f1)"

# Who ran which shard, where, with what: each attempt-started names its two
# ranks' nodes and what the trainer library reported (the torch and Python
# of /usr/bin/python3); each seal, its step and each shard's rank and node.
want_torch=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')
want_py=$(/usr/bin/python3 -c 'import platform; print(platform.python_version())')
for b in B A; do
    out=$(fed_get "$b" /v1/runs/pt-rc/receipts | WANT_TORCH="$want_torch" WANT_PY="$want_py" BROKER_LABEL=$b /usr/bin/python3 -c '
import base64, json, os, sys
bad = []
for r in json.load(sys.stdin)["receipts"]:
    st = json.loads(base64.b64decode(r["envelope"]["payload"]))
    p, body = st["predicate"], st["predicate"]["body"]
    if p["kind"] == "attempt-started":
        ranks, envs = body.get("ranks", {}), body.get("environment", [])
        if sorted(ranks) != ["0", "1"] or len(set(ranks.values())) != 2:
            bad.append("attempt %d: ranks %r" % (p["attempt"], ranks))
        if len(envs) != 1 or envs[0].get("ranks") != [0, 1] or envs[0].get("torch") != os.environ["WANT_TORCH"] \
                or envs[0].get("python") != os.environ["WANT_PY"]:
            bad.append("attempt %d: environment %r" % (p["attempt"], envs))
        if sorted(n["name"] for n in body["nodes"]) != sorted(ranks.values()):
            bad.append("attempt %d: nodes %r are not the ranks %r" % (p["attempt"], body["nodes"], ranks))
        print("attempt %d on %s: ranks %s, %s" % (p["attempt"], body["cluster"], json.dumps(ranks, sort_keys=True),
              ", ".join("%s %s" % (k, envs[0][k]) for k in ("torch", "python") if envs and k in envs[0])))
    if p["kind"] == "checkpoint-sealed":
        if body.get("step") != int(body["checkpoint"].split("-")[1]):
            bad.append("%s: step %r" % (body["checkpoint"], body.get("step")))
        # The files as one Merkle root (2 ranks, a shard each), not a subject each.
        files = body.get("files") or {}
        if files.get("count") != 2 or len(files.get("merkle_root", "")) != 64 or len(st["subject"]) != 1:
            bad.append("%s: files %r, %d subject(s)" % (body["checkpoint"], files, len(st["subject"])))
for b in bad: print("BAD " + b)
')
    sed 's/^/  /' <<<"$out"
    grep -q "^BAD" <<<"$out" && fail "broker $b's receipts miss who ran what where: $(grep '^BAD' <<<"$out" | head -3)"
    grep -q "^attempt " <<<"$out" || fail "broker $b has no attempt-started receipt"
done
ok "attempt-started names each rank's node and the trainer's torch $want_torch / Python $want_py; each seal its step and its 2 files' Merkle root"

final=$(ls -d "$CK"/pt-rc/checkpoint-* | sort | tail -1)
out=$(shard verify pt-rc --key beta-broker="$FED/b.receipts.pub" --key alpha-broker="$FED/a.receipts.pub" --checkpoint-dir "$final" 2>&1) \
    || fail "shard verify pt-rc: $out"
grep -q "^ok: " <<<"$out" && grep -q "^checkpoint .*: 2 shard(s)" <<<"$out" || fail "shard verify pt-rc: $out"
sed 's/^/  /' <<<"$out"
ok "shard verify pt-rc: both brokers' receipts, their log heads, $(basename "$final")'s file list (fetched) against its sealed root and re-hashed on disk"
# Each broker's log as the other witnessed it (every 2 s here): one history.
sleep 3
out=$(shard verify pt-rc --witness --key beta-broker="$FED/b.receipts.pub" --key alpha-broker="$FED/a.receipts.pub" 2>&1) \
    || fail "shard verify --witness pt-rc: $out"
grep -q "^log head: broker alpha-broker witnessed it at size [1-9]" <<<"$out" && grep -q "^log head: broker beta-broker witnessed it at size [1-9]" <<<"$out" \
    || fail "each broker's head is not shown witnessed by the other: $out"
fed_get A /v1/witness | grep -q '"peer":"beta-broker"' || fail "A witnessed nothing of B: $(fed_get A /v1/witness)"
ok "shard verify --witness: $(grep -c 'witnessed it at size' <<<"$out") broker(s) saw the same history of each other's log"

# A shard changed after sealing is caught, naming it.
shard_file=$(ls "$final"/*.pt | head -1)
cp "$shard_file" "$WORK/keep.pt"
printf 'x' | dd of="$shard_file" bs=1 seek=10 conv=notrunc 2>/dev/null
out=$(shard verify pt-rc --key "$FED/b.receipts.pub" --key "$FED/a.receipts.pub" --checkpoint-dir "$final" 2>&1) && fail "a changed shard verified: $out"
grep -q "digest mismatch for shard" <<<"$out" || fail "no digest mismatch line: $out"
cp "$WORK/keep.pt" "$shard_file"
ok "a shard changed on disk after sealing: $(grep -m1 'digest mismatch' <<<"$out")"
# Pinned keys matter: with only alpha's key, beta's receipts are unknown.
out=$(shard verify pt-rc --key "$FED/a.receipts.pub" 2>&1) && fail "verified without beta's key: $out"
grep -q "signed by unknown key" <<<"$out" || fail "beta's receipts not refused without its key: $out"
ok "without beta's key its receipts are refused: $(grep -m1 'unknown key' <<<"$out")"
# Each key speaks for its own broker only: pinned the wrong way round, both are refused.
out=$(shard verify pt-rc --key alpha-broker="$FED/b.receipts.pub" --key beta-broker="$FED/a.receipts.pub" 2>&1) && fail "verified with the keys swapped: $out"
grep -q "pinned to broker alpha-broker, but it names broker beta-broker" <<<"$out" || fail "swapped pins not named: $out"
ok "keys pinned to the wrong brokers: $(grep -m1 'pinned to broker' <<<"$out")"
