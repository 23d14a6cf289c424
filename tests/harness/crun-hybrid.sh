#!/bin/sh
# crun for the harness's Slurm (oci.conf's RunTime* commands), run as the
# job's user (shardnet-oci-user runs Query, Kill and Delete, which Slurm
# runs as root, as the job's user too). On a host with
# the hybrid cgroup layout (cgroup v1 controllers, and cgroup v2 at
# /sys/fs/cgroup/unified listing a controller) crun 1.8 refuses to run:
# "cgroups in hybrid mode not supported". There it runs in a user and mount
# namespace of its own where a tmpfs hides that mount, back under the
# caller's own uid and gid (a rootless crun, as without the wrapper), with
# --cgroup-manager=disabled. A pure cgroup v2 (or v1) host needs none of it:
# this then is plain `crun "$@"`. The state directory (crun --root) is the
# Prolog's (shardnet-oci-user --prepare).
set -eu
if [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" = tmpfs ] &&
   [ "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ] &&
   grep -q . /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null; then
    exec unshare --map-root-user --mount --propagation private sh -c '
        u=$1 g=$2; shift 2
        mount -t tmpfs -o ro,size=4k shardnet-hide /sys/fs/cgroup/unified &&
        exec unshare --map-user="$u" --map-group="$g" crun --cgroup-manager=disabled "$@"' sh "$(id -u)" "$(id -g)" "$@"
fi
exec crun "$@"
