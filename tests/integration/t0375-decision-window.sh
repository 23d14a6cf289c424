#!/bin/bash
# The crash window of a local requeue (issue 15): the broker has written its
# decision and is running sbatch when it is killed (kill -9). Two landings,
# made certain by an sbatch that marks when it runs (bind-mounted over
# /usr/bin/sbatch in the broker's own mount namespace only):
#   before: killed before sbatch submitted anything (the sbatch dies too);
#   after:  sbatch submitted the job, the broker died before it recorded it.
# The broker restarted on the same database takes the decision up: "before"
# submits attempt 2 once; "after" finds the job sbatch made by the nonce in
# its comment and submits nothing. Either way one attempt-2 job, RECOVERED.
. "$(dirname "$0")/lib.sh"
start_broker 600
# Attempt 2 goes where placement puts it: beta's other node when it is idle,
# else alpha (the victim of the first landing may not be back yet).
for c in alpha beta; do plugstack $c "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"; done
# Attempt-2 jobs (a decision's nonce in their comment) on either cluster: "CLUSTER JOBID".
decision_jobs() {
    local c
    for c in alpha beta; do
        slurm $c squeue -h -u "$TEST_USER" -o '%i %k' | grep "shardnet-decision:" | sed "s/^/$c /" || true
    done
}
cat > "$WORK/train.sh" <<'SH'
#!/bin/bash
for s in $(seq 1 600); do echo $s > "$SHARDNET_PROGRESS"; sleep 0.5; done
SH
chmod 755 "$WORK/train.sh"

# sbatch as the wrapped broker sees it.
touch "$WORK/real-sbatch"
cat > "$WORK/sbatch-wrapper" <<SH
#!/bin/sh
echo \$\$ > "$WORK/sbatch.pid"
case "\$(cat "$WORK/sbatch.mode")" in
before) touch "$WORK/sbatch.called"; sleep 60; exec "$WORK/real-sbatch" "\$@" ;;
after) "$WORK/real-sbatch" "\$@"; rc=\$?; touch "$WORK/sbatch.done"; sleep 10; exit \$rc ;;
*) exec "$WORK/real-sbatch" "\$@" ;;
esac
SH
chmod 755 "$WORK/sbatch-wrapper"
stop_broker() { kill -9 "$BROKER_PID" 2>/dev/null; wait "$BROKER_PID" 2>/dev/null || true; }
broker_up() {
    for _ in $(seq 100); do curl -s "$BROKER_URL/v1/health" >/dev/null && return 0; sleep 0.05; done
    fail "broker did not start: $(tail -5 "$WORK/broker.log")"
}
wrapped_broker() {
    unshare --mount --propagation private bash -c '
        mount --bind /usr/bin/sbatch "$1/real-sbatch" && mount --bind "$1/sbatch-wrapper" /usr/bin/sbatch || exit 1
        exec "$2" --config "$1/broker.json"' _ "$WORK" "$BUILD/broker/shardnet-broker" 2>> "$WORK/broker.log" &
    BROKER_PID=$!; RX_PIDS+=($BROKER_PID); broker_up
}
plain_broker() {
    "$BUILD/broker/shardnet-broker" --config "$WORK/broker.json" 2>> "$WORK/broker.log" &
    BROKER_PID=$!; RX_PIDS+=($BROKER_PID); broker_up
}
stop_broker
command -v unshare >/dev/null || fail "unshare (util-linux) is needed"

for landing in before after; do
    run=dw-$landing
    rm -f "$WORK/sbatch.called" "$WORK/sbatch.done" "$WORK/sbatch.pid"
    echo "$landing" > "$WORK/sbatch.mode"
    wrapped_broker
    j=$(as_user beta sbatch --parsable -N1 -o "$WORK/$run-%j.out" --shardnet=$run --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
    wait_for 30 'any(w["node"].endswith("/0") for w in v["workers"])' /v1/runs/$run || fail "$run never ran"
    victim=$(slurm beta squeue -h -j "$j" -o %N)
    "$HARNESS/clusters.sh" kill-node "$SCRATCH" beta "$victim"
    mark=$WORK/sbatch.called; [ $landing = after ] && mark=$WORK/sbatch.done
    for _ in $(seq 600); do [ -e "$mark" ] && break; sleep 0.1; done
    [ -e "$mark" ] || fail "$landing: the broker never ran sbatch: $(broker_get /v1/runs/$run/events)"
    stop_broker
    if [ $landing = before ]; then   # its sbatch goes with it, before submitting
        p=$(cat "$WORK/sbatch.pid"); pkill -9 -P "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null || true
    fi
    /usr/bin/python3 - "$WORK/broker.db" "$run" <<'PY' || fail "$landing: no written decision in the database"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT state FROM decisions WHERE run = ?", (sys.argv[2],)).fetchall()
assert rows and all(r[0] == "written" for r in rows), rows
PY
    submitted_before=$(decision_jobs | grep -c . || true)
    plain_broker
    wait_for 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' /v1/runs/$run/events \
        || fail "$landing: no RECOVERED after the restart: $(broker_get /v1/runs/$run/events)"
    jobs=$(decision_jobs)
    [ "$(grep -c . <<<"$jobs")" = 1 ] || fail "$landing: attempt-2 jobs in the queue: '$jobs'"
    read -r new_cluster new _ <<<"$jobs"
    events=$(broker_get /v1/runs/$run/events)
    if [ $landing = after ]; then
        [ "$submitted_before" = 1 ] || fail "after: sbatch's job was not in the queue before the restart ($submitted_before)"
        grep -q "submitted before the broker stopped" <<<"$events" || fail "after: the job was not taken as submitted: $events"
        how="found job $new on $new_cluster by its nonce, submitted nothing"
    else
        [ "$submitted_before" = 0 ] || fail "before: a job was submitted before the restart ($submitted_before)"
        how="submitted job $new on $new_cluster once"
    fi
    [ "$(broker_get /v1/runs/$run | /usr/bin/python3 -c 'import json,sys; v=json.load(sys.stdin); print(v["state"], v["attempt"])')" = "RUNNING 2" ] \
        || fail "$landing: run state: $(broker_get /v1/runs/$run)"
    ok "killed $landing sbatch in the decision window: the restarted broker $how; RECOVERED at attempt 2"
    slurm $new_cluster scancel "$new" 2>/dev/null || true
    slurm beta scancel "$j" 2>/dev/null || true
    stop_broker
    "$HARNESS/clusters.sh" start-node "$SCRATCH" beta "$victim"
    for _ in $(seq 150); do slurm beta sinfo -h -n "$victim" -o %T | grep -qx idle && break; sleep 0.2; done
    wait_job $new_cluster "$new" 30
done
