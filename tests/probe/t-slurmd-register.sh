#!/bin/bash
# A real slurmctld and slurmd accept what shardnet-probe generates: the
# --slurm-node line and the --gres-conf lines of the DGX-2 fixture make a node
# that registers IDLE with all 16 GPUs and without Slurm's complaints. Two
# broken copies of the same configuration, registered in the same cluster,
# must be refused, so that the test cannot pass vacuously:
#   gpunode1  as generated                          -> IDLE, gpu:V100:16
#   gpunode2  CoresPerSocket changed in the line    -> DRAIN/INVAL or complaint
#   gpunode3  one gres.conf line (nvidia15) removed -> DRAIN/INVAL or complaint
# Each slurmd reads the fixture (HWLOC_XMLFILE) and runs in its own mount
# namespace with a private tmpfs /dev holding /dev/nvidia0..15 (char 195 N),
# which slurmd checks gres.conf's File= against. Needs root; ports from
# free_ports.py; cleans up exactly what it started. Run by `make check`.
set -euo pipefail
PROBE=${PROBE:?}; FIXTURES=${FIXTURES:?}; HARNESS=${HARNESS:?}
XML=$FIXTURES/topologies/nvidiaDGX2.xml
# A skip fails where everything must run (make check as root sets SHARDNET_NO_SKIP).
skip() { echo "SKIP: $*"; [ -z "${SHARDNET_NO_SKIP:-}" ] || { echo "FAIL: skipped under SHARDNET_NO_SKIP"; exit 1; }; exit 77; }
for c in slurmctld slurmd scontrol munge munged unshare mknod; do
    command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] ||
        { skip "$c not installed (needed to register a real node)"; }
done
[ "$(id -u)" = 0 ] || { skip "must run as root (starts slurmctld and slurmd, mounts a private /dev)"; }
unshare --mount --propagation private true 2>/dev/null ||
    { skip "cannot make a private mount namespace (unshare --mount)"; }

TMP=$(mktemp -d /tmp/shardnet-register.XXXXXX); chmod 755 "$TMP"
PIDS=() MUNGED=""
cleanup() {
    local p alive
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for _ in $(seq 50); do
        alive=""; for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
        [ -z "$alive" ] && break; sleep 0.1
    done
    # shellcheck disable=SC2086
    [ -z "$alive" ] || kill -9 $alive 2>/dev/null || true
    [ -z "$MUNGED" ] || kill "$MUNGED" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
die() { echo "FAIL: $*"; exit 1; }

# munged: the one already running (shared), else our own, stopped at the end.
if ! munge -n </dev/null >/dev/null 2>&1; then
    [ -s /etc/munge/munge.key ] || die "no munged running and no /etc/munge/munge.key"
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    runuser -u munge -- /usr/sbin/munged --force
    for _ in $(seq 50); do munge -n </dev/null >/dev/null 2>&1 && break; sleep 0.1; done
    MUNGED=$(pgrep -u munge -n -x munged || true)
    munge -n </dev/null >/dev/null 2>&1 || die "munged did not come up"
fi

# The generated configuration. RealMemory is the one thing taken from
# slurmd -C instead: slurmd reports this machine's memory, not the fixture's,
# and a configured RealMemory above it would drain the node for a reason that
# has nothing to do with the probe. The CPU geometry and GRES are the probe's.
hw=$(HWLOC_XMLFILE=$XML timeout 30 slurmd -C 2>/dev/null | head -1)
mem=$(grep -o 'RealMemory=[0-9]*' <<<"$hw") || die "slurmd -C gave no RealMemory: $hw"
node_line() {  # node_line NAME: the probe's --slurm-node line for NAME
    "$PROBE" -i "$XML" --host "$1" --slurm-node | sed "s/RealMemory=[0-9]*/$mem/"
}
L1=$(node_line gpunode1); L2=$(node_line gpunode2); L3=$(node_line gpunode3)
grep -q 'Gres=gpu:V100:16' <<<"$L1" || die "probe line has no Gres=gpu:V100:16: $L1"
cps=$(grep -o 'CoresPerSocket=[0-9]*' <<<"$L2" | cut -d= -f2)
cpus=$(grep -o 'CPUs=[0-9]*' <<<"$L1" | cut -d= -f2)
# gpunode2's copy stays self-consistent (CPUs follows CoresPerSocket), so that
# it is refused for disagreeing with the hardware, not for a slurm.conf typo.
L2=${L2/CoresPerSocket=$cps/CoresPerSocket=$((cps + 2))}
L2=${L2/CPUs=$cpus/CPUs=$((cpus * (cps + 2) / cps))}
{
    "$PROBE" -i "$XML" --host gpunode1 --gres-conf
    "$PROBE" -i "$XML" --host gpunode2 --gres-conf
    "$PROBE" -i "$XML" --host gpunode3 --gres-conf | grep -v 'File=/dev/nvidia15 '
} > "$TMP/gres.conf"
[ "$(grep -c '^NodeName=gpunode1 ' "$TMP/gres.conf")" = 16 ] || die "probe --gres-conf gave not 16 lines"
[ "$(grep -c '^NodeName=gpunode3 ' "$TMP/gres.conf")" = 15 ] || die "removing nvidia15 from gpunode3 failed"
grep -qi autodetect "$TMP/gres.conf" && die "generated gres.conf asks for AutoDetect"

host=$(hostname)
read -r ctld_port < <("$HARNESS/free_ports.py" 1)
read -r -a np < <("$HARNESS/free_ports.py" 3)
mkdir -p "$TMP/state" "$TMP/spool"/gpunode{1,2,3} "$TMP/log" "$TMP/run"
cat > "$TMP/slurm.conf" <<CONF
ClusterName=register
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool/%n
SlurmctldPidFile=$TMP/run/slurmctld.pid
SlurmdPidFile=$TMP/run/slurmd.%n.pid
SlurmctldLogFile=$TMP/log/slurmctld.log
SlurmdLogFile=$TMP/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdTimeout=10
MessageTimeout=10
MailProg=/bin/true
GresTypes=gpu
$L1 NodeHostname=$host NodeAddr=127.0.0.1 Port=${np[0]} State=UNKNOWN
$L2 NodeHostname=$host NodeAddr=127.0.0.1 Port=${np[1]} State=UNKNOWN
$L3 NodeHostname=$host NodeAddr=127.0.0.1 Port=${np[2]} State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
chmod 644 "$TMP/slurm.conf" "$TMP/gres.conf"
export SLURM_CONF=$TMP/slurm.conf

slurmctld -D -i -f "$SLURM_CONF" > "$TMP/log/slurmctld.out" 2>&1 & PIDS+=($!)
for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
scontrol ping 2>/dev/null | grep -q UP || die "slurmctld did not come up: $(tail -5 "$TMP/log/slurmctld.log" 2>/dev/null)"

# slurmd NAME: slurmd -N NAME on the fixture, in a mount namespace whose
# /dev is a tmpfs with the basic devices and /dev/nvidia0..15.
start_slurmd() {
    # shellcheck disable=SC2016  # expanded by the inner bash
    HWLOC_XMLFILE=$XML unshare --mount --propagation private bash -c '
        set -e
        mount -t tmpfs -o mode=755 none /dev
        mknod -m 666 /dev/null c 1 3; mknod -m 666 /dev/zero c 1 5
        mknod -m 666 /dev/random c 1 8; mknod -m 666 /dev/urandom c 1 9
        for i in $(seq 0 15); do mknod -m 666 /dev/nvidia$i c 195 $i; done
        mknod -m 666 /dev/nvidiactl c 195 255
        exec slurmd -D -f "$SLURM_CONF" -N "$1"' _ "$1" > "$TMP/log/slurmd.$1.out" 2>&1 &
    PIDS+=($!)
}
for n in gpunode1 gpunode2 gpunode3; do start_slurmd $n; done

# Wait until each node has registered: IDLE, or marked DRAIN/INVAL.
state() { scontrol show node "$1" 2>/dev/null | grep -o 'State=[^ ]*' | head -1 | cut -d= -f2; }
for _ in $(seq 200); do
    done_=1
    for n in gpunode1 gpunode2 gpunode3; do
        case "$(state $n)" in IDLE|*DRAIN*|*INVAL*|*FAIL*) ;; *) done_=0 ;; esac
    done
    [ $done_ = 1 ] && break; sleep 0.1
