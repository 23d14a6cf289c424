#!/bin/bash
# The real plugin against the real broker: a --shardnet job's heartbeats
# show in its run; a node killed with kill -9 (slurmd and its job processes)
# raises FAULT within the deadline; a trainer that stops advancing raises
# FAULT (hang); a healthy job survives a 30 s broker restart without FAULT.
. "$(dirname "$0")/lib.sh"
start_broker 5
plugstack beta "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"
cat > "$WORK/train.sh" <<'SH'
#!/bin/bash
# Advances one step every 0.5 s for $1 seconds; "hang" stops advancing after 2 s.
end=$(( $(date +%s) + $1 )); s=0
while [ "$(date +%s)" -lt "$end" ]; do
    if [ "${2:-}" != hang ] || [ $s -lt 4 ]; then s=$((s + 1)); echo $s > "$SHARDNET_PROGRESS"; fi
    sleep 0.5
done
SH
chmod 755 "$WORK/train.sh"

# (a) heartbeats show in the run, from both nodes, with steps.
j=$(as_user beta sbatch --parsable -N2 -n2 -o "$WORK/a.out" --shardnet=bk-healthy --shardnet-heartbeat=1 \
    --wrap "srun $WORK/train.sh 6")
wait_for 20 'len([w for w in v["workers"] if w["node"].endswith("/0") and (w["step"] or 0) >= 3]) == 2' /v1/runs/bk-healthy \
    || fail "run bk-healthy lacks 2 advancing workers: $(broker_get /v1/runs/bk-healthy)"
ok "heartbeats of both nodes show in the run: $(broker_get /v1/runs/bk-healthy | /usr/bin/python3 -c 'import json,sys; print(sorted((w["node"], w["step"]) for w in json.load(sys.stdin)["workers"]))')"
wait_job beta "$j" 30
sleep 4
broker_get /v1/runs/bk-healthy/events | grep -q '"FAULT"' && fail "a job that ended normally raised FAULT"
ok "normal end: no FAULT"

# (b) kill -9 one node of a running job.
j=$(as_user beta sbatch --parsable -N2 -n2 -o "$WORK/b.out" --shardnet=bk-kill --shardnet-requeue=off --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh 60")
wait_for 20 'len([w for w in v["workers"] if w["node"].endswith("/0")]) == 2' /v1/runs/bk-kill || fail "bk-kill never ran on 2 nodes"
victim=beta2
t0=$(date +%s.%N)
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta $victim
wait_for 15 'any(e["kind"] == "FAULT" and "'$victim'" in e["cause"] for e in v["events"])' /v1/runs/bk-kill/events \
    || fail "no FAULT for $victim: $(broker_get /v1/runs/bk-kill/events)"
dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
ok "kill -9 of $victim: FAULT after ${dt}s (deadline 3 x 1 s): $(broker_get /v1/runs/bk-kill/events | grep -o '"cause":"worker [^"]*"' | head -1)"
broker_get /v1/runs/bk-kill/events | grep -q '"confirmed":true,[^}]*"slurmd_answers":false' \
    || fail "the FAULT was not confirmed with Slurm: $(broker_get /v1/runs/bk-kill/events)"
ok "FAULT confirmed with Slurm (slurmd of $victim unreachable)"
[ "$(broker_get /v1/runs/bk-kill | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = DEGRADED ] \
    || fail "run not DEGRADED"
slurm beta scancel "$j"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta $victim
for _ in $(seq 150); do slurm beta sinfo -h -n $victim -o %T | grep -qx idle && break; sleep 0.2; done

# (c) a trainer that stops advancing: FAULT (hang) after stall_seconds=5.
j=$(as_user beta sbatch --parsable -N1 -o "$WORK/c.out" --shardnet=bk-hang --shardnet-requeue=off --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh 30 hang")
wait_for 25 'any(e["kind"] == "FAULT" and "progress stalled" in e["cause"] for e in v["events"])' /v1/runs/bk-hang/events \
    || fail "no hang FAULT: $(broker_get /v1/runs/bk-hang/events)"
ok "hang: $(broker_get /v1/runs/bk-hang/events | grep -o '"cause":"worker [^"]*stalled"' | head -1)"
slurm beta scancel "$j"

# (e) an agent that goes silent while its node is healthy (a network hiccup
# as the broker sees it): no FAULT at the first deadline, FAULT only when the
# silence lasts a second one.
j=$(as_user beta sbatch --parsable -N1 -o "$WORK/e.out" --shardnet=bk-quiet --shardnet-requeue=off --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh 40")
wait_for 20 'any(w["node"].endswith("/0") for w in v["workers"])' /v1/runs/bk-quiet || fail "bk-quiet never ran"
pkill -STOP -u "$TEST_USER" -f shardnet-agent
sleep 5  # past the first deadline (3 s) plus Slurm's answer
broker_get /v1/runs/bk-quiet/events | grep -q '"FAULT"' && fail "FAULT at the first deadline though slurmd answers"
ok "silent agent, healthy node: suspected, no FAULT at the first deadline"
wait_for 10 'any(e["kind"] == "FAULT" and "although slurmd" in e["cause"] for e in v["events"])' /v1/runs/bk-quiet/events \
    || fail "no FAULT after two deadlines: $(broker_get /v1/runs/bk-quiet/events)"
ok "still silent a deadline later: $(broker_get /v1/runs/bk-quiet/events | grep -o '"cause":"worker [^"]*"' | head -1)"
pkill -CONT -u "$TEST_USER" -f shardnet-agent
slurm beta scancel "$j"

# (d) a healthy job while the broker is down for 30 s: no FAULT.
j=$(as_user beta sbatch --parsable -N2 -n2 -o "$WORK/d.out" --shardnet=bk-restart --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh 45")
wait_for 20 'len([w for w in v["workers"] if w["node"].endswith("/0")]) == 2' /v1/runs/bk-restart || fail "bk-restart never ran"
kill -TERM $BROKER_PID; wait $BROKER_PID 2>/dev/null
sleep 30
start_broker 5
wait_for 10 'len([w for w in v["workers"] if w["node"].endswith("/0")]) == 2' /v1/runs/bk-restart \
    || fail "heartbeats did not come back after the broker restart"
wait_job beta "$j" 60
[ "$(job_state beta "$j")" = COMPLETED ] || fail "job ended $(job_state beta "$j") across the broker restart"
sleep 4
broker_get /v1/runs/bk-restart/events | grep -q '"FAULT"' && fail "FAULT raised across a broker restart: $(broker_get /v1/runs/bk-restart/events)"
ok "30 s broker restart mid-job: job COMPLETED, heartbeats resumed, no FAULT"
