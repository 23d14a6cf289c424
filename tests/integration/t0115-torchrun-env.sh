#!/bin/bash
# torchrun's env:// contract in every task of a --shardnet step: a script
# that knows nothing of ShardNet (init_process_group with the env://
# defaults, gloo) runs as one srun task per rank, 2 nodes x 1, 2 x 2 and
# an uneven 2+1; every rank's RANK, LOCAL_RANK, WORLD_SIZE,
# LOCAL_WORLD_SIZE, GROUP_RANK match Slurm's, MASTER_ADDR is the first
# node's NodeAddr, and an all_reduce over the group is right. Two steps at
# once on the same nodes get different MASTER_PORTs and both finish.
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || fail "python3-torch is not installed (scripts/install-deps.sh installs it)"
cat > "$WORK/envrun.py" <<'PY'
import os, sys, datetime
import torch, torch.distributed as dist
e = os.environ
# Only torchrun's contract: no ShardNet variable is read.
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
t = torch.tensor([float(dist.get_rank())])
dist.all_reduce(t)
w = dist.get_world_size()
print("rank=%s local_rank=%s world=%s local_world=%s group_rank=%s group_world=%s role_rank=%s addr=%s port=%s run=%s restarts=%s "
      "procid=%s localid=%s ntasks=%s nodeid=%s node=%s sum=%d want=%d"
      % (e["RANK"], e["LOCAL_RANK"], e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["GROUP_RANK"], e["GROUP_WORLD_SIZE"],
         e["ROLE_RANK"], e["MASTER_ADDR"], e["MASTER_PORT"], e["TORCHELASTIC_RUN_ID"], e["TORCHELASTIC_RESTART_COUNT"],
         e["SLURM_PROCID"], e["SLURM_LOCALID"], e["SLURM_STEP_NUM_TASKS"], e["SLURM_NODEID"], e["SLURMD_NODENAME"],
         int(t.item()), w * (w - 1) // 2), flush=True)
dist.destroy_process_group()
PY
check() {  # FILE TASKS RUN
    /usr/bin/python3 - "$@" "$(slurm alpha scontrol -o show node alpha1 | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)" <<'PY'
import sys
f, n, run, addr = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = [dict(kv.split("=", 1) for kv in l.split()) for l in open(f) if l.startswith("rank=")]
assert len(rows) == n, "%d ranks reported, %d expected: %s" % (len(rows), n, open(f).read())
per_node = {}
for r in rows: per_node.setdefault(r["node"], []).append(r)
for r in rows:
    assert r["rank"] == r["procid"] == r["role_rank"], r
    assert r["local_rank"] == r["localid"], r
    assert r["world"] == str(n) == r["ntasks"], r
    assert r["local_world"] == str(len(per_node[r["node"]])), r
    assert r["group_rank"] == r["nodeid"] and r["group_world"] == str(len(per_node)), r
    assert r["addr"] == addr, "MASTER_ADDR %s, NodeAddr of the first node %s" % (r["addr"], addr)
    assert r["run"] == run and r["restarts"] == "0", r
    assert r["sum"] == r["want"], r
assert len({r["port"] for r in rows}) == 1, "ranks disagree on MASTER_PORT"
print("   %d ranks on %s: env:// rendezvous at %s:%s, all_reduce ok" % (n, sorted(per_node), addr, rows[0]["port"]))
PY
}
for layout in "-N2 -n2" "-N2 -n4" "-N2 -n3"; do
    as_user alpha srun $layout --shardnet=tr-env /usr/bin/python3 "$WORK/envrun.py" > "$WORK/tr.out" 2>&1 \
        || fail "srun $layout failed: $(tail -20 "$WORK/tr.out")"
    check "$WORK/tr.out" "${layout##*-n}" tr-env || fail "srun $layout: $(cat "$WORK/tr.out")"
done
ok "2 nodes x 1, 2 x 2 and 2+1 tasks: torchrun's variables right in every rank, env:// rendezvous works"

# Inside a batch script: each srun step's own values, not the batch step's;
# two steps at once on the same nodes, each with its own MASTER_PORT.
cat > "$WORK/two.sh" <<SH2
#!/bin/bash
srun --exact -N2 -n2 /usr/bin/python3 $WORK/envrun.py > $WORK/two-a.out 2>&1 &
srun --exact -N2 -n2 /usr/bin/python3 $WORK/envrun.py > $WORK/two-b.out 2>&1 &
wait
SH2
chmod 755 "$WORK/two.sh"
j=$(as_user alpha sbatch --parsable -N2 -n4 -o "$WORK/two.log" --shardnet=tr-two "$WORK/two.sh")
wait_job alpha "$j" 120
for s in a b; do check "$WORK/two-$s.out" 2 tr-two || fail "step $s of the batch job: $(cat "$WORK/two-$s.out" "$WORK/two.log")"; done
pa=$(grep -o 'port=[0-9]*' "$WORK/two-a.out" | head -1); pb=$(grep -o 'port=[0-9]*' "$WORK/two-b.out" | head -1)
[ -n "$pa" ] && [ "$pa" != "$pb" ] || fail "two steps at once share MASTER_PORT ($pa, $pb)"
ok "two srun steps at once in a --shardnet batch job: their own values, MASTER_PORT ${pa#port=} and ${pb#port=}, both finished"
