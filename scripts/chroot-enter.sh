#!/bin/bash
# Inside a fresh mount and PID namespace (chroot.sh run): an overlay of the
# cached chroot BASE with an upper dir under WORK, the kernel file systems,
# a private /run and /tmp, the binds asked for, then it becomes the root.
#   chroot-enter.sh BASE WORK NBINDS [HOST:GUEST]... CMD...
set -euo pipefail
base=$1 work=$2 nbinds=$3; shift 3
binds=("${@:1:$nbinds}"); shift "$nbinds"
root=$work/root

mount -t overlay overlay -o "lowerdir=$base,upperdir=$work/upper,workdir=$work/work" "$root"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
# The machine's cgroup hierarchies, as slurmd sees them outside: slurmd of
# 24.11 initialises its cgroup plugin even with proctrack/linuxproc.
[ -d /sys/fs/cgroup ] && mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=755 tmpfs "$root/run"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
# One harness at a time on the machine, inside or out (run-integration.sh).
touch "$root/tmp/shardnet-harness.lock"
mount --bind /tmp/shardnet-harness.lock "$root/tmp/shardnet-harness.lock"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
# The certificate authorities this machine's admin added, trusted inside
# too (apt, npm and curl reach what they reach outside).
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1 && [ -x "$root/usr/sbin/update-ca-certificates" ]; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >/dev/null 2>&1 || true
fi
hostname=$(hostname); echo "$hostname" > "$root/etc/hostname"
grep -qw "$hostname" "$root/etc/hosts" 2>/dev/null || echo "127.0.1.1 $hostname" >> "$root/etc/hosts"
for b in "${binds[@]}"; do
    src=${b%%:*} dst=${b#*:}
    mkdir -p "$root$dst"
    mount --bind "$src" "$root$dst"
done
# The overlay becomes the namespace's root (pivot_root, not chroot): inside
# a chroot the kernel refuses user namespaces, which the harness's crun
# wrapper makes (unshare --map-root-user, t0600). pivot_root(".", ".")
# stacks the host's root on the overlay; detaching it (umount, still the
# host's binary then) leaves the overlay alone at /.
cd "$root"
pivot_root . .
umount -l .
cd /
exec /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt "$@"
