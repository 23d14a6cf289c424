# Shared helpers for integration tests. Each test is a bash script run by
# tests/run-integration.sh with SCRATCH (the harness's dir) and BUILD set.
set -euo pipefail
HARNESS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../harness" && pwd)
TEST_USER=${SHARDNET_TEST_USER:-shardtest}
TEST_HOME=$(getent passwd "$TEST_USER" | cut -d: -f6)
WORK=$(mktemp -d "$SCRATCH/work.XXXXXX"); chmod 777 "$WORK"
RX_PIDS=()
cleanup_lib() { for p in "${RX_PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap cleanup_lib EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

# as_user CLUSTER CMD...: run a Slurm command as the unprivileged test user.
as_user() {
    local c=$1; shift
    (cd "$WORK" && runuser -u "$TEST_USER" -- env SLURM_CONF="$SCRATCH/$c/slurm.conf" PATH=/usr/bin:/bin "$@")
}
slurm() { local c=$1; shift; SLURM_CONF="$SCRATCH/$c/slurm.conf" "$@"; }
plugstack() { local c=$1; shift; "$HARNESS/clusters.sh" plugstack "$SCRATCH" "$c" "$*"; }

# start_receiver MODE: sets RX_PORT and RX_LOG.
start_receiver() {
    local mode=${1:-ok}
    RX_LOG=$WORK/rx-$mode.log; : > "$RX_LOG"
    rm -f "$WORK/rx.port"
    /usr/bin/python3 "$HARNESS/receiver.py" --mode "$mode" --port-file "$WORK/rx.port" --log "$RX_LOG" &
    RX_PIDS+=($!)
    for _ in $(seq 50); do [ -s "$WORK/rx.port" ] && break; sleep 0.1; done
    RX_PORT=$(cat "$WORK/rx.port")
}
# A port nobody listens on.
closed_port() { "$HARNESS/free_ports.py" 1; }

# wait_job CLUSTER JOBID [SECONDS]: until the job has left the queue.
wait_job() {
    local c=$1 j=$2 n=${3:-60}
    for _ in $(seq $((n * 5))); do
        slurm "$c" squeue -h -j "$j" 2>/dev/null | grep -q . || return 0
        sleep 0.2
    done
    fail "job $j on $c still queued/running after $n s"
}
job_state() { slurm "$1" scontrol show job "$2" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }

# Heartbeat records from the receiver's log, one JSON body per line.
hb_bodies() { /usr/bin/python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l); b=r["body"]; b["_t"]=r["t"]; b["_auth"]=r["auth"]; print(json.dumps(b))' "$RX_LOG"; }

# start_broker [STALL_SECONDS]: a real shardnet-broker on a fixed free port
# (so that it can be restarted on the same one). Sets BROKER_URL,
# BROKER_PID, AGENT_TOKEN_FILE (one token for all agents) and
# WORKER_KEY_FILE (per-run tokens); ADMIN_TOKEN is for queries.
ADMIN_TOKEN=admin-$RANDOM$RANDOM
BROKER_PORT=""
start_broker() {
    local stall=${1:-600}
    [ -n "$BROKER_PORT" ] || BROKER_PORT=$("$HARNESS/free_ports.py" 1)
    local agent_token=agent-$RANDOM$RANDOM
    [ -f "$WORK/agent.token" ] && agent_token=$(cat "$WORK/agent.token")
    echo "$agent_token" > "$WORK/agent.token"; chmod 600 "$WORK/agent.token"
    AGENT_TOKEN_FILE=$WORK/agent.token
    # The site worker key: agents then hold a token for their run and attempt only.
    [ -f "$WORK/worker.key" ] || { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$WORK/worker.key"; chmod 600 "$WORK/worker.key"; }
    WORKER_KEY_FILE=$WORK/worker.key
    local clusters="" c
    for c in $(cat "$SCRATCH/clusters"); do clusters="$clusters${clusters:+, }\"$c\": {\"slurm_conf\": \"$SCRATCH/$c/slurm.conf\"}"; done
    cat > "$WORK/broker.json" <<CONF
{"listen": "127.0.0.1:$BROKER_PORT", "plain_http": true, "database": "$WORK/broker.db", "clusters": {$clusters},
 "worker_keys": [{"name": "site", "key_file": "$WORKER_KEY_FILE"}],
 "detector": {"misses": 3, "stall_seconds": $stall, "summary_seconds": 1},
 "tokens": [{"name": "agents", "scope": "worker", "sha256": "$(printf %s "$agent_token" | sha256sum | cut -d' ' -f1)"},
            {"name": "ops", "scope": "admin", "sha256": "$(printf %s "$ADMIN_TOKEN" | sha256sum | cut -d' ' -f1)"}]}
CONF
    "$BUILD/broker/shardnet-broker" --config "$WORK/broker.json" 2>> "$WORK/broker.log" &
    BROKER_PID=$!
    RX_PIDS+=($BROKER_PID)
    BROKER_URL=http://127.0.0.1:$BROKER_PORT
    for _ in $(seq 100); do curl -s "$BROKER_URL/v1/health" >/dev/null && return 0; sleep 0.05; done
    fail "broker did not start: $(cat "$WORK/broker.log")"
}
broker_get() { curl -s -H "Authorization: Bearer $ADMIN_TOKEN" "$BROKER_URL$1"; }
# wait_for SECONDS PYTHON-EXPR-ON-v PATH: poll a broker GET until the expression holds.
wait_for() {
    local secs=$1 expr=$2 path=$3
    for _ in $(seq $((secs * 5))); do
        broker_get "$path" | /usr/bin/python3 -c "import json,sys; v=json.load(sys.stdin); sys.exit(0 if ($expr) else 1)" 2>/dev/null && return 0
        sleep 0.2
    done
    return 1
}
