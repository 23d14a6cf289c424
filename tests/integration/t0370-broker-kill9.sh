#!/bin/bash
# kill -9 of a broker at >= 20 instants of a live two-cluster run (issue 15,
# test 1). Brokers A (alpha) and B (beta) are federated as in t0330; the
# agents of each cluster reach their broker through tests/harness/ack_proxy.py,
# which writes down every answer an agent got before the agent gets it.
#
#   phase 1  k9-fed (2 nodes, beta) commits and seals a checkpoint a second;
#            B is killed at random instants (commits, seals, heartbeats), A
#            too (B's peer)
#   phase 2  beta2 dies: B has no room, forwards the decision to A, which
#            resubmits on alpha. Kills: before the FAULT, right after it (the
#            decision being written and forwarded), when A received it
#            (being applied), while B waits for A's answer, while attempt 2
#            starts, while it commits at A
#   phase 3  k9-local (1 node, beta) loses its node: B requeues it on the
#            other beta node. Kills: before the FAULT, right after it (the
#            decision, the cancel, the sbatch), before RECOVERED, after it
#
# After each restart: every commit an agent was answered 2xx for is in that
# broker's database (sealed when told so, or when every rank was told 2xx).
# Throughout: at most one Slurm job per decision (squeue watched every
# 0.5 s). At the end: exactly one replacement job per decision, k9-fed MOVED
# at B and RUNNING (attempt 2) at A, k9-local RUNNING (attempt 2) at B, no
# FAULT but those of the two node kills. SHARDNET_K9_SEED replays the instants.
. "$(dirname "$0")/lib.sh"
SEED=${SHARDNET_K9_SEED:-$RANDOM}
RANDOM=$SEED
echo "seed $SEED (SHARDNET_K9_SEED=$SEED replays these instants)"
MON_PID=""
cleanup_k9() {
    [ -z "$MON_PID" ] || kill "$MON_PID" 2>/dev/null || true
    cleanup_lib
}
trap cleanup_k9 EXIT
# Phase 3 recovers on beta2, which died in phase 2 and is back: the
# brokers' bad-node memory (kept across these kill -9s) holds it 5 s here.
DETECTOR_EXTRA='"quarantine_seconds": 5'
start_federation
write_trainer "$WORK/train.sh"

# The agents' side of the record: one ack proxy per broker.
start_ack_proxy() {  # A|B
    local x=$1 lc; lc=$(tr AB ab <<<"$1")
    : > "$FED/acks-$lc.log"
    /usr/bin/python3 "$HARNESS/ack_proxy.py" --listen-port-file "$FED/ack-$lc.port" --target "127.0.0.1:$(fed_port "$x")" \
        --cert "$FED/$lc.crt" --key "$FED/$lc.key" --log "$FED/acks-$lc.log" 2>> "$FED/ack-$lc.err" &
    RX_PIDS+=($!)
    for _ in $(seq 100); do [ -s "$FED/ack-$lc.port" ] && break; sleep 0.05; done
    [ -s "$FED/ack-$lc.port" ] || fail "ack proxy $x did not start: $(cat "$FED/ack-$lc.err")"
}
start_ack_proxy A; start_ack_proxy B
plugstack alpha "broker=https://127.0.0.1:$(cat "$FED/ack-a.port") ca_file=$FED/a.crt worker_key_file=$FED/a.worker.key heartbeat_min=1"
plugstack beta "broker=https://127.0.0.1:$(cat "$FED/ack-b.port") ca_file=$FED/b.crt worker_key_file=$FED/b.worker.key heartbeat_min=1"

# Every job either cluster ever lists, with its comment (a decision's jobs
# carry "shardnet-decision:ID"), every 0.5 s.
(
    while :; do
        for c in alpha beta; do slurm $c squeue -h -t all -o "$c %i %k" 2>/dev/null; done >> "$WORK/jobs.seen"
        sleep 0.5
    done
) &
MON_PID=$!

