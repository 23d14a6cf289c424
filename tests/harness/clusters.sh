#!/bin/bash
# The real Slurm harness: N local clusters (default alpha and beta), each
# with its own slurmctld and NODES slurmd (slurmd -N), state, spool and logs
# under a scratch dir, free loopback ports, one shared munged, and the built
# plugin in PlugStackConfig; accounting (one MariaDB and one slurmdbd for
# all clusters, accounting.sh) and two GPUs per node on fake device files
# (gres.conf File=). Tears down exactly the PIDs it started.
# SHARDNET_ACCOUNTING=0: no accounting (the harness as it was before).
#
#   clusters.sh up SCRATCH BUILD [CLUSTER...]   start, wait until nodes idle
#   clusters.sh down SCRATCH                    stop what `up` started
#   clusters.sh plugstack SCRATCH CLUSTER ARGS  rewrite the plugstack line
#
# SCRATCH/CLUSTER/env holds SLURM_CONF for that cluster.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
NODES=${SHARDNET_NODES:-2}
TEST_USER=${SHARDNET_TEST_USER:-shardtest}
OTHER_USER=${SHARDNET_OTHER_USER:-shardtest2}
ACCOUNTING=${SHARDNET_ACCOUNTING:-1}

die() { echo "clusters.sh: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || die "must run as root (it starts slurmctld, slurmd and munged)"; }
# shellcheck source=accounting.sh
. "$HERE/accounting.sh"

start_munge() {
    local scratch=$1
    if munge -n >/dev/null 2>&1 </dev/null; then return 0; fi
    if [ ! -s /etc/munge/munge.key ]; then
        mkdir -p /etc/munge
        mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null
        chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
    fi
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    chmod 755 /run/munge
    # munged outlives this run (the next one shares it): it keeps none of
    # its starter's descriptors, or a harness lock held on one (flock FILE
    # CMD, run-integration.sh's fd 9) would never be released.
    (for fd in /proc/$BASHPID/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done
     exec runuser -u munge -- /usr/sbin/munged --force)
    for _ in $(seq 50); do munge -n >/dev/null 2>&1 </dev/null && break; sleep 0.1; done
    munge -n >/dev/null 2>&1 </dev/null || die "munged did not come up"
    pgrep -u munge -x munged | head -1 > "$scratch/munged.pid"
}

# Two unprivileged users: the test user, and a second one (OTHER_USER) who
# plays the hostile neighbour in the trust tests.
make_user() {
    local u home
    for u in "$TEST_USER" "$OTHER_USER"; do
        id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"
        home=$(getent passwd "$u" | cut -d: -f6)
        mkdir -p "$home"; chown "$u": "$home"; chmod 755 "$home"
    done
}

write_plugstack() {
    local scratch=$1 cluster=$2; shift 2
    printf 'required %s/lib/shardnet.so agent=%s/lib/shardnet-agent %s\n' "$scratch" "$scratch" "$*" \
        > "$scratch/$cluster/plugstack.conf"
}

write_conf() {
    local scratch=$1 cluster=$2 dir=$1/$2 host; host=$(hostname)
    read -r ctld_port < <("$HERE/free_ports.py" 1)
    read -r -a node_ports < <("$HERE/free_ports.py" "$NODES")
    mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/run"
    cat > "$dir/slurm.conf" <<CONF
ClusterName=$cluster
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SwitchType=switch/none
MpiDefault=none
JobCompType=jobcomp/none
GresTypes=gpu
ReturnToService=2
SlurmdTimeout=10
InactiveLimit=0
KillWait=5
MinJobAge=30
MessageTimeout=10
MailProg=/bin/true
PlugStackConfig=$dir/plugstack.conf
NodeName=${cluster}[1-$NODES] NodeHostname=$host NodeAddr=127.0.0.1 Port=${node_ports[0]}-${node_ports[-1]} CPUs=2 RealMemory=1000 TmpDisk=1000 Gres=gpu:tesla:2 State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
PartitionName=second Nodes=ALL MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
    if [ "$ACCOUNTING" = 1 ]; then acct_slurm_conf "$scratch" >> "$dir/slurm.conf"
    else printf '%s\n' JobAcctGatherType=jobacct_gather/none AccountingStorageType=accounting_storage/none >> "$dir/slurm.conf"; fi
    chmod 644 "$dir/slurm.conf"
    write_gres "$scratch" "$cluster"
    write_oci "$scratch" "$cluster"
    echo "export SLURM_CONF=$dir/slurm.conf" > "$dir/env"
}

# Slurm's own container support (srun --container=BUNDLE, doc/containers.md):
# crun, as the job's user, in the RunTimeRun form (crun's create/start form
# hangs the step), behind shardnet-oci-run (the task's environment into its
# container) and the harness's wrapper for this VM's hybrid cgroup
# layout (crun-hybrid.sh). Every RunTime* command goes through
# shardnet-oci-user: Query, Kill and Delete, which Slurm runs as root, run
# as the job's user. Each user's containers' state under oci/USER, which
# the Prolog (as root) makes and gives to the user; oci/ is root's, 0755.
write_oci() {
    local scratch=$1 cluster=$2 dir=$1/$2 crun="$1/lib/crun-hybrid.sh" state="$1/oci/%u" id=%n.%u.%j.%s.%t
    local as_user="$1/lib/shardnet-oci-user %u"
    command -v crun >/dev/null 2>&1 || { rm -f "$dir/oci.conf"; return 0; }
    mkdir -p "$scratch/oci"; chown root:root "$scratch/oci"; chmod 755 "$scratch/oci"
    cat > "$dir/oci.conf" <<CONF
RunTimeQuery="$as_user $crun --rootless=true --root=$state state $id"
RunTimeKill="$as_user $crun --rootless=true --root=$state kill -a $id SIGTERM"
RunTimeDelete="$as_user $crun --rootless=true --root=$state delete --force $id"
RunTimeRun="$as_user $scratch/lib/shardnet-oci-run $crun --rootless=true --root=$state run --bundle %b $id"
CONF
    chmod 644 "$dir/oci.conf"
    cat > "$scratch/lib/oci-prolog.sh" <<SH
#!/bin/sh
# The job user's crun state dir, $scratch/oci/USER (doc/containers.md).
exec $scratch/lib/shardnet-oci-user --prepare $scratch/oci "\$SLURM_JOB_USER"
SH
    chmod 755 "$scratch/lib/oci-prolog.sh"
    echo "Prolog=$scratch/lib/oci-prolog.sh" >> "$dir/slurm.conf"
}

# Two GPUs per node, as Slurm's own test suite fakes them: device nodes
# (char 195, NVIDIA's major, with no driver behind them) that slurmd counts
# from gres.conf's File=; a regular file where mknod is not allowed.
write_gres() {
    local scratch=$1 cluster=$2 dir=$1/$2 i k f
    : > "$dir/gres.conf"
    for i in $(seq "$NODES"); do
        mkdir -p "$dir/dev/$cluster$i"
        for k in 0 1; do
            f=$dir/dev/$cluster$i/nvidia$k
            [ -e "$f" ] || mknod -m 666 "$f" c 195 "$k" 2>/dev/null || touch "$f"
        done
        echo "NodeName=$cluster$i Name=gpu Type=tesla File=$dir/dev/$cluster$i/nvidia[0-1]" >> "$dir/gres.conf"
    done
    chmod 644 "$dir/gres.conf"
}

start_slurmctld() {
    local scratch=$1 dir=$1/$2
    SLURM_CONF=$dir/slurm.conf slurmctld -f "$dir/slurm.conf" -i
    sleep 0.2
    cat "$dir/run/slurmctld.pid" >> "$scratch/pids"
}

start_cluster() {
    local scratch=$1 cluster=$2 dir=$1/$2
    start_slurmctld "$scratch" "$cluster"
    for i in $(seq "$NODES"); do
        SLURM_CONF=$dir/slurm.conf slurmd -f "$dir/slurm.conf" -N "$cluster$i"
    done
    for i in $(seq "$NODES"); do
        for _ in $(seq 50); do [ -s "$dir/run/slurmd.$cluster$i.pid" ] && break; sleep 0.1; done
        cat "$dir/run/slurmd.$cluster$i.pid" >> "$scratch/pids" || die "slurmd $cluster$i did not start: see $dir/log/slurmd.$cluster$i.log"
    done
}

wait_idle() {
    local dir=$1/$2
    for _ in $(seq 300); do
        states=$(SLURM_CONF=$dir/slurm.conf sinfo -h -N -o '%T' 2>/dev/null | sort -u | tr '\n' ' ')
        [ "$states" = "idle " ] && return 0
        sleep 0.2
    done
    die "cluster $2 not idle after 60 s (states: ${states:-none}); logs in $dir/log"
}

up() {
    need_root
    local scratch=$1 build=$2; shift 2
    local clusters=("$@"); [ ${#clusters[@]} -gt 0 ] || clusters=(alpha beta)
    mkdir -p "$scratch/lib"; chmod 755 "$scratch"
    install -m 755 "$build/spank/shardnet.so" "$scratch/lib/shardnet.so"
    install -m 755 "$build/spank/shardnet-agent" "$scratch/lib/shardnet-agent"
    install -m 755 "$HERE/crun-hybrid.sh" "$scratch/lib/crun-hybrid.sh"
    install -m 755 "$build/spank/shardnet-oci-run" "$scratch/lib/shardnet-oci-run"
    install -m 755 "$build/spank/shardnet-oci-user" "$scratch/lib/shardnet-oci-user"
    : > "$scratch/pids"
    start_munge "$scratch"
    make_user
    if [ "$ACCOUNTING" = 1 ]; then acct_start "$scratch"; fi
    for c in "${clusters[@]}"; do
        write_conf "$scratch" "$c"
        write_plugstack "$scratch" "$c" ""
    done
    if [ "$ACCOUNTING" = 1 ]; then acct_register "$scratch" "$TEST_USER,$OTHER_USER" "${clusters[@]}"; fi
    for c in "${clusters[@]}"; do start_cluster "$scratch" "$c"; done
    for c in "${clusters[@]}"; do wait_idle "$scratch" "$c"; done
    printf '%s\n' "${clusters[@]}" > "$scratch/clusters"
}

# kill_tree PIDS...: kill -9 the processes and all their descendants, as
# one event: all are stopped first, so none of them sees another die and
# acts on it (a step daemon reporting its task's SIGKILL to the agent, and
# the agent telling the broker the batch script ended) before it dies too.
kill_tree() {
    [ $# -gt 0 ] || return 0
    local tree; tree=$(ps -eo pid=,ppid= | awk -v roots="$*" '
        { parent[$1] = $2 }
        END { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1
              do { changed = 0; for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; changed = 1 } } while (changed)
              for (p in keep) print p }')
    kill -STOP $tree 2>/dev/null || true
    kill -9 $tree 2>/dev/null || true
}

# Step daemons writing to a log under DIR (slurmstepd outlives its slurmd).
stepds_logging_to() {
    local p
    for p in $(pgrep -f '^slurmstepd: \[' || true); do
        if ls -l "/proc/$p/fd" 2>/dev/null | grep -q -- "-> $1"; then echo "$p"; fi
    done
}

down() {
    local scratch=$1
    [ -f "$scratch/pids" ] || return 0
    local pids; pids=$(cat "$scratch/pids")
    [ -n "$pids" ] && kill $pids 2>/dev/null || true
    for _ in $(seq 50); do
        alive=""; for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
        [ -z "$alive" ] && break; sleep 0.1
    done
    [ -n "${alive:-}" ] && kill -9 $alive 2>/dev/null || true
    # Step daemons outlive their slurmd. Ours write to a log in our scratch
    # dir; with proctrack/linuxproc their tasks are their descendants.
    kill_tree $(stepds_logging_to "$scratch/")
    acct_stop "$scratch"
    if [ -s "$scratch/munged.pid" ]; then kill "$(cat "$scratch/munged.pid")" 2>/dev/null || true; fi
    : > "$scratch/pids"
}

# kill-node: what a node crash looks like to everyone else: its slurmd and
# every step daemon and task of that node die at once (kill -9).
kill_node() {
    local scratch=$1 cluster=$2 node=$3 dir=$1/$2
    kill_tree $(cat "$dir/run/slurmd.$node.pid" 2>/dev/null) $(stepds_logging_to "$dir/log/slurmd.$node.log")
    rm -f "$dir/run/slurmd.$node.pid"
}

start_node() {
    local scratch=$1 cluster=$2 node=$3 dir=$1/$2
    SLURM_CONF=$dir/slurm.conf slurmd -f "$dir/slurm.conf" -N "$node"
    for _ in $(seq 50); do [ -s "$dir/run/slurmd.$node.pid" ] && break; sleep 0.1; done
    cat "$dir/run/slurmd.$node.pid" >> "$scratch/pids"
}

# kill-cluster: the whole cluster at once: slurmctld, every slurmd, their
# step daemons and tasks (kill -9). start-cluster brings it back.
kill_cluster() {
    local scratch=$1 cluster=$2 dir=$1/$2
    kill -9 "$(cat "$dir/run/slurmctld.pid" 2>/dev/null)" 2>/dev/null || true
    for i in $(seq "$NODES"); do kill_node "$scratch" "$cluster" "$cluster$i"; done
    rm -f "$dir/run/slurmctld.pid"
}

start_cluster_again() {
    local scratch=$1 cluster=$2
    start_cluster "$scratch" "$cluster"
}

# heal: after a failed test, what it may have left broken is mended so that
# the next test starts on whole, idle clusters: a dead slurmctld or slurmd is
# started again, every job is cancelled, a DOWN node is resumed.
heal() {
    local scratch=$1 c i dir
    for c in $(cat "$scratch/clusters"); do
        dir=$scratch/$c
        kill -0 "$(cat "$dir/run/slurmctld.pid" 2>/dev/null)" 2>/dev/null || start_slurmctld "$scratch" "$c"
        for i in $(seq "$NODES"); do
            kill -0 "$(cat "$dir/run/slurmd.$c$i.pid" 2>/dev/null)" 2>/dev/null || start_node "$scratch" "$c" "$c$i"
        done
        local jobs; jobs=$(SLURM_CONF=$dir/slurm.conf squeue -h -o %i 2>/dev/null || true)
        # shellcheck disable=SC2086
        [ -z "$jobs" ] || SLURM_CONF=$dir/slurm.conf scancel --quiet $jobs 2>/dev/null || true
    done
    for c in $(cat "$scratch/clusters"); do
        dir=$scratch/$c
        for _ in $(seq 150); do
            SLURM_CONF=$dir/slurm.conf sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 ~ /down|drain|fail/ {print $1}' |
                while read -r n; do SLURM_CONF=$dir/slurm.conf scontrol update "nodename=$n" state=resume 2>/dev/null || true; done
            [ "$(SLURM_CONF=$dir/slurm.conf sinfo -h -N -o '%T' 2>/dev/null | sort -u | tr '\n' ' ')" = "idle " ] && break
            sleep 0.2
        done
    done
}

# add: one more cluster on the running harness, of NODES nodes, without
# accounting (a test that needs a cluster of another size: t0530's four
# nodes). Its daemons join SCRATCH/pids (`down` ends them); remove ends it
# and forgets it.
add_cluster() {
    need_root
    local scratch=$1 build=$2 cluster=$3
    NODES=$4 ACCOUNTING=0
    write_conf "$scratch" "$cluster"
    write_plugstack "$scratch" "$cluster" ""
    # A cluster added again (each test that adds gamma) starts empty: no job
    # of an earlier test comes back from slurmctld's saved state.
    rm -rf "${scratch:?}/$cluster/state"; mkdir -p "$scratch/$cluster/state"
    start_cluster "$scratch" "$cluster"
    wait_idle "$scratch" "$cluster"
    echo "$cluster" >> "$scratch/clusters"
}

remove_cluster() {
    local scratch=$1 cluster=$2 dir=$1/$2 i
    NODES=$(grep -c "" "$dir/gres.conf" 2>/dev/null || echo 0)
    SLURM_CONF=$dir/slurm.conf scancel --quiet $(SLURM_CONF=$dir/slurm.conf squeue -h -o %i 2>/dev/null) 2>/dev/null || true
    kill_tree $(cat "$dir/run/slurmctld.pid" 2>/dev/null)
    for i in $(seq "$NODES"); do kill_node "$scratch" "$cluster" "$cluster$i"; done
    rm -f "$dir/run/slurmctld.pid"
    sed -i "/^$cluster\$/d" "$scratch/clusters"
}

case "${1:-}" in
    add) shift; add_cluster "$@" ;;
    remove) shift; remove_cluster "$@" ;;
    heal) shift; heal "$@" ;;
    kill-node) shift; kill_node "$@" ;;
    kill-cluster) shift; kill_cluster "$@" ;;
    start-cluster) shift; start_cluster_again "$@" ;;
    start-node) shift; start_node "$@" ;;
    up) shift; up "$@" ;;
    down) shift; down "$@" ;;
    plugstack) shift; s=$1 c=$2; shift 2; write_plugstack "$s" "$c" "$*" ;;
    *) die "usage: clusters.sh up SCRATCH BUILD [CLUSTER...] | down SCRATCH | plugstack SCRATCH CLUSTER ARGS" ;;
esac
