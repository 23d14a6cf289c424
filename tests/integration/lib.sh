# Shared helpers for integration tests. Each test is a bash script run by
# tests/run-integration.sh with SCRATCH (the harness's dir) and BUILD set.
set -euo pipefail
HARNESS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../harness" && pwd)
TEST_USER=${SHARDNET_TEST_USER:-shardtest}
TEST_HOME=$(getent passwd "$TEST_USER" | cut -d: -f6)
OTHER_USER=${SHARDNET_OTHER_USER:-shardtest2}   # the hostile neighbour of the trust tests
WORK=$(mktemp -d "$SCRATCH/work.XXXXXX"); chmod 777 "$WORK"
RX_PIDS=()
# Debian 13's python3-torch (2.6) is built without libuv, which torch's
# env:// rendezvous asks for by default since 2.4: the test jobs say
# USE_LIBUV=0 there, as a site's users must (doc/slurm-versions.md).
case "$(/usr/bin/python3 -c 'import torch.distributed as d; d.TCPStore("127.0.0.1", 0, 1, True, use_libuv=True)' 2>&1)" in
    *"without libuv support"*) export USE_LIBUV=0 ;;
esac
cleanup_lib() { for p in "${RX_PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap cleanup_lib EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
secret() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }   # 64 hex digits
ok() { echo "ok: $*"; }