done
sleep 1  # let the late log lines (slurmd's own checks) land

COMPLAINT='configured differently|differs from hardware|gres count|count (reported|changed)|invalid|low socket|too few|mismatch|fatal|can.t stat'
# complaints NAME: what slurmctld and NAME's slurmd said against NAME.
complaints() {
    { grep -iE "$COMPLAINT" "$TMP/log/slurmctld.log" | grep -w "$1" || true
      grep -iE "$COMPLAINT" "$TMP/log/slurmd.$1.log" "$TMP/log/slurmd.$1.out" 2>/dev/null || true; }
}
show() { scontrol show node "$1" 2>/dev/null | tr -s ' \n' ' '; }

s1=$(state gpunode1); d1=$(show gpunode1); c1=$(complaints gpunode1)
gres1=$(grep -o ' Gres=[^ ]*' <<<"$d1" | cut -d= -f2 || true)  # gpu:V100:16(S:0-1): S is the sockets of Cores=
tot1=$(grep -o 'CPUTot=[0-9]*' <<<"$d1" | cut -d= -f2 || true)
[ "$s1" = IDLE ] && ok "gpunode1 registered State=IDLE" || fail "gpunode1 State=$s1 ($(grep -o 'Reason=.*' <<<"$d1" || true))"
[[ $gres1 = gpu:V100:16 || $gres1 = "gpu:V100:16(S:"* ]] && ok "gpunode1 Gres=$gres1" || fail "gpunode1 Gres=$gres1, not gpu:V100:16"
[ "$tot1" = "$cpus" ] && ok "gpunode1 CPUTot=$tot1 as the line said" || fail "gpunode1 CPUTot=$tot1, line said $cpus"
kill -0 "${PIDS[1]}" 2>/dev/null && ok "gpunode1's slurmd still running" || fail "gpunode1's slurmd exited"
[ -z "$c1" ] && ok "no complaints about gpunode1 in slurmctld's or slurmd's logs" ||
    fail "complaints about gpunode1: $c1"

# The negative controls: each broken copy must be refused.
for n in gpunode2 gpunode3; do
    s=$(state $n); c=$(complaints $n)
    what=$([ $n = gpunode2 ] && echo "CoresPerSocket=$((cps + 2)) instead of $cps" || echo "nvidia15 missing from gres.conf")
    if [[ $s = *DRAIN* || $s = *INVAL* || -n $c ]]; then
        ok "$n ($what) refused: State=$s; $(head -1 <<<"$c" | sed 's/^.*\] //')"
    else
        fail "$n ($what) registered cleanly (State=$s): the checks above would pass vacuously"
    fi
done

if [ $fails != 0 ]; then
    echo "--- slurmctld.log"; tail -40 "$TMP/log/slurmctld.log" 2>/dev/null || true
    for n in gpunode1 gpunode2 gpunode3; do echo "--- slurmd.$n.log"; tail -15 "$TMP/log/slurmd.$n.log" 2>/dev/null || true; done
    echo "$fails failed"; exit 1
fi
echo "all passed"
