#!/bin/bash
# An unmodified env:// script (issue 17) through a local requeue: a
# --shardnet batch job runs it as one srun task per rank (1 node x 2); its
# node is killed; attempt 2 on the other node gets torchrun's variables
# afresh (TORCHELASTIC_RESTART_COUNT=1, MASTER_ADDR its own first node),
# the rendezvous and all_reduce work again, the script resumes from its own
# snapshot, and the run ends SUCCEEDED. (With no spare node, to the other
# cluster: t0117.)
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || fail "python3-torch is not installed (scripts/install-deps.sh installs it)"
start_broker 600
plugstack beta "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"
cat > "$WORK/envloop.py" <<'PY'
# Written against torchrun's env:// contract only: no ShardNet import. Its
# own snapshot in its working directory; resumes from it when present.
import os, time, datetime
import torch, torch.distributed as dist
e = os.environ
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))   # env:// defaults only
w, rank = dist.get_world_size(), dist.get_rank()
snap = os.path.join(os.getcwd(), "snapshot-%s.pt" % e["TORCHELASTIC_RUN_ID"])
first = torch.load(snap)["step"] + 1 if os.path.exists(snap) else 0
log = os.path.join(os.getcwd(), "ranks-%s.log" % e["TORCHELASTIC_RUN_ID"])   # every attempt's lines (its --output is rewritten)
def say(line):
    print(line, flush=True)
    with open(log, "a") as f:
        f.write(line + "\n")
say("start rank=%s world=%s restarts=%s addr=%s port=%s run=%s node=%s from=%d"
    % (e["RANK"], e["WORLD_SIZE"], e["TORCHELASTIC_RESTART_COUNT"], e["MASTER_ADDR"], e["MASTER_PORT"],
       e["TORCHELASTIC_RUN_ID"], e["SLURMD_NODENAME"], first))
for i in range(first, int(e.get("LOOPS", "40"))):
    t = torch.tensor([1.0])
    dist.all_reduce(t)
    assert int(t.item()) == w
    if rank == 0 and i % 5 == 4:
        torch.save({"step": i}, snap + ".tmp")
        os.replace(snap + ".tmp", snap)
    time.sleep(0.5)
say("done rank=%s restarts=%s" % (e["RANK"], e["TORCHELASTIC_RESTART_COUNT"]))
dist.destroy_process_group()
PY
printf '#!/bin/bash\nsrun -n2 /usr/bin/python3 %s/envloop.py\n' "$WORK" > "$WORK/batch.sh"
chmod 755 "$WORK/batch.sh"
j=$(as_user beta sbatch --parsable -N1 -n2 -o "$WORK/trq-%j.out" --shardnet=trq --shardnet-heartbeat=1 "$WORK/batch.sh")
wait_for 40 'any(w["node"].endswith("/0") for w in v["workers"])' /v1/runs/trq || fail "trq never ran: $(cat "$WORK"/trq-*.out 2>/dev/null)"
# Killed once the script has a snapshot to resume from.
for _ in $(seq 100); do [ -s "$WORK/snapshot-trq.pt" ] && break; sleep 0.2; done
[ -s "$WORK/snapshot-trq.pt" ] || fail "the script wrote no snapshot: $(cat "$WORK/trq-$j.out")"
victim=$(slurm beta squeue -h -j "$j" -o %N)
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta "$victim"
wait_for 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' /v1/runs/trq/events \
    || fail "no RECOVERED: $(broker_get /v1/runs/trq/events)"
wait_for 90 'v["state"] == "SUCCEEDED"' /v1/runs/trq || fail "the run did not succeed: $(broker_get /v1/runs/trq) $(cat "$WORK/trq-$j.out")"
/usr/bin/python3 - "$WORK/ranks-trq.log" "$victim" "$SCRATCH/beta/slurm.conf" <<'PY' || fail "attempts' variables: $(cat "$WORK/ranks-trq.log")"
import subprocess, sys
out, victim, conf = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [dict(kv.split("=", 1) for kv in l.split()[1:]) | {"what": l.split()[0]} for l in open(out) if l.startswith(("start ", "done "))]
first = [r for r in rows if r["what"] == "start" and r["restarts"] == "0"]
second = [r for r in rows if r["what"] == "start" and r["restarts"] == "1"]
done = [r for r in rows if r["what"] == "done"]
assert len(first) == 2 and all(r["node"] == victim for r in first), first
assert len(second) == 2 and len({r["node"] for r in second}) == 1 and second[0]["node"] != victim, second
node = second[0]["node"]
addr = subprocess.run(["scontrol", "-o", "show", "node", node], env={"SLURM_CONF": conf, "PATH": "/usr/bin:/bin"},
                      capture_output=True, text=True).stdout.split("NodeAddr=")[1].split()[0]
assert all(r["addr"] == addr and r["run"] == "trq" and r["world"] == "2" for r in second), (second, addr)
assert sorted(r["rank"] for r in second) == ["0", "1"], second
assert len(done) == 2 and all(r["restarts"] == "1" for r in done), done
assert all(r["from"] == "0" for r in first) and all(int(r["from"]) > 0 for r in second), (first, second)
print("   attempt 1 on %s, attempt 2 on %s (MASTER_ADDR %s, port %s) resumed at step %s: RESTART_COUNT 0 then 1"
      % (victim, node, addr, second[0]["port"], second[0]["from"]))
PY
ok "an unmodified env:// script survives a node kill: attempt 2 rendezvous afresh, resumes from its snapshot, RESTART_COUNT=1, SUCCEEDED"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta "$victim"
for _ in $(seq 150); do slurm beta sinfo -h -n "$victim" -o %T | grep -qx idle && break; sleep 0.2; done
