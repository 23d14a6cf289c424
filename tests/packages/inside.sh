#!/bin/bash
# Run by t-install.sh inside a clean chroot: /dist has the packages (and
# /dist/previous an earlier broker), /descriptors node descriptors to store.
set -uo pipefail
export DEBIAN_FRONTEND=noninteractive
fails=0
ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
apt_install() { apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confold "$@" > /tmp/apt.log 2>&1 || { tail -20 /tmp/apt.log; return 1; }; }
TOKEN=install-test-admin-token
DB=/var/lib/shardnet/broker.db
schema() { python3 -c "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('pragma user_version').fetchone()[0])" "$DB"; }

# The broker as its unit starts it: the unit's user, its ExecStartPre
# check, then ExecStart, no new privileges.
unit_file() { dpkg -L shardnet-broker | grep '/systemd/system/shardnet-broker\.service$'; }
unit_value() { sed -n "s/^$1=//p" "$(unit_file)" | head -1; }
broker_start() {
    local user pre cmd
    user=$(unit_value User); pre=$(unit_value ExecStartPre); cmd=$(unit_value ExecStart)
    setpriv --reuid="$user" --regid="$user" --init-groups --no-new-privs -- $pre > /tmp/check.log 2>&1 \
        || { fail "ExecStartPre ($pre): $(cat /tmp/check.log)"; return 1; }
    (setpriv --reuid="$user" --regid="$user" --init-groups --no-new-privs -- $cmd > /tmp/broker.log 2>&1 &)
    for _ in $(seq 100); do curl -sf http://127.0.0.1:8443/v1/health > /tmp/health 2>/dev/null && return 0; sleep 0.1; done
    fail "the broker does not answer /v1/health: $(tail -5 /tmp/broker.log)"; return 1
}
broker_stop() { pkill -TERM -x shardnet-broker 2>/dev/null; for _ in $(seq 50); do pgrep -x shardnet-broker >/dev/null || return 0; sleep 0.1; done; }
# The admin token the test uses, in the config (a conffile the admin edited).
add_token() {
    python3 - "$TOKEN" <<'PY'
import hashlib, json, sys
p = "/etc/shardnet/broker.conf"
c = json.load(open(p))
c["tokens"] = [{"name": "ops", "scope": "admin", "sha256": hashlib.sha256(sys.argv[1].encode()).hexdigest()}]
json.dump(c, open(p, "w"), indent=2)
PY
}

apt-get update -qq > /dev/null || { echo "apt-get update failed"; exit 1; }
# man-db: systemd-analyze verify runs man for the unit's Documentation=.
apt_install curl python3 systemd procps ca-certificates man-db || exit 1
mkdir -p /etc/slurm

# 1. An earlier broker, its database filled.
before=""
if ls /dist/previous/shardnet-broker_*.deb >/dev/null 2>&1; then
    apt_install /dist/previous/shardnet-broker_*.deb && ok "previous broker $(dpkg-query -W -f='${Version}' shardnet-broker) installed" || fail "previous broker"
    add_token
    if broker_start; then
        curl -sf -X POST -H "Authorization: Bearer $TOKEN" --data-binary @/descriptors/api-node.json http://127.0.0.1:8443/v1/nodes > /dev/null \
            && ok "a node descriptor stored by the previous broker" || fail "POST /v1/nodes to the previous broker"
        broker_stop
        before=$(schema)
    fi
else
    echo "SKIP: upgrade: no earlier broker in dist/RELEASE/previous (scripts/make-deb.sh --previous)"
fi

