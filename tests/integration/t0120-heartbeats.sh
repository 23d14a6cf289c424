#!/bin/bash
# Heartbeats arrive at the configured interval with the step each task
# wrote, from every node, and stop within one interval after the step ends.
# The step's end carries each task's exit status.
. "$(dirname "$0")/lib.sh"
start_receiver ok
echo "secret-token-123" > "$WORK/token"; chmod 600 "$WORK/token"
plugstack alpha broker=http://127.0.0.1:$RX_PORT token_file=$WORK/token heartbeat_min=1
cat > "$WORK/train.sh" <<'SH'
#!/bin/bash
for s in 1 2 3 4 5 6; do echo "$((s * 10 + SHARDNET_RANK))" > "$SHARDNET_PROGRESS"; sleep 0.5; done
[ "$SHARDNET_RANK" = 3 ] && exit 3
exit 0
SH
chmod 755 "$WORK/train.sh"
as_user alpha srun -N2 -n4 --shardnet=hb-run --shardnet-heartbeat=1 "$WORK/train.sh" > "$WORK/out" 2>&1 && fail "rank 3 exits 3, srun should fail"
end=$(date +%s.%N)
sleep 2.5  # more than an interval: nothing may arrive now
hb_bodies > "$WORK/hb.jsonl"
/usr/bin/python3 - "$WORK/hb.jsonl" "$end" <<'PY'
import json, sys
hbs = [json.loads(l) for l in open(sys.argv[1])]
end = float(sys.argv[2])
assert hbs, "no heartbeats received"
assert all(h["_auth"] == "Bearer secret-token-123" for h in hbs), "token missing"
assert all(h["run"] == "hb-run" and h["attempt"] == 1 and h["cluster"] == "alpha" for h in hbs)
nodes = sorted({h["node"] for h in hbs})
assert nodes == ["alpha1", "alpha2"], nodes
for node in nodes:
    mine = sorted((h for h in hbs if h["node"] == node), key=lambda h: h["seq"])
    running = [h for h in mine if h["state"] == "running" and all(r["exit"] is None for r in h["ranks"])]
    assert len(running) >= 2, f"{node}: only {len(running)} running heartbeats"
    gaps = [b["_t"] - a["_t"] for a, b in zip(running, running[1:])]
    assert all(0.7 < g < 1.6 for g in gaps), f"{node}: intervals {gaps}"
    steps = [r["step"] for h in running for r in h["ranks"] if r["step"] is not None]
    assert steps and max(steps) >= 30, f"{node}: steps seen {steps}"
    assert all(s % 10 == r["rank"] for h in running for r in h["ranks"] if (s := r["step"]) is not None), "step/rank mix-up"
    ended = [h for h in mine if h["state"] == "ended"]
    assert len(ended) == 1, f"{node}: {len(ended)} final reports"
    exits = {r["rank"]: r["exit"] for r in ended[0]["ranks"]}
    assert all(e is not None for e in exits.values()), exits
    for rank, e in exits.items():
        assert e["code"] == (3 if rank == 3 else 0), (rank, e)
    last = max(h["_t"] for h in mine)
    assert last <= end + 1.0, f"{node}: heartbeat {last - end:.2f}s after the step ended"
print("heartbeats ok:", len(hbs), "records from", nodes)
PY
ok "heartbeats at 1 s with steps, final exit reports, none after the end"
# Each node's agent reported its ranks once (for the attempt's receipt): a
# trainer that writes progress but no environment report is reported without one.
ranks_bodies > "$WORK/ranks.jsonl"
/usr/bin/python3 - "$WORK/ranks.jsonl" <<'PY' || fail "the agents' ranks' reports: $(cat "$WORK/ranks.jsonl")"
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
assert sorted(r["node"] for r in rs) == ["alpha1", "alpha2"], rs
assert all(r["attempt"] == 1 and r["world_size"] == 4 for r in rs), rs
ranks = sorted(x["rank"] for r in rs for x in r["ranks"])
assert ranks == [0, 1, 2, 3], ranks
assert all(x["environment"] is None for r in rs for x in r["ranks"]), rs
print("ranks' reports ok:", [(r["node"], [x["rank"] for x in r["ranks"]]) for r in rs])
PY
ok "each node's agent reported its ranks once, without an environment (the trainer wrote none)"
