#!/bin/bash
# Trust, tried as a hostile cluster user would, with the real plugin, the
# real broker and Slurm's own job records:
# (a) a job named 'x UserId=(00) GroupId=(00) ...' (with its workdir, output
#     path and comment full of the same) is requeued after a node kill as its
#     real owner, never as root;
# (b) a second user's jobs that claim the first user's run (its name, a
#     later attempt in SHARDNET_ATTEMPT, attempt 1000000) are refused and
#     change nothing: the victim's job keeps running, its run keeps its
#     attempt, nothing is fenced or cancelled;
# (c) the second user's own valid token naming the victim's job id is refused
#     and cancels nothing;
# (d) one rank of a 2-rank step committing with world_size=1 seals nothing.
. "$(dirname "$0")/lib.sh"
start_broker 600
plugstack beta "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"
A_UID=$(id -u "$TEST_USER"); B_UID=$(id -u "$OTHER_USER")
cat > "$WORK/train.sh" <<'SH'
#!/bin/bash
echo "attempt=$SHARDNET_ATTEMPT rank=$SHARDNET_RANK/$SHARDNET_WORLD_SIZE uid=$(id -u) job=$SLURM_JOB_ID"
for s in $(seq 1 400); do echo $s > "$SHARDNET_PROGRESS"; sleep 0.5; done
SH
chmod 755 "$WORK/train.sh"
metric() { curl -s "$BROKER_URL/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
run_field() { broker_get "/v1/runs/$1" | /usr/bin/python3 -c "import json,sys; v=json.load(sys.stdin); print(v.get('$2'))"; }

# The victim: the test user's 2-rank job, everything Slurm prints as text
# spelled to pose as root.
dir="$WORK/dir UserId=(00) x"; mkdir -p "$dir"; chmod 777 "$dir"
evil_name="x UserId=(00) GroupId=(00) x"$'\n'"UserId=$OTHER_USER($B_UID) GroupId=$OTHER_USER($B_UID)"
j=$(as_user beta sbatch --parsable -N1 -n2 -J "$evil_name" -D "$dir" -o "$dir/out UserId=(00) %j.log" \
    --comment 'UserId=(00) GroupId=(00) shardnet-decision:beta-broker:victim/attempt-2' \
    --shardnet=victim --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh" 2>&1) \
    || fail "sbatch refused the victim's job: $j"
wait_for 20 'len([w for w in v["workers"] if w["node"].endswith("/0")]) == 1' /v1/runs/victim \
    || fail "the victim's run never ran: $(broker_get /v1/runs/victim)"
[ "$(run_field victim owner)" = "$TEST_USER" ] || fail "victim's owner: $(broker_get /v1/runs/victim)"
ok "victim job $j runs as $TEST_USER (uid $A_UID), named $(printf %q "$evil_name")"

# (b) The second user claims the victim's run, three ways.
refused0=$(metric shardnet_worker_refusals_total)
for how in "" "SHARDNET_ATTEMPT=2" "SHARDNET_ATTEMPT=1000000"; do
    before=$(metric shardnet_worker_refusals_total)
    b=$(as_other beta env $how sbatch --parsable -N1 -n1 -o "$WORK/b-%j.out" --export=ALL --shardnet=victim \
        --shardnet-heartbeat=1 --wrap "srun sleep 4")
    wait_job beta "$b" 40
    # Slurm made its output file when it started the batch script: the job
    # ran (a squat fails no job); and the broker refused its reports.
    [ -f "$WORK/b-$b.out" ] || fail "${how:-attempt 1}: $OTHER_USER's job $b never started"
    after=$(metric shardnet_worker_refusals_total)
    [ "${after:-0}" -gt "${before:-0}" ] || fail "${how:-attempt 1}: none of job $b's reports was refused ($before -> $after)"
    ok "${how:-attempt 1}: $OTHER_USER's job $b under run victim ran and ended; its reports refused ($before -> $after)"
done
refused=$(metric shardnet_worker_refusals_total)
[ "${refused:-0}" -gt "${refused0:-0}" ] || fail "the broker refused none of $OTHER_USER's reports ($refused0 -> $refused)"
[ "$(job_state beta "$j")" = RUNNING ] || fail "the victim's job $j is $(job_state beta "$j")"
[ "$(run_field victim attempt) $(run_field victim state) $(run_field victim owner)" = "1 RUNNING $TEST_USER" ] \
    || fail "the victim's run changed: $(broker_get /v1/runs/victim)"
broker_get /v1/runs/victim/events | grep -q '"ATTEMPT"\|"FAULT"\|"CANCELLED"' && fail "events on the victim's run: $(broker_get /v1/runs/victim/events)"
# They are told why: each refused agent logs the broker's reason (slurmd's log;
# at the user's terminal in mode=required).
grep -hE "shardnet: agent: .*answered HTTP 403: run (id victim is taken|victim is not known to this broker)" "$SCRATCH"/beta/log/slurmd.beta*.log \
    | head -1 | grep -q . || fail "no refusal reason in slurmd's log: $(grep -h 'shardnet: agent' "$SCRATCH"/beta/log/slurmd.beta*.log | tail -3)"
ok "$OTHER_USER's claims refused ($((refused - refused0)) reports): victim job $j RUNNING, run at attempt 1, no ATTEMPT/FAULT"

# (c) The second user's own valid token (what their agent held), naming the victim's job.
b=$(as_other beta sbatch --parsable -N1 -n1 -o /dev/null --shardnet=b-own --shardnet-heartbeat=1 --wrap "srun sleep 30")
wait_for 20 'len(v["workers"]) >= 1' /v1/runs/b-own || fail "b-own never ran"
b_token=$("$HARNESS/worker_token.py" "$WORKER_KEY_FILE" b-own 1 1 "$B_UID" "$b" beta)
post() { curl -s -o "$WORK/post.out" -w '%{http_code}' -X POST -H "Authorization: Bearer $1" "$BROKER_URL$2" -d "$3"; }
code=$(post "$b_token" /v1/heartbeats '{"run":"b-own","attempt":1,"node":"beta1","cluster":"beta","job":'"$j"',"ranks":[]}')
[ "$code" = 403 ] && grep -q "this token is for job beta/$b" "$WORK/post.out" \
    || fail "a heartbeat naming job $j with $OTHER_USER's token: $code $(cat "$WORK/post.out")"
code=$(post "$b_token" /v1/heartbeats '{"run":"victim","attempt":0,"node":"beta1","ranks":[]}')
[ "$code" != 204 ] || fail "$OTHER_USER's token reported for run victim"
sleep 2
[ "$(job_state beta "$j")" = RUNNING ] || fail "the victim's job $j is $(job_state beta "$j") after $OTHER_USER named it"
ok "$OTHER_USER's own token naming job $j: 403 ($(cut -c1-90 "$WORK/post.out")), job $j still RUNNING"
slurm beta scancel "$b"; wait_job beta "$b" 30

# (d) One rank of the victim's 2-rank step commits claiming world_size=1.
a_token=$("$HARNESS/worker_token.py" "$WORKER_KEY_FILE" victim 1 2 "$A_UID" "$j" beta)
code=$(post "$a_token" /v1/runs/victim/checkpoints/checkpoint-999/commit \
    '{"attempt":1,"rank":0,"world_size":1,"files":[{"path":"a","sha256":"00","bytes":1}]}')
[ "$code" = 200 ] && grep -q '"sealed":false' "$WORK/post.out" && grep -q '"of":2' "$WORK/post.out" \
    || fail "a one-rank commit: $code $(cat "$WORK/post.out")"
broker_get /v1/runs/victim/checkpoints | grep -q checkpoint-999 && fail "checkpoint-999 sealed by one rank"
ok "one rank committing with world_size=1: not sealed ($(cat "$WORK/post.out"))"

# (a) The victim's node dies; the requeued job must run as the victim.
victim_node=$(slurm beta squeue -h -j "$j" -o %N)
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta "$victim_node"
wait_for 90 'any(e["kind"] == "PLACEMENT" for e in v["events"])' /v1/runs/victim/events \
    || fail "no PLACEMENT after the node kill: $(broker_get /v1/runs/victim/events)"
new=$(broker_get /v1/runs/victim/events | /usr/bin/python3 -c 'import json,sys
print(next((e["evidence"].get("new_job", "") for e in json.load(sys.stdin)["events"] if e["kind"] == "PLACEMENT"), ""))')
[ -n "$new" ] || fail "no new job: $(broker_get /v1/runs/victim/events)"
owner=$(slurm beta squeue --json | /usr/bin/python3 -c 'import json,sys
j=[x for x in json.load(sys.stdin)["jobs"] if x["job_id"] == int(sys.argv[1])]
print(j[0]["user_id"], j[0]["group_id"] if j else "none")' "$new")
[ "$owner" = "$A_UID $(id -g "$TEST_USER")" ] || fail "requeued job $new runs as uid/gid $owner, not $A_UID"
[ -z "$(slurm beta squeue -h -u root)" ] || fail "a job runs as root on beta: $(slurm beta squeue -u root)"
for _ in $(seq 50); do grep -q "attempt=2" "$dir/out UserId=(00) $j.log" 2>/dev/null && break; sleep 0.2; done
grep -q "attempt=2 .* uid=$A_UID" "$dir/out UserId=(00) $j.log" || fail "attempt 2's output: $(cat "$dir/out UserId=(00) $j.log" 2>&1)"
ok "node $victim_node killed: attempt 2 is job $new as uid/gid $owner, writing to the first attempt's output; nothing as root"
slurm beta scancel "$new"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta "$victim_node"
for _ in $(seq 150); do slurm beta sinfo -h -n "$victim_node" -o %T | grep -qx idle && break; sleep 0.2; done