# 2. This version, every package, as a site installs them.
apt_install /dist/*.deb && ok "installed: $(cd /dist && ls ./*.deb | tr '\n' ' ')" || { fail "apt-get install ./dist/*.deb"; exit 1; }

# The plugin is where this Slurm loads its plugins, and srun loads it from
# the packaged plugstack line.
plugdir=$(dirname "$(dpkg -L slurm-wlm-basic-plugins | grep '/select_cons_tres\.so$')")
[ -f "$plugdir/shardnet.so" ] && ok "plugin in Slurm's plugin dir $plugdir" || fail "no shardnet.so in $plugdir ($(dpkg -L shardnet-spank | grep '\.so$'))"
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=install
SlurmctldHost=localhost
AuthType=auth/munge
NodeName=localhost CPUs=1 State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES
CONF
mkdir -p /etc/slurm/plugstack.conf.d
cp /usr/share/doc/shardnet-spank/examples/plugstack-line.conf /etc/slurm/plugstack.conf.d/shardnet.conf
grep -q 'plugstack.conf.d' /etc/slurm/plugstack.conf && ok "Debian's plugstack.conf includes plugstack.conf.d" || fail "plugstack.conf: $(cat /etc/slurm/plugstack.conf)"
srun --help > /tmp/srun-help 2>&1
grep -q -- '--shardnet' /tmp/srun-help && ok "srun --help lists --shardnet with the packaged plugstack line" || fail "srun --help: $(grep -i shardnet /tmp/srun-help | head -3; tail -3 /tmp/srun-help)"
slurm_version=$(dpkg-query -W -f='${Version}' slurm-wlm-basic-plugins)
dpkg-query -W -f='${Depends}' shardnet-spank | grep -q 'slurm-wlm-basic-plugins (>=' && ok "plugin pinned to Slurm $slurm_version's release: $(dpkg-query -W -f='${Depends}' shardnet-spank | grep -o 'slurm-wlm-basic-plugins[^,]*,[^,]*')" || fail "plugin not pinned"

# The broker: its unit verified by systemd, the system user, its state dir,
# then started as the unit starts it.
systemd-analyze verify "$(unit_file)" > /tmp/verify 2>&1 && [ ! -s /tmp/verify ] && ok "systemd-analyze verify $(unit_file): clean" || fail "systemd-analyze verify: $(cat /tmp/verify)"
getent passwd shardnet > /dev/null && ok "system user shardnet" || fail "no user shardnet"
[ "$(stat -c %U:%a /var/lib/shardnet)" = shardnet:750 ] && ok "/var/lib/shardnet shardnet 0750" || fail "/var/lib/shardnet: $(stat -c %U:%a /var/lib/shardnet)"
ls /etc/shardnet/*.key /etc/shardnet/*.token /etc/shardnet/*.crt > /dev/null 2>&1 && fail "keys made: $(ls /etc/shardnet)" || ok "no key, token or certificate made"
dpkg-query -W -f='${Conffiles}' shardnet-broker | grep -q /etc/shardnet/broker.conf && ok "/etc/shardnet/broker.conf is a conffile" || fail "broker.conf not a conffile"
if broker_start; then
    ok "broker answers /v1/health: $(cat /tmp/health)"
    if [ -n "$before" ]; then
        after=$(schema)
        curl -sf -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8443/v1/nodes/beta1 | grep -q '"H200-SXM"' \
            && ok "upgrade kept the database: the node stored before is there (schema $before -> $after)" || fail "the node stored before the upgrade is gone"
        [ "$after" -gt "$before" ] && ok "schema migrated $before -> $after" || fail "schema $before -> $after"
    fi
    broker_stop
fi

# The CLI, the probe, the library and the man pages.
shard --help > /dev/null 2>&1 && ok "shard --help" || fail "shard --help"
out=$(shard launch 2>&1); grep -q "usage: shard launch" <<<"$out" && ok "shard launch (its usage)" || fail "shard launch has no usage: $out"
shardnet-probe --help > /dev/null 2>&1 && ok "shardnet-probe --help" || fail "shardnet-probe --help"
python3 -c 'import shardnet' && ok "python3 -c 'import shardnet'" || fail "import shardnet"
for m in man1/shard.1 man1/shard-launch.1 man5/shard-spec.5 man8/shardnet.8 man8/shardnet-broker.8 man8/shardnet-probe.8; do
    [ -f "/usr/share/man/$m.gz" ] || fail "no man page $m"
done
ok "man pages: shard(1) shard-launch(1) shard-spec(5) shardnet(8) shardnet-broker(8) shardnet-probe(8)"

echo "# packages on $(. /etc/os-release; echo "$PRETTY_NAME"), Slurm $slurm_version: $fails failed"
[ "$fails" = 0 ]
