#!/bin/bash
# Requeue-on-failure to another local cluster: a 2-node job on beta loses a
# node while beta has no spare; the broker rejects beta (naming why) and
# resubmits the run as attempt 2 on alpha. Prints fault -> RECOVERED seconds.
. "$(dirname "$0")/lib.sh"
start_broker 600
for c in alpha beta; do plugstack $c "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"; done
cat > "$WORK/train.sh" <<'SH'
#!/bin/bash
echo "attempt=$SHARDNET_ATTEMPT cluster=$SLURM_CLUSTER_NAME node=$SLURMD_NODENAME rank=$SHARDNET_RANK/$SHARDNET_WORLD_SIZE"
for s in $(seq 1 240); do echo $s > "$SHARDNET_PROGRESS"; sleep 0.5; done
SH
chmod 755 "$WORK/train.sh"
j=$(as_user beta sbatch --parsable -N2 -n2 -o "$WORK/x-%j.out" --shardnet=rq-far --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
wait_for 20 'len([w for w in v["workers"] if w["node"].endswith("/0")]) == 2' /v1/runs/rq-far || fail "rq-far never ran on 2 nodes"
t0=$(date +%s.%N)
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
wait_for 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' /v1/runs/rq-far/events \
    || fail "no RECOVERED: $(broker_get /v1/runs/rq-far/events)"
dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
broker_get /v1/runs/rq-far/events | /usr/bin/python3 -c '
import json, sys, time
for e in json.load(sys.stdin)["events"]:
    print("  ", time.strftime("%H:%M:%S", time.localtime(e["time"])), "%-10s" % e["kind"], e["cause"])'
placement=$(broker_get /v1/runs/rq-far/events | /usr/bin/python3 -c '
import json, sys
p = [e for e in json.load(sys.stdin)["events"] if e["kind"] == "PLACEMENT"][0]
print(p["evidence"]["target"], p["evidence"]["new_job"], " | ".join(r["cluster"] + ": " + r["reason"] for r in p["evidence"]["rejected"]))')
read -r target new reasons <<<"$placement"
[ "$target" = alpha ] || fail "placed on '$target', expected alpha: $placement"
grep -Eq "beta: [01] of [01] idle node\(s\) fit, 2 needed" <<<"$reasons" || fail "beta's rejection not named: $reasons"
for _ in $(seq 50); do [ "$(grep -c 'attempt=2 cluster=alpha' "$WORK/x-$j.out" 2>/dev/null)" = 2 ] && break; sleep 0.2; done
[ "$(grep -c 'attempt=2 cluster=alpha' "$WORK/x-$j.out")" = 2 ] || fail "attempt 2 did not run 2 ranks on alpha: $(cat "$WORK/x-$j.out")"
broker_get /v1/runs/rq-far/events | grep -q '"kind":"FAILED"' && fail "cancelling the old attempt was reported as the run failing"
ok "beta2 killed with no spare on beta: attempt 2 runs on alpha as job $new (beta rejected: $reasons); fault -> RECOVERED ${dt}s"
slurm alpha scancel "$new"
slurm beta scancel "$j"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2
for _ in $(seq 150); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done
