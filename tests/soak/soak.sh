#!/bin/bash
# The soak (issue 15, tests 2 and 3): healthy --shardnet jobs on two real
# local Slurm clusters (tests/harness/clusters.sh), federated brokers A
# (alpha) and B (beta) as tests/integration/lib.sh start_federation makes
# them, for SOAK_SECONDS (default 3600), while
#
#   - heartbeats are jittered: a random agent (shardnet-agent of a running
#     step) is stopped (SIGSTOP) for a random time below (misses - 1) x its
#     job's interval, then continued (SIGCONT), one agent at a time. A stop
#     that starts just before a heartbeat was due delays it by up to the
#     stop, so the gaps the broker sees reach up to interval + (misses - 1)
#     x interval - 0.3 s: the deadline (misses x interval) less 0.3 s. The
#     agent itself is what is delayed, as a loaded or swapping node delays
#     it, and its commits with it. SOAK_STALL_FACTOR (default 1) scales the
#     stops. A silent worker on a node whose slurmd answers is suspected
#     at its first deadline and a FAULT only at its second (2 x misses x
#     interval): stops of factor 4 and more pass that and must raise FAULTs
#     (the soak's self-check: SOAK_STALL_FACTOR=5 must fail; at 3 the
#     longest stops, 5.7 intervals, still fall short of the 6 it takes);
#   - a broker (A or B, at random) is restarted at random (every 40-180 s:
#     kill -9 or SIGTERM, down 0-15 s);
#   - the peer link B -> A (the TCP proxy between them) is dropped at
#     random (every 30-150 s, for 5-45 s: connections refused, or requests
#     delivered and their answers lost);
#   - once, broker B is stopped for SOAK_BROKER_DOWN_SECONDS (default 600;
#     0: not at all; skipped when longer than half the soak) mid-run: its
#     jobs must run on unaffected and no FAULT may follow its return.
#
# Every job is healthy, so every FAULT and every RECOVERED is false. The
# summary table counts jobs, heartbeats (the brokers' counters, summed over
# their restarts), agent stops, broker restarts, link drops, FAULT and
# RECOVERED events; the exit status is non-zero on any false FAULT or
# recovery, any job that did not end COMPLETED, or any run left RUNNING
# after its job ended.
#
# Usage (as root): tests/soak/soak.sh [BUILD]   (make soak at the top)
# Env: SOAK_SECONDS, SOAK_BROKER_DOWN_SECONDS, SOAK_MAX_JOBS (per cluster
# at once, default 2), SOAK_JOB_SECONDS (longest job, default 240), SOAK_STALL_FACTOR, SOAK_SEED, SOAK_LOGS (where the
# logs stay, default BUILD/soak-logs).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
SOAK_SECONDS=${SOAK_SECONDS:-3600}
DOWN_SECONDS=${SOAK_BROKER_DOWN_SECONDS:-600}
MAX_JOBS=${SOAK_MAX_JOBS:-2}
JOB_SECONDS=${SOAK_JOB_SECONDS:-240}   # jobs run 40 s (or less) up to this
STALL_FACTOR=${SOAK_STALL_FACTOR:-1}
SEED=${SOAK_SEED:-$RANDOM}
LOGS=${SOAK_LOGS:-$BUILD/soak-logs}
MISSES=3   # detector.misses in start_federation's configs
[ "$(id -u)" = 0 ] || { echo "soak: must run as root (starts Slurm daemons)"; exit 1; }
rm -rf "$LOGS"; mkdir -p "$LOGS"
SCRATCH=$(mktemp -d /tmp/shardnet-soak.XXXXXX); chmod 755 "$SCRATCH"
export SCRATCH BUILD
"$ROOT/tests/harness/clusters.sh" up "$SCRATCH" "$BUILD" alpha beta || { cp -r "$SCRATCH" "$LOGS/harness"; exit 1; }
. "$ROOT/tests/integration/lib.sh"
set +e
RANDOM=$SEED
JITTER_PID=""
cleanup_soak() {
    [ -z "$JITTER_PID" ] || kill "$JITTER_PID" 2>/dev/null
    [ -s "$LOGS/stopped" ] && kill -CONT "$(cat "$LOGS/stopped")" 2>/dev/null
    cleanup_lib
    "$ROOT/tests/harness/clusters.sh" down "$SCRATCH"
    cp -r "$FED"/*.log "$WORK"/*.out "$LOGS/" 2>/dev/null
    for c in alpha beta; do cp -r "$SCRATCH/$c/log" "$LOGS/$c-log" 2>/dev/null; done
    rm -rf "$SCRATCH"
}
trap cleanup_soak EXIT
rnd() { awk -v a="$1" -v b="$2" -v s="$RANDOM$RANDOM" 'BEGIN { srand(s); printf "%.2f", a + (b - a) * rand() }'; }
now() { date +%s; }
log() { echo "$(date +%H:%M:%S) $*" | tee -a "$LOGS/soak.log"; }

start_federation
log "soak: ${SOAK_SECONDS}s, seed $SEED, up to $MAX_JOBS jobs per cluster, broker B down once for ${DOWN_SECONDS}s, stall factor $STALL_FACTOR"

# A healthy trainer: a step every 0.5 s for $1 seconds, a checkpoint (files
# and a manifest) every 8 steps, exit 0.
cat > "$WORK/soak-train.sh" <<'SH'
#!/bin/bash
end=$(( $(date +%s) + $1 )); s=0; last=""
while [ "$(date +%s)" -lt "$end" ]; do
    s=$((s + 1))
    if [ $((s % 8)) = 0 ]; then
        last=$(printf 'checkpoint-%05d' "$s"); d=$SHARDNET_CKPT_DIR/$last; mkdir -p "$d"
        echo "$s" > "$d/rank-$SHARDNET_RANK.step"
        echo "$(sha256sum < "$d/rank-$SHARDNET_RANK.step" | cut -d' ' -f1) $(stat -c %s "$d/rank-$SHARDNET_RANK.step") rank-$SHARDNET_RANK.step" \
            > "$d/rank-$SHARDNET_RANK.manifest"
    fi
    echo "$s${last:+ committed $last}" > "$SHARDNET_PROGRESS"
    sleep 0.5
done
SH
chmod 755 "$WORK/soak-train.sh"

# --- heartbeat jitter: one agent stopped at a time --------------------------
: > "$LOGS/jobs.tsv"; : > "$LOGS/stalls.log"; : > "$LOGS/stopped"
jitter_loop() {
    trap 'exit 0' TERM
    while :; do
        local pids pid n conf cluster step job interval max s
        pids=($(pgrep -u "$TEST_USER" -x shardnet-agent))
        n=${#pids[@]}
        if [ "$n" -gt 0 ]; then
            pid=${pids[$((RANDOM % n))]}
            conf=$({ tr '\0' '\n' < "/proc/$pid/environ"; } 2>/dev/null | sed -n 's/^SLURM_CONF=//p')
            cluster=$(basename "$(dirname "$conf")")
            step=$(tr '\0' ' ' < "/proc/$(ps -o ppid= -p "$pid" | tr -d ' ')/cmdline" 2>/dev/null | sed -n 's/.*\[\([0-9]*\)\..*/\1/p')
            job=${step:-}
            interval=$(awk -v c="$cluster" -v j="$job" '$1 == c && $2 == j { print $4 }' "$LOGS/jobs.tsv" | tail -1)
            if [ -n "$interval" ]; then
                max=$(awk -v i="$interval" -v m="$MISSES" -v f="$STALL_FACTOR" 'BEGIN { printf "%.2f", f * (m - 1) * i - 0.3 }')
                s=$(rnd 0.1 "$max")
                echo "$pid" > "$LOGS/stopped"
                kill -STOP "$pid" 2>/dev/null && { sleep "$s"; kill -CONT "$pid" 2>/dev/null
                    echo "$(now) $cluster $job $interval $s" >> "$LOGS/stalls.log"; }
                : > "$LOGS/stopped"
            fi
        fi
        sleep "$(rnd 0.2 1.5)"
    done
}
jitter_loop & JITTER_PID=$!

