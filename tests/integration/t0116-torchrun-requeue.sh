#!/bin/bash
# An unmodified env:// script (issue 17) through a local requeue: a
# --shardnet batch job runs it as one srun task per rank; its node is
# killed; attempt 2 on the other node gets torchrun's variables afresh
# (TORCHELASTIC_RESTART_COUNT=1, MASTER_ADDR its own first node), the
# rendezvous and all_reduce work again, and the run ends SUCCEEDED.
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || fail "python3-torch is not installed (scripts/install-deps.sh installs it)"
start_broker 600
plugstack beta "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"
cat > "$WORK/envloop.py" <<'PY'
import os, time, datetime
import torch, torch.distributed as dist
e = os.environ
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))   # env:// defaults only
w = dist.get_world_size()
print("start rank=%s world=%s restarts=%s addr=%s port=%s run=%s node=%s"
      % (e["RANK"], e["WORLD_SIZE"], e["TORCHELASTIC_RESTART_COUNT"], e["MASTER_ADDR"], e["MASTER_PORT"],
         e["TORCHELASTIC_RUN_ID"], e["SLURMD_NODENAME"]), flush=True)
for i in range(int(e.get("LOOPS", "30"))):
    t = torch.tensor([1.0])
    dist.all_reduce(t)
    assert int(t.item()) == w
    time.sleep(0.5)
print("done rank=%s restarts=%s" % (e["RANK"], e["TORCHELASTIC_RESTART_COUNT"]), flush=True)
dist.destroy_process_group()
PY
printf '#!/bin/bash\nsrun -n2 /usr/bin/python3 %s/envloop.py\n' "$WORK" > "$WORK/batch.sh"
chmod 755 "$WORK/batch.sh"
j=$(as_user beta sbatch --parsable -N1 -n2 -o "$WORK/trq-%j.out" --shardnet=trq --shardnet-heartbeat=1 "$WORK/batch.sh")
wait_for 40 'any(w["node"].endswith("/0") for w in v["workers"])' /v1/runs/trq || fail "trq never ran: $(cat "$WORK"/trq-*.out 2>/dev/null)"
for _ in $(seq 50); do [ "$(grep -c '^start ' "$WORK/trq-$j.out" 2>/dev/null)" = 2 ] && break; sleep 0.2; done
victim=$(slurm beta squeue -h -j "$j" -o %N)
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta "$victim"
wait_for 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' /v1/runs/trq/events \
    || fail "no RECOVERED: $(broker_get /v1/runs/trq/events)"
wait_for 90 'v["state"] == "SUCCEEDED"' /v1/runs/trq || fail "the run did not succeed: $(broker_get /v1/runs/trq) $(cat "$WORK/trq-$j.out")"
/usr/bin/python3 - "$WORK/trq-$j.out" "$victim" "$SCRATCH/beta/slurm.conf" <<'PY' || fail "attempts' variables: $(cat "$WORK/trq-$j.out")"
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
print("   attempt 1 on %s, attempt 2 on %s (MASTER_ADDR %s, port %s): RESTART_COUNT 0 then 1" % (victim, node, addr, second[0]["port"]))
PY
ok "an unmodified env:// script survives a node kill: attempt 2 rendezvous afresh, RESTART_COUNT=1, SUCCEEDED"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta "$victim"
for _ in $(seq 150); do slurm beta sinfo -h -n "$victim" -o %T | grep -qx idle && break; sleep 0.2; done
