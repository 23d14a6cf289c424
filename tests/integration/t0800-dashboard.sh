#!/bin/bash
# The dashboard (web/, served by the broker) on the real clusters, in
# Debian's chromium (tests/web/harness.mjs): the capacity table lists as
# many nodes of alpha and beta as sinfo; a checkpointing 2-node run on beta
# loses a node with no spare there and is resumed on alpha (as t0320): its
# page shows the beta and alpha lanes, the FAULT, the PLACEMENT with beta's
# rejection, RECOVERED, the lost work shaded and each recovery phase; a new
# event reaches the open page within about 1 s; the job's user sees its run
# and not another user's; no console errors. Screenshots of each page in
# BUILD/test-logs/t0800-dashboard/screens, kept whether it passes or not.
. "$(dirname "$0")/lib.sh"
T=$WORK; . "$(dirname "$0")/../web/lib.sh"
web_deps
start_broker 600
# A user token for the job's user, added by a reload (SIGHUP reads tokens again).
USER_TOKEN=user-$(secret)
/usr/bin/python3 - "$WORK/broker.json" "$TEST_USER" "$(printf %s "$USER_TOKEN" | sha256sum | cut -d' ' -f1)" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["tokens"].append({"name": sys.argv[2], "scope": "user", "sha256": sys.argv[3]})
json.dump(c, open(sys.argv[1], "w"))
PY
kill -HUP "$BROKER_PID"
for _ in $(seq 50); do curl -sf -H "Authorization: Bearer $USER_TOKEN" "$BROKER_URL/v1/views/runs" >/dev/null && break; sleep 0.1; done
curl -sf -H "Authorization: Bearer $USER_TOKEN" "$BROKER_URL/v1/views/runs" >/dev/null || fail "the user token was not taken on SIGHUP: $(tail -3 "$WORK/broker.log")"
for c in alpha beta; do plugstack $c "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"; done
# Another user's run, which the test user must not see.
curl -sf -o /dev/null -H "Authorization: Bearer $ADMIN_TOKEN" --data-binary "{\"id\":\"dash-other\",\"owner\":\"$OTHER_USER\"}" "$BROKER_URL/v1/runs" \
    || fail "could not create $OTHER_USER's run"
write_trainer "$WORK/train.sh"
j=$(as_user beta sbatch --parsable -N2 -n2 -o "$WORK/dash-%j.out" --shardnet=dash-run --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
wait_for 30 'len([w for w in v["workers"] if w["node"].endswith("/0")]) == 2' /v1/runs/dash-run || fail "dash-run never ran on 2 nodes"
wait_for 30 'len(v["checkpoints"]) >= 1' /v1/runs/dash-run/checkpoints || fail "dash-run sealed no checkpoint: $(broker_get /v1/runs/dash-run/events)"
sleep 2   # steps after the seal: the work the fault loses
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
wait_for 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' /v1/runs/dash-run/events \
    || fail "no RECOVERED: $(broker_get /v1/runs/dash-run/events)"
# sinfo's nodes, for the capacity table (beta2 is down, still a node).
counts=$(for c in alpha beta; do printf '"%s": [%s],' "$c" "$(slurm $c sinfo -h -N -o %N | sort -u | sed 's/.*/"&"/' | paste -sd,)"; done)
SCREENS=$BUILD/test-logs/t0800-dashboard/screens
mkdir -p "$SCREENS"
nice -n 15 node "$WEB_TESTS/harness.mjs" "$BROKER_URL" "$SCREENS" "$ADMIN_TOKEN" "$USER_TOKEN" dash-run dash-other "{${counts%,}}" \
    || fail "the dashboard in chromium (screenshots in $SCREENS)"
ls "$SCREENS"/*.png >/dev/null 2>&1 || fail "no screenshot was kept in $SCREENS"
ok "dashboard: capacity as sinfo ({${counts%,}}), dash-run's beta and alpha lanes, FAULT, PLACEMENT with reasons, RECOVERED, lost work, live events, user isolation"
new=$(broker_get /v1/runs/dash-run/events | /usr/bin/python3 -c 'import json,sys; print([e for e in json.load(sys.stdin)["events"] if e["kind"] == "PLACEMENT"][0]["evidence"].get("new_job", ""))')
[ -n "$new" ] && slurm alpha scancel "$new"
slurm beta scancel "$j"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2
for _ in $(seq 150); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done
