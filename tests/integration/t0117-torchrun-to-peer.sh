#!/bin/bash
# An unmodified env:// script (issue 17) with no spare node: a 2 node x 1
# task --shardnet job on beta (broker B) loses a node; B hands the decision
# to broker A, which runs attempt 2 on alpha. Its tasks get torchrun's
# variables for alpha (TORCHELASTIC_RESTART_COUNT=1, MASTER_ADDR alpha's
# first node), the script resumes from its own snapshot, and the run ends
# SUCCEEDED at A (MOVED at B).
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || fail "python3-torch is not installed (scripts/install-deps.sh installs it)"
start_federation
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
printf '#!/bin/bash\nsrun /usr/bin/python3 %s/envloop.py\n' "$WORK" > "$WORK/batch.sh"
chmod 755 "$WORK/batch.sh"
j=$(as_user beta sbatch --parsable -N2 -n2 --ntasks-per-node=1 -o "$WORK/trp-%j.out" --shardnet=trp --shardnet-heartbeat=1 "$WORK/batch.sh")
fed_wait 40 'sum(1 for w in v["workers"] if w["node"].endswith("/0")) == 2' B /v1/runs/trp || fail "trp never ran on beta: $(cat "$WORK"/trp-*.out 2>/dev/null)"
for _ in $(seq 100); do [ -s "$WORK/snapshot-trp.pt" ] && break; sleep 0.2; done
[ -s "$WORK/snapshot-trp.pt" ] || fail "the script wrote no snapshot: $(cat "$WORK/trp-$j.out")"
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
fed_wait 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' A /v1/runs/trp/events \
    || fail "no RECOVERED at A: B: $(fed_get B /v1/runs/trp/events) A: $(fed_get A /v1/runs/trp/events)"
fed_wait 90 'v["state"] == "SUCCEEDED"' A /v1/runs/trp || fail "the run did not succeed at A: $(fed_get A /v1/runs/trp)"
fed_wait 30 'v["state"] == "MOVED"' B /v1/runs/trp || fail "B: $(fed_get B /v1/runs/trp)"
/usr/bin/python3 - "$WORK/ranks-trp.log" "$SCRATCH/alpha/slurm.conf" <<'PY' || fail "attempts' variables: $(cat "$WORK/ranks-trp.log")"
import subprocess, sys
out, conf = sys.argv[1], sys.argv[2]
rows = [dict(kv.split("=", 1) for kv in l.split()[1:]) | {"what": l.split()[0]} for l in open(out) if l.startswith(("start ", "done "))]
first = [r for r in rows if r["what"] == "start" and r["restarts"] == "0"]
second = [r for r in rows if r["what"] == "start" and r["restarts"] == "1"]
done = [r for r in rows if r["what"] == "done"]
assert len(first) == 2 and {r["node"] for r in first} == {"beta1", "beta2"}, first
assert len(second) == 2 and {r["node"] for r in second} == {"alpha1", "alpha2"}, second
rank0 = [r for r in second if r["rank"] == "0"][0]["node"]
addr = subprocess.run(["scontrol", "-o", "show", "node", rank0], env={"SLURM_CONF": conf, "PATH": "/usr/bin:/bin"},
                      capture_output=True, text=True).stdout.split("NodeAddr=")[1].split()[0]
assert all(r["addr"] == addr and r["run"] == "trp" and r["world"] == "2" for r in second), (second, addr)
assert all(int(r["from"]) > 0 for r in second), second
assert len(done) == 2 and all(r["restarts"] == "1" for r in done), done
print("   attempt 1 on beta1+beta2, attempt 2 on alpha1+alpha2 (MASTER_ADDR %s, port %s) resumed at step %s"
      % (addr, second[0]["port"], second[0]["from"]))
PY
ok "an unmodified env:// script with no spare node moves to alpha: RESTART_COUNT=1, resumes from its snapshot, SUCCEEDED at A"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2
for _ in $(seq 150); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done