rnd() { awk -v a="$1" -v b="$2" -v s="$RANDOM$RANDOM" 'BEGIN { srand(s); printf "%.2f", a + (b - a) * rand() }'; }
KILLS=0
check_acks() {
    local x lc
    for x in A B; do
        lc=$(tr AB ab <<<"$x")
        /usr/bin/python3 "$HARNESS/ack_check.py" "$FED/acks-$lc.log" "$FED/$lc.db" "broker $x" > "$WORK/ack.out" \
            || fail "after kill #$KILLS: $(cat "$WORK/ack.out")"
    done
}
duplicates() {  # decision ids with more than one job, as squeue showed them
    sort -u "$WORK/jobs.seen" | awk '$3 ~ /^shardnet-decision:/ { split($3, d, ":"); n[$1 " " d[2] ":" d[3]]++ }
        END { for (k in n) if (n[k] > 1) print k, n[k] }'
}
# k9 A|B WHAT: kill -9, down for 0-1 s, start again on the same port and database.
k9() {
    local x=$1 pid; eval "pid=\$FED_PID_$x"
    KILLS=$((KILLS + 1))
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true
    local down; down=$(rnd 0 1); sleep "$down"
    fed_start "$x"
    check_acks
    local d; d=$(duplicates)
    [ -z "$d" ] || fail "after kill #$KILLS: more than one job for a decision: $d"
    printf '  kill -9 #%-2d broker %s (down %ss) %s\n' "$KILLS" "$x" "$down" "$2"
}
events() { fed_get "$1" "/v1/runs/$2/events" 2>/dev/null || echo '{"events":[]}'; }
has() {  # A|B RUN KIND: the run's events at that broker hold KIND
    events "$1" "$2" | /usr/bin/python3 -c 'import json,sys; sys.exit(0 if any(e["kind"] == sys.argv[1] for e in json.load(sys.stdin)["events"]) else 1)' "$3"
}
count() {  # A|B RUN KIND
    events "$1" "$2" | /usr/bin/python3 -c 'import json,sys; print(sum(e["kind"] == sys.argv[1] for e in json.load(sys.stdin)["events"]))' "$3"
}
wait_event() {  # SECONDS A|B RUN KIND
    for _ in $(seq $(($1 * 5))); do has "$2" "$3" "$4" && return 0; sleep 0.2; done
    fail "no $4 for $3 at broker $2 within $1 s: $(events "$2" "$3" | head -c 3000)"
}
state() { fed_get "$1" "/v1/runs/$2" | /usr/bin/python3 -c 'import json,sys; v=json.load(sys.stdin); print(v["state"], v["attempt"])'; }
show() {
    local x
    for x in "$@"; do
        echo "  broker $x, $RUN:"
        events "$x" "$RUN" | /usr/bin/python3 -c '
import json, sys, time
for e in json.load(sys.stdin)["events"]:
    if e["kind"] != "SEALED": print("   ", time.strftime("%H:%M:%S", time.localtime(e["time"])), "%-10s" % e["kind"], e["cause"][:140])'
    done
}

# --- phase 1: commits and seals -------------------------------------------
RUN=k9-fed
j=$(as_user beta sbatch --parsable -N2 -n2 -o "$WORK/k9fed-%j.out" --shardnet=$RUN --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
wait_event 40 B $RUN SEALED
for i in 1 2 3 4 5 6; do sleep "$(rnd 0.3 2.5)"; k9 B "k9-fed commits and seals (phase 1, $i)"; done
for i in 1 2; do sleep "$(rnd 0.3 1.5)"; k9 A "the peer of B (phase 1, $i)"; done
sealed1=$(fed_get B /v1/runs/$RUN/checkpoints | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["checkpoints"]))')
sleep 3
sealed2=$(fed_get B /v1/runs/$RUN/checkpoints | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["checkpoints"]))')
[ "$sealed2" -gt "$sealed1" ] || fail "no checkpoint sealed in the 3 s after the kills ($sealed1 then $sealed2)"
[ "$(count B $RUN FAULT)" = 0 ] || fail "FAULT while only the broker was killed: $(events B $RUN)"
[ "$(state B $RUN)" = "RUNNING 1" ] || fail "k9-fed at B after phase 1: $(state B $RUN)"
ok "phase 1: $KILLS kills, k9-fed RUNNING at B, no FAULT, sealing goes on ($sealed2 sealed): $(cat "$WORK/ack.out")"

# --- phase 2: a node dies, the decision goes to A ---------------------------
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
sleep "$(rnd 0 1.5)"; k9 B "beta2 just died, before the FAULT"
wait_event 40 B $RUN FAULT
sleep "$(rnd 0 0.4)"; k9 B "FAULT raised: the decision being written and forwarded"
wait_event 40 A $RUN RECEIVED
sleep "$(rnd 0 0.3)"; k9 A "A received the decision: being applied and answered"
has B $RUN MOVED || { sleep "$(rnd 0 0.3)"; k9 B "B waits for A's answer"; }
for _ in $(seq 300); do [ "$(state B $RUN | cut -d" " -f1)" = MOVED ] && break; sleep 0.2; done
[ "$(state B $RUN | cut -d" " -f1)" = MOVED ] || { show B A; fail "k9-fed never MOVED at B: $(state B $RUN)"; }
sleep "$(rnd 0 1)"; k9 A "attempt 2 starting on alpha"
has A $RUN RECOVERED || { sleep "$(rnd 0 1)"; k9 A "attempt 2 starting on alpha, before RECOVERED"; }
wait_event 60 A $RUN RECOVERED
for i in 1 2 3; do sleep "$(rnd 0.5 2)"; k9 A "attempt 2 commits at A ($i)"; done
sleep "$(rnd 0.2 1)"; k9 B "B holds k9-fed MOVED"
show B A
ok "phase 2: $KILLS kills in all; k9-fed: B $(state B $RUN), A $(state A $RUN)"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2
for _ in $(seq 150); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done

