# Accounting for the harness's clusters, as real sites run it: ONE MariaDB
# and ONE slurmdbd shared by every cluster, data, sockets and logs under
# SCRATCH/acct, free loopback ports. Sourced by clusters.sh (needs die and
# HERE); acct_stop stops exactly the PIDs acct_start started.
#
# Accounts ml and physics (the test users' default is physics), QOS normal
# and high, AccountingStorageEnforce=associations,limits,qos: a job's
# --account and --qos mean what they mean at a site.

acct_dir() { echo "$1/acct"; }

acct_sql() { mariadb --no-defaults --socket="$(acct_dir "$1")/run/mysqld.sock" -e "$2"; }

start_mariadb() {
    local d; d=$(acct_dir "$1")
    mkdir -p "$d/db" "$d/run" "$d/mysql-log"
    chown mysql:mysql "$d/db" "$d/run" "$d/mysql-log"
    # Small buffers: a test's accounting is a few hundred rows. slurmdbd
    # logs that these are below its recommendations; that is expected here.
    # Scratch data need not survive a machine crash: no fsync per commit
    # (slurmdbd makes some 40 tables per cluster; with fsyncs that is
    # seconds on a busy disk).
    local opts=(--no-defaults --datadir="$d/db" --user=mysql --innodb-buffer-pool-size=64M --innodb-log-file-size=8M
                --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --innodb-flush-method=nosync --sync-frm=0)
    mariadb-install-db "${opts[@]}" --auth-root-authentication-method=socket --skip-test-db \
        > "$d/mysql-log/install.log" 2>&1 || die "mariadb-install-db failed: see $d/mysql-log/install.log"
    read -r port < <("$HERE/free_ports.py" 1)
    # Its own descriptors only: a harness lock on an inherited fd would
    # outlive this run (see start_munge).
    (for fd in /proc/$BASHPID/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done
     exec /usr/sbin/mariadbd "${opts[@]}" --socket="$d/run/mysqld.sock" --port="$port" --bind-address=127.0.0.1 \
        --skip-name-resolve --innodb-lock-wait-timeout=900 --pid-file="$d/run/mariadbd.pid" \
        --log-error="$d/mysql-log/mariadbd.log" </dev/null >/dev/null 2>&1) &
    echo $! >> "$d/pids"
    for _ in $(seq 100); do
        mariadb-admin --no-defaults --socket="$d/run/mysqld.sock" ping >/dev/null 2>&1 && break; sleep 0.1
    done
    mariadb-admin --no-defaults --socket="$d/run/mysqld.sock" ping >/dev/null 2>&1 \
        || die "mariadbd did not come up: see $d/mysql-log/mariadbd.log"
    pass=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
    # The database made here, not by slurmdbd: 24.11's slurmdbd, on a
    # connection with no database yet (it then makes it), fails its first
    # query with Debian 13's libmariadb (error 5027; doc/slurm-versions.md).
    acct_sql "$1" "CREATE DATABASE slurm_acct_db;
                   CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
                   GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" || die "could not make the database user"
    echo "$port" > "$d/mysql.port"
    (umask 077; echo "$pass" > "$d/mysql.pass")
}

start_slurmdbd() {
    local d host port; d=$(acct_dir "$1"); host=$(hostname)
    read -r port < <("$HERE/free_ports.py" 1)
    # slurmdbd reads slurmdbd.conf beside SLURM_CONF; it must be 0600.
    (umask 077; cat > "$d/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdAddr=127.0.0.1
DbdHost=$host
DbdPort=$port
SlurmUser=root
PidFile=$d/run/slurmdbd.pid
LogFile=$d/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$(cat "$d/mysql.port")
StorageUser=slurm
StoragePass=$(cat "$d/mysql.pass")
StorageLoc=slurm_acct_db
CONF
)
    echo "$port" > "$d/slurmdbd.port"
    SLURM_CONF=$d/slurm.conf slurmdbd || die "slurmdbd did not start: see $d/slurmdbd.log"
    for _ in $(seq 50); do [ -s "$d/run/slurmdbd.pid" ] && break; sleep 0.1; done
    [ -s "$d/run/slurmdbd.pid" ] || die "slurmdbd wrote no pid: see $d/slurmdbd.log"
    cat "$d/run/slurmdbd.pid" >> "$d/pids"
    # Up means it answers: its port accepts.
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0; sleep 0.1; done
    die "slurmdbd does not listen on $port: see $d/slurmdbd.log"
}

acct_start() {
    local d; d=$(acct_dir "$1")
    mkdir -p "$d"; : > "$d/pids"
    start_mariadb "$1"
    start_slurmdbd "$1"
}

# The lines each cluster's slurm.conf gets.
acct_slurm_conf() {
    local d; d=$(acct_dir "$1")
    cat <<CONF
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$(cat "$d/slurmdbd.port")
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
CONF
}

acct_sacctmgr() {
    local conf=$1; shift
    SLURM_CONF=$conf sacctmgr -i "$@" > /dev/null || die "sacctmgr $* failed"
}

# acct_register SCRATCH USERS CLUSTER...: the clusters, accounts, QOS and
# users, before any slurmctld starts (each reads its associations at start).
acct_register() {
    local scratch=$1 users=$2; shift 2
    local conf=$scratch/$1/slurm.conf
    acct_sacctmgr "$conf" add cluster "$@"
    acct_sacctmgr "$conf" add qos high Priority=100
    acct_sacctmgr "$conf" add account ml,physics Description=harness Organization=harness
    acct_sacctmgr "$conf" modify account where name=ml,physics set QOS=normal,high DefaultQOS=normal
    acct_sacctmgr "$conf" add user "$users" Account=physics,ml DefaultAccount=physics
    acct_sacctmgr "$conf" modify user where name="$users" set QOS=normal,high DefaultQOS=normal
}

acct_stop() {
    local d p; d=$(acct_dir "$1")
    [ -f "$d/pids" ] || return 0
    # slurmdbd first (it writes to the database), then mariadbd.
    for p in $(tac "$d/pids"); do
        kill "$p" 2>/dev/null || continue
        for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
    done
    : > "$d/pids"
    # The database is 100 MB of scratch; its logs stay.
    rm -rf "$d/db"
}
