#!/bin/bash
# One seal truth, the broker's: a 2-rank job on two nodes commits a
# checkpoint every 4 steps; each SEALED marker beside the shards is the
# agent's copy of the broker's list (written by every node's agent once the
# broker lists the checkpoint, content "sealed_by": "broker"), and no
# checkpoint the broker has not sealed has one.
. "$(dirname "$0")/lib.sh"
start_broker 600
plugstack beta "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"
write_trainer "$WORK/train.sh"
CK="$TEST_HOME/seal-ckpt.$$"
j=$(as_user beta sbatch --parsable -N2 -n2 -o "$WORK/seal-%j.out" --shardnet=seal-run --shardnet-heartbeat=1 \
    --shardnet-ckpt-dir="$CK" --wrap "srun $WORK/train.sh")
wait_for 40 'len([e for e in v["events"] if e["kind"] == "SEALED"]) >= 3' /v1/runs/seal-run/events \
    || fail "fewer than 3 checkpoints sealed: $(broker_get /v1/runs/seal-run/events) $(cat "$WORK/seal-$j.out" 2>/dev/null)"
sleep 3   # two more heartbeats: every agent has asked the broker's list
slurm beta scancel "$j"
wait_job beta "$j" 20 || true
broker_get /v1/runs/seal-run/checkpoints > "$WORK/seal-list.json"
/usr/bin/python3 - "$CK" "$WORK/seal-list.json" <<'PY' || fail "SEALED markers disagree with the broker (list: $(cat "$WORK/seal-list.json"))"
import json, os, sys
ck, listed = sys.argv[1], json.load(open(sys.argv[2]))["checkpoints"]
sealed = {c["name"] for c in listed}
dirs = sorted(n for n in os.listdir(ck) if n.startswith("checkpoint-"))
marked = {n for n in dirs if os.path.exists(os.path.join(ck, n, "SEALED"))}
bad = []
for n in marked - sealed: bad.append("%s has a marker the broker never sealed" % n)
# A checkpoint sealed in the last moments before the cancel may not be marked yet.
for n in sorted(sealed)[:-1]:
    if n not in marked: bad.append("%s sealed at the broker, no marker" % n)
for n in marked:
    m = json.load(open(os.path.join(ck, n, "SEALED")))
    if m.get("sealed_by") != "broker" or m.get("checkpoint") != n or m.get("ranks") != 2: bad.append("%s marker says %s" % (n, m))
for b in bad: print("  ", b)
print("   %d checkpoint dirs, %d sealed at the broker, %d marked" % (len(dirs), len(sealed), len(marked)))
sys.exit(1 if bad or len(marked) < 2 else 0)
PY
ok "SEALED markers follow the broker's list (sealed_by broker, ranks 2), none for an unsealed checkpoint"
