#!/bin/bash
# Issue 27 (C): bad-node memory on real Slurm. Run A loses beta2; the broker
# restarts; run B loses beta1 and is placed on alpha although beta2 is idle
# (remembered, left out); run C loses beta2 again: its second fault in the
# window drains it in Slurm with a reason. `shard nodes` lists and clears.
. "$(dirname "$0")/lib.sh"
DETECTOR_EXTRA='"drain_bad_nodes": true, "drain_faults": 2, "quarantine_seconds": 600'
start_broker 600
for c in alpha beta; do plugstack $c "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"; done
cat > "$WORK/loop.sh" <<'SH'
#!/bin/bash
for s in $(seq 1 600); do echo $s > "$SHARDNET_PROGRESS"; sleep 0.5; done
SH
chmod 755 "$WORK/loop.sh"
placed() {  # RUN -> the last PLACEMENT's "target job"
    broker_get "/v1/runs/$1/events" | /usr/bin/python3 -c 'import json,sys
p=[e["evidence"] for e in json.load(sys.stdin)["events"] if e["kind"] == "PLACEMENT" and "new_job" in e["evidence"]]
print(p[-1]["target"], p[-1]["new_job"], ",".join(p[-1]["nodes"]))'
}
lose() {  # RUN NODE: a job of RUN on NODE, NODE killed, until RECOVERED
    local run=$1 node=$2 j
    j=$(as_user beta sbatch --parsable -N1 -w "$node" -o "$WORK/$run-%j.out" --shardnet="$run" --shardnet-heartbeat=1 --wrap "srun $WORK/loop.sh")
    wait_for 30 'any(w["node"].endswith("/0") for w in v["workers"])' "/v1/runs/$run" || fail "$run never ran"
    "$HARNESS/clusters.sh" kill-node "$SCRATCH" beta "$node"
    wait_for 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' "/v1/runs/$run/events" || fail "$run: no RECOVERED: $(broker_get "/v1/runs/$run/events")"
    # Held for other runs once Slurm itself calls the node dead (DOWN after
    # SlurmdTimeout), never on the broker's word alone (issue 43).
    wait_for 60 "any(n['node'] == '$node' and n['held'] and n['last_run'] == '$run' for n in v['nodes'])" /v1/bad-nodes ||
        fail "$node never held: $(broker_get /v1/bad-nodes) $(slurm beta sinfo -h -n "$node" -o %T)"
}
back() {  # NODE: slurmd again, until Slurm has it back (resumed when drained)
    "$HARNESS/clusters.sh" start-node "$SCRATCH" beta "$1"
    for _ in $(seq 150); do slurm beta sinfo -h -n "$1" -o %T | grep -qx idle && return 0; sleep 0.2; done
}
cancel_run() { read -r c j _ <<<"$(placed "$1")"; slurm "$c" scancel "$j"; wait_job "$c" "$j" 30; }

lose ra beta2
read -r c j nodes <<<"$(placed ra)"
[ "$c $nodes" = "beta beta1" ] || fail "ra's attempt 2 went to $c $nodes"
cancel_run ra; back beta2
ok "run A lost beta2: requeued on beta1; beta2 remembered"

kill -TERM "$BROKER_PID"; wait "$BROKER_PID" 2>/dev/null || true
start_broker 600
lose rb beta1
read -r c j nodes <<<"$(placed rb)"
[ "$c" = alpha ] || fail "rb's attempt 2 went to $c $nodes, not alpha: beta2 (idle) was not left out"
slurm beta sinfo -h -n beta2 -o %T | grep -qx idle || fail "beta2 is not idle: the test proves nothing"
cancel_run rb; back beta1
ok "broker restarted; run B lost beta1 and went to alpha while beta2 sat idle: $(broker_get /v1/runs/rb/events | grep -o 'beta rejected[^"]*' | head -1)"

lose rc beta2
for _ in $(seq 50); do slurm beta scontrol show node beta2 | grep -q 'Reason=shardnet' && break; sleep 0.2; done
reason=$(slurm beta scontrol show node beta2 | grep -o 'Reason=.*' | head -1)
grep -q "Reason=shardnet: 2 faults in 86400 s; last: " <<<"$reason" || fail "beta2 not drained by its second fault: $reason"
ok "run C lost beta2 again: drained in Slurm ($reason)"
cancel_run rc

SHARD=("$BUILD/sbatch-wrappers/shard" --broker "$BROKER_URL" --token "$ADMIN_TOKEN")
listed=$("${SHARD[@]}" nodes)
echo "$listed" | sed 's/^/  /'
grep -q "^beta/beta2 *2 *2 *until" <<<"$listed" || fail "shard nodes does not list beta2 with 2 faults, held"
"${SHARD[@]}" nodes clear beta/beta2 | grep -q "2 fault(s) forgotten" || fail "shard nodes clear beta/beta2"
! "${SHARD[@]}" nodes | grep -q "^beta/beta2 " || fail "beta2 still listed after clear"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$AGENT_TOKEN_FILE")" "$BROKER_URL/v1/bad-nodes")
[ "$code" = 403 ] || fail "a worker token read the bad-node memory ($code)"
ok "shard nodes lists beta2 (2 faults, held), clears it; other tokens are refused"
back beta2
slurm beta scontrol update nodename=beta2 state=resume 2>/dev/null || true
for _ in $(seq 150); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done