# as_user CLUSTER CMD...: run a Slurm command as the unprivileged test user.
as_user() {
    local c=$1; shift
    (cd "$WORK" && runuser -u "$TEST_USER" -- env SLURM_CONF="$SCRATCH/$c/slurm.conf" PATH=/usr/bin:/bin "$@")
}
# as_other CLUSTER CMD...: the same as the second unprivileged user.
as_other() {
    local c=$1; shift
    (cd "$WORK" && runuser -u "$OTHER_USER" -- env SLURM_CONF="$SCRATCH/$c/slurm.conf" PATH=/usr/bin:/bin "$@")
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

# Heartbeat records from the receiver's log, one JSON body per line (the
# agent's other POSTs, its ranks' report and commits, are left out).
hb_bodies() { /usr/bin/python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l)
    if r["path"] != "/v1/heartbeats": continue
    b=r["body"]; b["_t"]=r["t"]; b["_auth"]=r["auth"]; print(json.dumps(b))' "$RX_LOG"; }
# The agent's ranks' reports (POST /v1/runs/RUN/ranks) from the receiver's log.
ranks_bodies() { /usr/bin/python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l)
    if r["path"].endswith("/ranks"): print(json.dumps(r["body"]))' "$RX_LOG"; }

# start_broker [STALL_SECONDS]: a real shardnet-broker on a fixed free port
# (BROKER_EXTRA: more top-level keys of its config, e.g. "checkpoint_policy": {...})
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
    [ -f "$WORK/worker.key" ] || { secret > "$WORK/worker.key"; chmod 600 "$WORK/worker.key"; }
    WORKER_KEY_FILE=$WORK/worker.key
    local clusters="" c
    # CLUSTER_NAMES_<cluster>: that cluster's names table (clusters.NAME.names), as JSON.
    for c in $(cat "$SCRATCH/clusters"); do
        local names_var=CLUSTER_NAMES_$c
        clusters="$clusters${clusters:+, }\"$c\": {\"slurm_conf\": \"$SCRATCH/$c/slurm.conf\"${!names_var:+, \"names\": ${!names_var}}}"
    done
    cat > "$WORK/broker.json" <<CONF
{"listen": "127.0.0.1:$BROKER_PORT", "plain_http": true, "database": "$WORK/broker.db", "clusters": {$clusters},
 "worker_keys": [{"name": "site", "key_file": "$WORKER_KEY_FILE"}],
 "detector": {"misses": 3, "stall_seconds": $stall, "summary_seconds": 1${DETECTOR_EXTRA:+, $DETECTOR_EXTRA}},${BROKER_EXTRA:+
 $BROKER_EXTRA,}
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

# start_federation: two brokers with TLS, one per cluster, peered with
# tokens and pinned certificates: A ("alpha-broker") owns alpha, B
# ("beta-broker") owns beta. B reaches A through a TCP proxy the test
# controls (proxy_mode pass|refuse|drop-replies); A reaches B directly.
# Plugins: alpha -> A, beta -> B, each with its site's worker key.
# fed_get A|B PATH queries a broker as admin; fed_restart B kill -9s and
# restarts one on the same port and database.
FED=$WORK/fed
start_federation() {
    mkdir -p "$FED"; chmod 755 "$FED"
    local s
    for s in a b; do
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 -addext "subjectAltName=IP:127.0.0.1" \
            -keyout "$FED/$s.key" -out "$FED/$s.crt" 2>/dev/null || fail "openssl could not make a certificate"
        chmod 644 "$FED/$s.crt"; chmod 600 "$FED/$s.key"
        secret > "$FED/$s.worker.key"; chmod 600 "$FED/$s.worker.key"
    done
    secret > "$FED/a-to-b.token"; secret > "$FED/b-to-a.token"; chmod 600 "$FED"/*.token
    read -r A_PORT B_PORT <<<"$("$HARNESS/free_ports.py" 2 | tr '\n' ' ')"
    echo pass > "$FED/proxy.mode"
    /usr/bin/python3 "$HARNESS/tcp_proxy.py" --listen-port-file "$FED/proxy.port" --target "127.0.0.1:$A_PORT" \
        --mode-file "$FED/proxy.mode" &
    RX_PIDS+=($!)
    for _ in $(seq 50); do [ -s "$FED/proxy.port" ] && break; sleep 0.1; done
    PROXY_PORT=$(cat "$FED/proxy.port")
    local sha_admin sha_ab sha_ba
    sha_admin=$(printf %s "$ADMIN_TOKEN" | sha256sum | cut -d' ' -f1)
    sha_ab=$(printf %s "$(cat "$FED/a-to-b.token")" | sha256sum | cut -d' ' -f1)
    sha_ba=$(printf %s "$(cat "$FED/b-to-a.token")" | sha256sum | cut -d' ' -f1)
    USER_TOKEN=user-$(secret)
    local sha_user; sha_user=$(printf %s "$USER_TOKEN" | sha256sum | cut -d' ' -f1)
    cat > "$FED/a.json" <<CONF
{"listen": "127.0.0.1:$A_PORT", "tls": {"cert": "$FED/a.crt", "key": "$FED/a.key"}, "database": "$FED/a.db",
 "cluster": "alpha", "broker_name": "alpha-broker", "witness_seconds": ${WITNESS_SECONDS:-2},
 "clusters": {"alpha": {"slurm_conf": "$SCRATCH/alpha/slurm.conf", "region": "eu"}},
 "detector": {"misses": 3, "stall_seconds": 600, "summary_seconds": 1${DETECTOR_EXTRA:+, $DETECTOR_EXTRA}},
 "worker_keys": [{"name": "alpha-site", "key_file": "$FED/a.worker.key"}],
 "peers": [{"name": "beta-broker", "url": "https://127.0.0.1:$B_PORT", "token_file": "$FED/a-to-b.token", "ca_file": "$FED/b.crt"}],
 "tokens": [{"name": "ops", "scope": "admin", "sha256": "$sha_admin"},
            {"name": "$TEST_USER", "scope": "user", "sha256": "$sha_user"},
            {"name": "beta-broker", "scope": "peer", "sha256": "$sha_ba"}]}
CONF
    cat > "$FED/b.json" <<CONF
{"listen": "127.0.0.1:$B_PORT", "tls": {"cert": "$FED/b.crt", "key": "$FED/b.key"}, "database": "$FED/b.db",
 "cluster": "beta", "broker_name": "beta-broker", "witness_seconds": ${WITNESS_SECONDS:-2},
 "clusters": {"beta": {"slurm_conf": "$SCRATCH/beta/slurm.conf", "region": "eu"}},
 "detector": {"misses": 3, "stall_seconds": 600, "summary_seconds": 1${DETECTOR_EXTRA:+, $DETECTOR_EXTRA}},
 "worker_keys": [{"name": "beta-site", "key_file": "$FED/b.worker.key"}],
 "peers": [{"name": "alpha-broker", "url": "https://127.0.0.1:$PROXY_PORT", "token_file": "$FED/b-to-a.token", "ca_file": "$FED/a.crt"}],
 "tokens": [{"name": "ops", "scope": "admin", "sha256": "$sha_admin"},
            {"name": "$TEST_USER", "scope": "user", "sha256": "$sha_user"},
            {"name": "alpha-broker", "scope": "peer", "sha256": "$sha_ab"}]}
CONF
    fed_start A; fed_start B
    plugstack alpha "broker=https://127.0.0.1:$A_PORT ca_file=$FED/a.crt worker_key_file=$FED/a.worker.key heartbeat_min=1"
    plugstack beta "broker=https://127.0.0.1:$B_PORT ca_file=$FED/b.crt worker_key_file=$FED/b.worker.key heartbeat_min=1"
    # The shard CLI's config for the test user: broker B first, A by name.
    cat > "$FED/shard.json" <<CONF
{"broker": {"url": "https://127.0.0.1:$B_PORT", "token": "$USER_TOKEN", "ca_file": "$FED/b.crt"},
 "brokers": {"alpha-broker": {"url": "https://127.0.0.1:$A_PORT", "token": "$USER_TOKEN", "ca_file": "$FED/a.crt"},
             "beta-broker": {"url": "https://127.0.0.1:$B_PORT", "token": "$USER_TOKEN", "ca_file": "$FED/b.crt"}},
 "clusters": {"alpha": {"slurm_conf": "$SCRATCH/alpha/slurm.conf"}, "beta": {"slurm_conf": "$SCRATCH/beta/slurm.conf"}}}
CONF
    chmod 644 "$FED/shard.json"
}
# shard as the test user, with the federation's config; the log heads it
# keeps per broker (shard verify RUN) in this test's own directory, since
# each test's brokers start with fresh logs at the same URLs.
shard() { (cd "$WORK" && runuser -u "$TEST_USER" -- env SHARD_CONFIG="$FED/shard.json" XDG_STATE_HOME="$WORK/state" PATH=/usr/bin:/bin "$BUILD/sbatch-wrappers/shard" "$@"); }
fed_port() { [ "$1" = A ] && echo "$A_PORT" || echo "$B_PORT"; }
fed_crt() { [ "$1" = A ] && echo "$FED/a.crt" || echo "$FED/b.crt"; }
fed_start() {
    local x=$1 lc; lc=$(tr AB ab <<<"$1")
    "$BUILD/broker/shardnet-broker" --config "$FED/$lc.json" 2>> "$FED/$lc.log" &
    RX_PIDS+=($!)
    eval "FED_PID_$x=$!"
    for _ in $(seq 100); do fed_get "$x" /v1/health >/dev/null 2>&1 && return 0; sleep 0.05; done
    fail "broker $x did not start: $(tail -5 "$FED/$lc.log")"
}
fed_get() { curl -sf --cacert "$(fed_crt "$1")" -H "Authorization: Bearer $ADMIN_TOKEN" "https://127.0.0.1:$(fed_port "$1")$2"; }
fed_restart() {  # kill -9, then start again on the same port and database
    local pid; eval "pid=\$FED_PID_$1"
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true
    fed_start "$1"
}
proxy_mode() { echo "$1" > "$FED/proxy.mode"; }
# fed_receipts: both brokers sign receipts, each with a key of its own
# ($FED/a.receipts.key, root 0600; the public key beside it, .pub), then
# restarted with it.
fed_receipts() {
    local x
    for x in a b; do
        openssl genpkey -algorithm ed25519 -out "$FED/$x.receipts.key" 2>/dev/null && chmod 600 "$FED/$x.receipts.key"
        openssl pkey -in "$FED/$x.receipts.key" -pubout -out "$FED/$x.receipts.pub" && chmod 644 "$FED/$x.receipts.pub"
        /usr/bin/python3 - "$FED/$x.json" "$FED/$x.receipts.key" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["receipts"] = {"key_file": sys.argv[2]}
json.dump(c, open(sys.argv[1], "w"))
PY
    done
    fed_restart A; fed_restart B
}
# fed_wait SECONDS PYTHON-EXPR A|B PATH
fed_wait() {
    local secs=$1 expr=$2 b=$3 path=$4
    for _ in $(seq $((secs * 5))); do
        fed_get "$b" "$path" | /usr/bin/python3 -c "import json,sys; v=json.load(sys.stdin); sys.exit(0 if ($expr) else 1)" 2>/dev/null && return 0
        sleep 0.2
    done
    return 1
}
# A trainer honouring the env contract: a step every 0.25 s, a checkpoint
# (real files, a manifest with their hashes) every 4 steps, resumes from
# SHARDNET_RESUME_FROM.
write_trainer() {
    # Knobs (the job's environment): TRAINER_STEPS (2000), TRAINER_CKPT (a
    # checkpoint every 4 steps), STEP_SLEEP (0.25 s a step); SLOW_NODE
    # steps SLOW_SLEEP (1 s) from step SLOW_FROM (0) on: a straggler.
    cat > "$1" <<'SH'
#!/bin/bash
start=0; last=""
if [ -n "$SHARDNET_RESUME_FROM" ] && [ -f "$SHARDNET_RESUME_FROM/rank-$SHARDNET_RANK.step" ]; then
    start=$(cat "$SHARDNET_RESUME_FROM/rank-$SHARDNET_RANK.step"); last=$(basename "$SHARDNET_RESUME_FROM")
fi
echo "attempt=$SHARDNET_ATTEMPT cluster=$SLURM_CLUSTER_NAME node=$SLURMD_NODENAME restart=${SHARDNET_RESTART:-0} rank=$SHARDNET_RANK/$SHARDNET_WORLD_SIZE resume='$SHARDNET_RESUME_FROM' start=$start"
for s in $(seq $((start + 1)) "${TRAINER_STEPS:-2000}"); do
    if [ $((s % ${TRAINER_CKPT:-4})) = 0 ]; then
        last=$(printf 'checkpoint-%04d' "$s"); d=$SHARDNET_CKPT_DIR/$last; mkdir -p "$d"
        echo "$s" > "$d/rank-$SHARDNET_RANK.step"
        echo "$(sha256sum < "$d/rank-$SHARDNET_RANK.step" | cut -d' ' -f1) $(stat -c %s "$d/rank-$SHARDNET_RANK.step") rank-$SHARDNET_RANK.step" \
            > "$d/rank-$SHARDNET_RANK.manifest"
    fi
    echo "$s${last:+ committed $last}" > "$SHARDNET_PROGRESS"
    if [ -n "$SLOW_NODE" ] && [ "$SLURMD_NODENAME" = "$SLOW_NODE" ] && [ "$s" -ge "${SLOW_FROM:-0}" ]; then sleep "${SLOW_SLEEP:-1}"
    else sleep "${STEP_SLEEP:-0.25}"; fi
done
echo "done: rank=$SHARDNET_RANK node=$SLURMD_NODENAME"
SH
    chmod 755 "$1"
}
