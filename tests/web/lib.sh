# Shared by tests/web/t-dashboard.sh and tests/bench/dashboard-render.sh:
# puppeteer-core from package-lock.json (npm ci into tests/web/node_modules,
# git-ignored, no browser download: Debian's chromium drives the pages),
# and a standalone broker on a free loopback port (no Slurm, no TLS).
# Needs: T (a scratch folder), BROKER.
WEB_TESTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
export PUPPETEER_SKIP_DOWNLOAD=1

# The caller's fail (tests/integration/lib.sh has one), else this one.
type fail >/dev/null 2>&1 || fail() { echo "FAIL: $*"; exit 1; }
. "$WEB_TESTS/../npm/ensure.sh"

web_deps() {
    [ -x "$CHROMIUM" ] || fail "$CHROMIUM not found: scripts/install-deps.sh installs Debian's chromium"
    npm_ensure "$WEB_TESTS" puppeteer-core   # no browser download: PUPPETEER_SKIP_DOWNLOAD
}

sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }

# The broker's config: an admin token, user tokens for the accounts daemon
# and bin (they exist on every Debian: a run's owner must be an account),
# two clusters whose slurmctld is a port nobody listens on (sinfo fails at
# once with these timeouts: capacity "unknown"; a missing slurm.conf would
# make it retry for a minute) and a silent peer.
# EXTRA: more top-level keys of the config, e.g. '"receipts": {...}'.
web_config() {  # DB-PATH [EXTRA]
    local c
    for c in alpha beta; do
        mkdir -p "$T/$c"
        printf 'ClusterName=%s\nSlurmctldHost=localhost\nSlurmctldPort=9\nAuthType=auth/none\nMessageTimeout=1\nTCPTimeout=1\n' "$c" > "$T/$c/slurm.conf"
    done
    cat > "$T/broker.json" <<CONF
{${2:+$2,} "listen": "127.0.0.1:0", "plain_http": true, "database": "$1", "broker_name": "west",
 "limits": {"sse_keepalive_ms": 1000},
 "detector": {"misses": 3, "summary_seconds": 1},
 "clusters": {"alpha": {"slurm_conf": "$T/alpha/slurm.conf", "region": "eu-west"},
              "beta": {"slurm_conf": "$T/beta/slurm.conf", "region": "eu-west"}},
 "peers": [{"name": "east", "url": "http://127.0.0.1:9", "token_file": "$T/peer.token"}],
 "tokens": [{"name": "ops", "scope": "admin", "sha256": "$(sha admin-t)"},
            {"name": "daemon", "scope": "user", "sha256": "$(sha daemon-t)"},
            {"name": "bin", "scope": "user", "sha256": "$(sha bin-t)"}]}
CONF
    (umask 077; printf %064d 7 > "$T/peer.token")
}

web_start() {
    rm -f "$T/port"
    "$BROKER" --config "$T/broker.json" --port-file "$T/port" 2>> "$T/broker.log" &
    BROKER_PID=$!
    for _ in $(seq 200); do [ -s "$T/port" ] && break; kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.05; done
    [ -s "$T/port" ] || fail "the broker did not start: $(tail -5 "$T/broker.log")"
    P=$(cat "$T/port")
}

web_stop() {
    [ -n "${BROKER_PID:-}" ] || return 0
    kill -TERM "$BROKER_PID" 2>/dev/null && wait "$BROKER_PID" 2>/dev/null
    BROKER_PID=""
}

api() {  # METHOD PATH [BODY]: as the admin; fails the test on an error status
    local code
    code=$(curl -s -o "$T/api.out" -w '%{http_code}' -X "$1" -H "Authorization: Bearer admin-t" ${3:+--data-binary "$3"} "http://127.0.0.1:$P$2")
    case "$code" in 2*) ;; *) fail "$1 $2: HTTP $code $(cat "$T/api.out")" ;; esac
}