# --- phase 3: a local requeue at B ---------------------------------------
RUN=k9-local
j2=$(as_user beta sbatch --parsable -N1 -o "$WORK/k9local-%j.out" --shardnet=$RUN --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
wait_event 40 B $RUN SEALED
sleep "$(rnd 0.3 1.5)"; k9 B "k9-local commits"
sleep "$(rnd 0.3 1.5)"; k9 A "k9-fed attempt 2 commits at A"
victim=$(slurm beta squeue -h -j "$j2" -o %N)
[ -n "$victim" ] || fail "job $j2 has no node"
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta "$victim"
sleep "$(rnd 0 1.5)"; k9 B "$victim just died, before the FAULT"
wait_event 40 B $RUN FAULT
sleep "$(rnd 0 0.5)"; k9 B "FAULT raised: the decision, the cancel, the sbatch"
has B $RUN RECOVERED || { sleep "$(rnd 0 1)"; k9 B "attempt 2 submitted, before RECOVERED"; }
wait_event 60 B $RUN RECOVERED
for i in 1 2; do sleep "$(rnd 0.5 2)"; k9 B "k9-local attempt 2 commits ($i)"; done
sleep "$(rnd 0.5 1.5)"; k9 A "k9-fed attempt 2 commits at A"
show B
[ "$KILLS" -ge 20 ] || fail "only $KILLS kills"
sleep 3; check_acks

# --- the end states ----------------------------------------------------------
[ "$(state B k9-fed | cut -d" " -f1)" = MOVED ] || fail "k9-fed at B: $(state B k9-fed)"
[ "$(state A k9-fed)" = "RUNNING 2" ] || fail "k9-fed at A: $(state A k9-fed)"
[ "$(state B k9-local)" = "RUNNING 2" ] || fail "k9-local at B: $(state B k9-local)"
# One FAULT per worker of the dead node (its batch script's and its step's),
# none for a worker elsewhere.
faults_on() {  # A|B RUN NODE: FAULTs, and those not of NODE's workers
    events "$1" "$2" | /usr/bin/python3 -c 'import json,sys
f = [e for e in json.load(sys.stdin)["events"] if e["kind"] == "FAULT"]
print(len(f), sum(1 for e in f if not e["cause"].startswith("worker " + sys.argv[1] + "/")))' "$3"
}
read -r n other <<<"$(faults_on B k9-fed beta2)"
[ "$n" -ge 1 ] && [ "$other" = 0 ] || fail "k9-fed: $n FAULTs at B, $other not of beta2's workers: $(events B k9-fed)"
read -r n other <<<"$(faults_on B k9-local "$victim")"
[ "$n" -ge 1 ] && [ "$n" -le 2 ] && [ "$other" = 0 ] || fail "k9-local: $n FAULTs at B, $other not of $victim's workers: $(events B k9-local)"
[ "$(count A k9-fed FAULT)" = 0 ] || fail "k9-fed: FAULT at A"
[ "$(count A k9-fed RECOVERED)" = 1 ] && [ "$(count B k9-local RECOVERED)" = 1 ] || fail "RECOVERED not exactly once"
sleep 1
d=$(duplicates); [ -z "$d" ] || fail "more than one job for a decision: $d"
fed_job=$(sort -u "$WORK/jobs.seen" | awk '$1 == "alpha" && $3 ~ /^shardnet-decision:beta-broker:k9-fed\/attempt-2/ {print $2}' | sort -u)
local_job=$(sort -u "$WORK/jobs.seen" | awk '$1 == "beta" && $3 ~ /^shardnet-decision:beta-broker:k9-local\/attempt-2/ {print $2}' | sort -u)
[ "$(wc -w <<<"$fed_job")" = 1 ] || fail "k9-fed attempt 2: jobs '$fed_job' on alpha, exactly 1 expected"
[ "$(wc -w <<<"$local_job")" = 1 ] || fail "k9-local attempt 2: jobs '$local_job' on beta, exactly 1 expected"
[ "$(job_state alpha "$fed_job")" = RUNNING ] || fail "k9-fed's job $fed_job on alpha is $(job_state alpha "$fed_job")"
[ "$(job_state beta "$local_job")" = RUNNING ] || fail "k9-local's job $local_job on beta is $(job_state beta "$local_job")"
check_acks
ok "$KILLS kills -9 (A and B); lost acknowledged commits 0: $(for x in a b; do /usr/bin/python3 "$HARNESS/ack_check.py" "$FED/acks-$x.log" "$FED/$x.db" "broker $(tr ab AB <<<$x)"; done | tr '\n' ';')"
ok "one replacement job per decision (k9-fed: alpha job $fed_job, k9-local: beta job $local_job); k9-fed MOVED at B, RUNNING 2 at A; k9-local RUNNING 2 at B"
slurm alpha scancel "$fed_job"; slurm beta scancel "$local_job" "$j" "$j2"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta "$victim"
for _ in $(seq 150); do slurm beta sinfo -h -n "$victim" -o %T | grep -qx idle && break; sleep 0.2; done
wait_job alpha "$fed_job" 30; wait_job beta "$local_job" 30