# --- metrics: heartbeats accepted, summed over each broker's lives ----------
declare -A HB_DONE=([A]=0 [B]=0) HB_LAST=([A]=0 [B]=0)
sample() {
    local x v
    for x in A B; do
        v=$(curl -sf --max-time 5 --cacert "$(fed_crt $x)" "https://127.0.0.1:$(fed_port $x)/metrics" | awk '$1 == "shardnet_heartbeats_total" { print $2 }')
        [ -n "$v" ] && HB_LAST[$x]=$v
    done
}
broker_stop() {  # A|B kill9|term
    local x=$1 pid; eval "pid=\$FED_PID_$x"
    sample
    HB_DONE[$x]=$((HB_DONE[$x] + HB_LAST[$x])); HB_LAST[$x]=0
    if [ "$2" = kill9 ]; then kill -9 "$pid"; else kill -TERM "$pid"; fi
    wait "$pid" 2>/dev/null
}

# --- the main loop ---------------------------------------------------------
declare -A STATE=()
JOBS=0 RESTARTS=0 KILL9=0 DROPS=0 CAP_OK=0 CAP_UNKNOWN=0 OUTAGES=0
T0=$(now); END=$((T0 + SOAK_SECONDS))
next_restart=$((T0 + $(rnd 40 180 | cut -d. -f1)))
next_drop=$((T0 + $(rnd 30 150 | cut -d. -f1)))
link_until=0; next_cap=$T0
outage_at=0; outage_until=0; outage_back=0
if [ "$DOWN_SECONDS" -gt 0 ] && [ "$DOWN_SECONDS" -le $((SOAK_SECONDS / 2)) ]; then outage_at=$((T0 + SOAK_SECONDS / 4)); fi
track_jobs() {
    local c line j st
    for c in alpha beta; do
        while read -r j st; do
            [ -n "$j" ] || continue
            [ -n "${STATE[$c/$j]+x}" ] || continue
            STATE[$c/$j]=$st
        done < <(slurm $c squeue -h -t all -u "$TEST_USER" -o '%i %T' 2>/dev/null)
    done
}
active() { local c=$1 k n=0; for k in "${!STATE[@]}"; do [[ $k == $c/* ]] || continue; case ${STATE[$k]} in PENDING|RUNNING|CONFIGURING|COMPLETING|SUBMITTED) n=$((n + 1)) ;; esac; done; echo $n; }
submit() {
    local c=$1 nodes interval dur j run
    nodes=$((1 + RANDOM % 2)); interval=$((1 + RANDOM % 3)); lo=$((JOB_SECONDS < 80 ? JOB_SECONDS / 2 : 40)); dur=$((lo + RANDOM % (JOB_SECONDS - lo + 1)))
    run=soak-$c-$JOBS
    j=$(as_user $c sbatch --parsable -N$nodes -n$nodes -o "$WORK/$run.out" --shardnet=$run --shardnet-heartbeat=$interval \
        --wrap "srun $WORK/soak-train.sh $dur" 2>>"$LOGS/sbatch.err")
    [ -n "$j" ] || { log "sbatch on $c failed: $(tail -1 "$LOGS/sbatch.err")"; return; }
    JOBS=$((JOBS + 1)); STATE[$c/$j]=SUBMITTED
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$j" "$run" "$interval" "$nodes" "$dur" "$(now)" >> "$LOGS/jobs.tsv"
}
sample_at=0
while [ "$(now)" -lt "$END" ]; do
    t=$(now)
    track_jobs
    for c in alpha beta; do [ "$(active $c)" -lt "$MAX_JOBS" ] && submit $c; done
    # The long outage of B.
    if [ "$outage_at" -gt 0 ] && [ "$t" -ge "$outage_at" ] && [ "$outage_until" = 0 ]; then
        broker_stop B term; outage_until=$((t + DOWN_SECONDS)); OUTAGES=1
        log "broker B stopped for ${DOWN_SECONDS}s (the long outage)"
    fi
    if [ "$outage_until" -gt 0 ] && [ "$outage_back" = 0 ] && [ "$t" -ge "$outage_until" ]; then
        fed_start B; outage_back=$(now); log "broker B back after the long outage"
    fi
    in_outage=$([ "$outage_until" -gt 0 ] && [ "$outage_back" = 0 ] && echo 1 || echo 0)
    # Random restarts.
    if [ "$t" -ge "$next_restart" ]; then
        x=$([ $((RANDOM % 2)) = 0 ] && echo A || echo B)
        [ "$in_outage" = 1 ] && x=A
        how=$([ $((RANDOM % 2)) = 0 ] && echo kill9 || echo term)
        down=$(rnd 0 15)
        broker_stop $x $how; sleep "$down"; fed_start $x
        RESTARTS=$((RESTARTS + 1)); [ "$how" = kill9 ] && KILL9=$((KILL9 + 1))
        log "broker $x restarted ($how, down ${down}s)"
        next_restart=$(( $(now) + $(rnd 40 180 | cut -d. -f1) ))
    fi
    # Random peer link drops.
    if [ "$link_until" = 0 ] && [ "$t" -ge "$next_drop" ]; then
        how=$([ $((RANDOM % 2)) = 0 ] && echo refuse || echo drop-replies)
        proxy_mode $how; link_until=$((t + $(rnd 5 45 | cut -d. -f1))); DROPS=$((DROPS + 1))
        log "peer link B -> A dropped ($how) until $(date -d @$link_until +%H:%M:%S)"
    fi
    if [ "$link_until" -gt 0 ] && [ "$t" -ge "$link_until" ]; then
        proxy_mode pass; link_until=0; next_drop=$((t + $(rnd 30 150 | cut -d. -f1)))
    fi
    # The link in use: B asks A for capacity.
    if [ "$t" -ge "$next_cap" ] && [ "$in_outage" = 0 ]; then
        st=$(fed_get B /v1/capacity 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["peers"][0]["status"])' 2>/dev/null)
        [ "$st" = ok ] && CAP_OK=$((CAP_OK + 1)) || CAP_UNKNOWN=$((CAP_UNKNOWN + 1))
        next_cap=$((t + 20))
    fi
    [ "$t" -ge "$sample_at" ] && { sample; sample_at=$((t + 5)); }
    sleep 1
done
proxy_mode pass
[ "$outage_until" -gt 0 ] && [ "$outage_back" = 0 ] && { fed_start B; outage_back=$(now); log "broker B back after the long outage"; }
log "soak time is up: waiting for the last jobs to end"
for _ in $(seq 300); do
    track_jobs
    [ "$(active alpha)" = 0 ] && [ "$(active beta)" = 0 ] && break
    sleep 1
done
sleep 5   # the last reports, the detector's last deadlines
# A run whose batch script's end was lost (its broker away) is ended from
# Slurm's job state at its worker's deadline: up to misses x the longest
# interval (3 x 10 s) after the job, and a broker's restart on top.
for _ in $(seq 60); do
    left=0
    for x in A B; do
        n=$(fed_get $x /v1/runs 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(sum(r["state"] == "RUNNING" for r in json.load(sys.stdin)["runs"]))' 2>/dev/null || echo 1)
        left=$((left + n))
    done
    [ "$left" = 0 ] && break
    sleep 1
done
track_jobs
sample
kill "$JITTER_PID" 2>/dev/null; wait "$JITTER_PID" 2>/dev/null; JITTER_PID=""

# --- counts ------------------------------------------------------------------
for x in A B; do
    fed_get $x /v1/runs > "$LOGS/runs-$x.json" 2>/dev/null
    /usr/bin/python3 - "$LOGS/runs-$x.json" > "$LOGS/events-$x.jsonl" <<PY
import json, subprocess, sys
for r in json.load(open(sys.argv[1]))["runs"]:
    out = subprocess.run(["curl", "-sf", "--cacert", "$(fed_crt $x)", "-H", "Authorization: Bearer $ADMIN_TOKEN",
                          "https://127.0.0.1:$(fed_port $x)/v1/runs/%s/events?limit=1000" % r["id"]], capture_output=True, text=True).stdout
    for e in json.loads(out or '{"events":[]}')["events"]:
        e["run"], e["run_state"] = r["id"], r["state"]
        print(json.dumps(e))
PY
done
HB=$((HB_DONE[A] + HB_LAST[A] + HB_DONE[B] + HB_LAST[B]))
kinds() { cat "$LOGS"/events-*.jsonl | /usr/bin/python3 -c 'import json,sys; print(sum(json.loads(l)["kind"] == sys.argv[1] for l in sys.stdin))' "$1"; }
FAULTS=$(kinds FAULT); RECOVERED=$(kinds RECOVERED); PLACEMENTS=$(kinds PLACEMENT); ATTEMPTS=$(kinds ATTEMPT)
after_outage=0
[ "$outage_back" -gt 0 ] && after_outage=$(cat "$LOGS"/events-B.jsonl | /usr/bin/python3 -c 'import json,sys; t=float(sys.argv[1]); print(sum(1 for l in sys.stdin if json.loads(l)["kind"] == "FAULT" and json.loads(l)["time"] >= t))' "$outage_back")
completed=0 bad=0
for k in "${!STATE[@]}"; do
    case ${STATE[$k]} in COMPLETED) completed=$((completed + 1)) ;; *) bad=$((bad + 1)); log "job $k ended ${STATE[$k]}" ;; esac
done
STALLS=$(wc -l < "$LOGS/stalls.log")
MAXSTALL=$(awk 'BEGIN { m = 0 } { r = $5 / $4; if (r > m) { m = r; s = $5; i = $4 } } END { printf "%.2f s at interval %d s (%.2f intervals)", s, i, m }' "$LOGS/stalls.log")
RUNS_OK=$(/usr/bin/python3 -c 'import json,sys; print(sum(r["state"] == "SUCCEEDED" for f in sys.argv[1:] for r in json.load(open(f))["runs"]))' "$LOGS"/runs-*.json)
RUNS=$(/usr/bin/python3 -c 'import json,sys; print(sum(len(json.load(open(f))["runs"]) for f in sys.argv[1:]))' "$LOGS"/runs-*.json)
RUNS_RUNNING=$(/usr/bin/python3 -c 'import json,sys; print(sum(r["state"] == "RUNNING" for f in sys.argv[1:] for r in json.load(open(f))["runs"]))' "$LOGS"/runs-*.json)
{
echo
echo "soak summary ($(( $(now) - T0 ))s, seed $SEED)"
printf '  %-44s %s\n' \
    "jobs submitted" "$JOBS" \
    "jobs COMPLETED / other end" "$completed / $bad" \
    "runs at the brokers (SUCCEEDED)" "$RUNS ($RUNS_OK)" \
    "runs still RUNNING after their jobs ended" "$RUNS_RUNNING" \
    "heartbeats accepted (A + B)" "$HB" \
    "agent stops (heartbeat jitter)" "$STALLS, longest $MAXSTALL" \
    "broker restarts (kill -9 / SIGTERM)" "$RESTARTS ($KILL9 / $((RESTARTS - KILL9)))" \
    "long outage of B" "$([ "$OUTAGES" = 1 ] && echo "${DOWN_SECONDS}s, FAULTs after it: $after_outage" || echo none)" \
    "peer link drops" "$DROPS" \
    "capacity through the link: peer ok / unknown" "$CAP_OK / $CAP_UNKNOWN" \
    "FAULT events" "$FAULTS" \
    "RECOVERED events" "$RECOVERED" \
    "PLACEMENT / ATTEMPT events" "$PLACEMENTS / $ATTEMPTS" \
    "false FAULTs" "$FAULTS" \
    "false recoveries (RECOVERED, PLACEMENT)" "$((RECOVERED + PLACEMENTS))"
} | tee -a "$LOGS/soak.log"
grep -h '"kind": "\(FAULT\|RECOVERED\|PLACEMENT\)"' "$LOGS"/events-*.jsonl | head -20 | cut -c1-300
rc=0
[ "$FAULTS" = 0 ] || { echo "soak: FAIL: $FAULTS false FAULT(s)"; rc=1; }
[ $((RECOVERED + PLACEMENTS)) = 0 ] || { echo "soak: FAIL: $((RECOVERED + PLACEMENTS)) false recovery event(s)"; rc=1; }
[ "$bad" = 0 ] || { echo "soak: FAIL: $bad job(s) did not end COMPLETED"; rc=1; }
[ "$RUNS_RUNNING" = 0 ] || { echo "soak: FAIL: $RUNS_RUNNING run(s) still RUNNING although every job ended"; rc=1; }
[ "$JOBS" -gt 0 ] && [ "$HB" -gt 0 ] || { echo "soak: FAIL: no jobs or no heartbeats"; rc=1; }
echo "soak: logs in $LOGS"
exit $rc
