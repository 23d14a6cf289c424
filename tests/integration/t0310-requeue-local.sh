#!/bin/bash
# Requeue-on-failure, first tier: a job's node is killed (kill -9 of its
# slurmd and job processes); the broker confirms the failure with Slurm,
# writes a decision, cancels the old job and resubmits the run as attempt 2
# on the same cluster without the dead node. RECOVERED when the new attempt
# heartbeats. Prints fault -> RECOVERED seconds.
. "$(dirname "$0")/lib.sh"
start_broker 600
plugstack beta "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"
cat > "$WORK/train.sh" <<'SH'
#!/bin/bash
echo "attempt=$SHARDNET_ATTEMPT resume='$SHARDNET_RESUME_FROM' node=$SLURMD_NODENAME job=$SLURM_JOB_ID"
for s in $(seq 1 240); do echo $s > "$SHARDNET_PROGRESS"; sleep 0.5; done
SH
chmod 755 "$WORK/train.sh"
j=$(as_user beta sbatch --parsable -N1 -o "$WORK/rq-%j.out" --shardnet=rq-run --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
wait_for 20 'any(w["node"].endswith("/0") for w in v["workers"])' /v1/runs/rq-run || fail "rq-run never ran"
victim=$(slurm beta squeue -h -j "$j" -o %N)
sleep 3   # steps that no seal keeps: the goodput's redone work (below)
t0=$(date +%s.%N)
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta "$victim"
wait_for 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' /v1/runs/rq-run/events \
    || fail "no RECOVERED: $(broker_get /v1/runs/rq-run/events)"
dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
broker_get /v1/runs/rq-run/events | /usr/bin/python3 -c '
import json, sys, time
for e in json.load(sys.stdin)["events"]:
    print("  ", time.strftime("%H:%M:%S", time.localtime(e["time"])), "%-10s" % e["kind"], e["cause"])'
new=$(broker_get /v1/runs/rq-run/events | /usr/bin/python3 -c 'import json,sys; print([e["evidence"]["new_job"] for e in json.load(sys.stdin)["events"] if e["kind"] == "PLACEMENT"][0])')
[ -n "$new" ] && [ "$new" != "$j" ] || fail "no new job"
on=$(slurm beta squeue -h -j "$new" -o %N)
[ -n "$on" ] && [ "$on" != "$victim" ] || fail "attempt 2 (job $new) is on '$on', the dead node was $victim"
# Attempt 2 writes where the job wrote (its --output, as Slurm resolved it).
for _ in $(seq 25); do grep -q "attempt=2" "$WORK/rq-$j.out" 2>/dev/null && break; sleep 0.2; done
grep -q "attempt=2 resume=" "$WORK/rq-$j.out" || fail "attempt 2 did not see SHARDNET_ATTEMPT=2: $(cat "$WORK/rq-$j.out" 2>/dev/null)"
[ "$(broker_get /v1/runs/rq-run | /usr/bin/python3 -c 'import json,sys; v=json.load(sys.stdin); print(v["state"], v["attempt"])')" = "RUNNING 2" ] \
    || fail "run state: $(broker_get /v1/runs/rq-run)"
# Goodput (doc/goodput.md): the parts add up to the wall time, and the one
# fault is the victim's, its detection and queue wait the events' own gaps.
gp=$(broker_get /v1/runs/rq-run | /usr/bin/python3 -c '
import json, sys
g = json.load(sys.stdin)["goodput"]
print(json.dumps(g))' 2>&1)
broker_get /v1/runs/rq-run/events > "$WORK/rq-events.json"
echo "$gp" | /usr/bin/python3 -c '
import json, sys
g = json.loads(sys.stdin.read())
ev = json.load(open(sys.argv[1]))["events"]
victim = sys.argv[2]
lost = g["lost"]
parts = sum(lost[k] for k in ("startup", "redone", "detection", "placement", "queue_wait", "restart", "not_kept", "unattributed"))
assert abs(parts - lost["total"]) < 1e-6, ("lost parts", parts, lost)
assert abs(g["productive"] + g["unsealed"] + lost["total"] - g["wall"]) < 1, ("does not add up", g)
assert g["wall"] > 5 and g["end"] is None, g
assert len(g["faults"]) == 1, g["faults"]
f = g["faults"][0]
assert f["attempt"] == 1 and f["next_attempt"] == 2 and f["node"].split("/")[0] == victim, f
faults = [e for e in ev if e["kind"] == "FAULT" and e["evidence"]["attempt"] == 1]
fault = faults[0]
last_heard = max(e["evidence"]["last_seen"] for e in faults)   # its batch agent or its rank, whichever was heard last
rec = [e for e in ev if e["kind"] == "RECOVERING"][0]
att = [e for e in ev if e["kind"] == "ATTEMPT" and e["evidence"].get("attempt") == 2][0]
assert f["cause"] == fault["cause"], (f, fault)
assert abs(f["failed_at"] - last_heard) < 1e-3 and abs(f["lost"]["detection"] - (fault["time"] - last_heard)) < 1e-3, (f, faults)
assert abs(f["lost"]["placement"] - (rec["time"] - fault["time"])) < 1e-3, (f, rec)
assert abs(f["lost"]["queue_wait"] - (att["time"] - rec["time"])) < 1e-3, (f, att)
assert f["resumed_from"] is None and g["productive"] == 0, g   # the job seals nothing: attempt 1 is redone
assert f["lost"]["redone"] > 1.5, f   # it stepped for 3 s before the kill
print("   goodput: wall %.1f s = productive %.1f + unsealed %.1f + lost %.1f (startup %.1f; fault on %s: redone %.1f, detection %.1f, "
      "placement %.1f, queue wait %.1f, restart %.1f); ratio %.3f" % (g["wall"], g["productive"], g["unsealed"], lost["total"], lost["startup"],
      f["node"], f["lost"]["redone"], f["lost"]["detection"], f["lost"]["placement"], f["lost"]["queue_wait"], f["lost"]["restart"], g["ratio"]))
' "$WORK/rq-events.json" "$victim" || fail "goodput of rq-run: $gp"
ok "goodput adds up (productive + unsealed + lost = wall within 1 s) and names the fault on $victim"
old_state=$(job_state beta "$j")
case "$old_state" in RUNNING|PENDING) fail "the old job $j is still $old_state" ;; esac
ok "node $victim killed: attempt 2 runs as job $new on $on; fault -> RECOVERED ${dt}s; old job $j $old_state"
# A shared worker token cannot report for a run at all.
out=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $(cat "$AGENT_TOKEN_FILE")" "$BROKER_URL/v1/heartbeats" \
    -d '{"run":"rq-run","attempt":1,"node":"'"$victim"'","ranks":[]}')
[ "$out" = 403 ] && ok "a heartbeat with a shared worker token is refused (403)" || fail "shared-token heartbeat answered $out"
# What attempt 1's agent held: a token derived for rq-run attempt 1 of job $j only.
old_token=$("$HARNESS/worker_token.py" "$WORKER_KEY_FILE" rq-run 1 1 "$(id -u "$TEST_USER")" "$j" beta)
post() { curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $old_token" "$BROKER_URL$1" -d "$2"; }
hb1=$(post /v1/heartbeats '{"run":"rq-run","attempt":1,"node":"'"$victim"'","ranks":[]}')
hb2=$(post /v1/heartbeats '{"run":"rq-run","attempt":2,"node":"'"$victim"'","ranks":[]}')
ck1=$(post /v1/runs/rq-run/checkpoints/checkpoint-9/commit '{"attempt":1,"rank":0,"world_size":1,"files":[{"path":"a","sha256":"00","bytes":1}]}')
other=$(post /v1/heartbeats '{"run":"other-run","attempt":1,"node":"x","ranks":[]}')
[ "$hb1 $hb2 $ck1 $other" = "409 403 409 403" ] \
    && ok "attempt 1's own token: heartbeat 409 (fenced), as attempt 2 403, commit 409, another run 403" \
    || fail "attempt 1's token: heartbeat $hb1, as attempt 2 $hb2, commit $ck1, another run $other"
slurm beta scancel "$new"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta "$victim"
for _ in $(seq 150); do slurm beta sinfo -h -n "$victim" -o %T | grep -qx idle && break; sleep 0.2; done
