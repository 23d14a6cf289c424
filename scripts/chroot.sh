#!/bin/bash
# Clean Debian chroots of a release (bookworm, trixie), made once with
# mmdebstrap and cached, and commands run inside them. A run never changes
# the cached chroot: it sees it through an overlay of its own, thrown away
# at the end, in a mount and PID namespace of its own (so that mounts made
# inside, `unshare --mount --propagation private` included, work as on a
# machine, and every daemon a run starts ends with it).
#
#   chroot.sh make RELEASE [clean]      make the chroot if not cached; print its path
#   chroot.sh run RELEASE [clean] [--bind HOST:GUEST]... -- CMD...
#
# The plain chroot has what ShardNet builds, tests and packages with
# (scripts/install-deps.sh --list RELEASE deb); `clean` is a bare one
# (apt only) that packages are installed into by tests/packages/.
# The host's /tmp/shardnet-harness.lock is bound in at the same path: a
# harness inside and one on the host take turns (tests/run-integration.sh).
# SHARDNET_CHROOT_CACHE: where chroots are kept (/var/cache/shardnet/chroot).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${SHARDNET_CHROOT_CACHE:-/var/cache/shardnet/chroot}

die() { echo "chroot.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap --mode=root, mounts, chroot)"
# What it (and in-chroot.sh) needs on the host, installed when missing.
command -v mmdebstrap >/dev/null && command -v rsync >/dev/null || "$HERE/install-deps.sh" chroot >&2 ||
    die "mmdebstrap and rsync are needed (scripts/install-deps.sh chroot)"

# The host's own Debian mirror; the chroot's sources name only its release.
mirror() {
    local m
    m=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [ -n "$m" ] || m=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
    echo "${m:-http://deb.debian.org/debian}"
}

# name RELEASE [clean]: the cache entry's name.
name() { if [ "${2:-}" = clean ]; then echo "$1-clean"; else echo "$1"; fi; }

make_chroot() {
    local release=$1 kind=${2:-} dir tmp includes start
    case "$release" in bookworm|trixie) ;; *) die "unknown release '$release' (bookworm or trixie)" ;; esac
    dir=$CACHE/$(name "$release" "$kind")
    if [ -f "$dir/.shardnet-chroot" ]; then echo "$dir"; return 0; fi
    includes=ca-certificates
    [ "$kind" = clean ] || includes="$includes,$("$HERE/install-deps.sh" --list "$release" deb | tr ' ' ',')"
    mkdir -p "$CACHE"
    tmp=$dir.new; rm -rf "$tmp"
    start=$(date +%s)
    echo "chroot.sh: making $dir (mmdebstrap, some minutes)" >&2
    # Services are not started on install: the harness starts its own.
    mmdebstrap --variant=apt --mode=root --include="$includes" \
        --customize-hook='printf "#!/bin/sh\nexit 101\n" > "$1/usr/sbin/policy-rc.d"; chmod 755 "$1/usr/sbin/policy-rc.d"' \
        "$release" "$tmp" "deb $(mirror) $release main" >&2 || { rm -rf "$tmp"; die "mmdebstrap failed for $release"; }
    echo "made $(date -u +%FT%TZ) in $(( $(date +%s) - start )) s: $includes" > "$tmp/.shardnet-chroot"
    mv "$tmp" "$dir"
    echo "chroot.sh: $dir made in $(( $(date +%s) - start )) s" >&2
    echo "$dir"
}

run_chroot() {
    local release=$1; shift
    local kind=""
    [ "${1:-}" = clean ] && { kind=clean; shift; }
    local binds=()
    while [ $# -gt 0 ]; do
        case "$1" in
            --bind) binds+=("$2"); shift 2 ;;
            --) shift; break ;;
            *) die "run: unknown argument '$1' (--bind HOST:GUEST or --)" ;;
        esac
    done
    [ $# -gt 0 ] || die "run: no command"
    local base work
    base=$(make_chroot "$release" "$kind")
    work=$(mktemp -d "/var/tmp/shardnet-chroot-$release.XXXXXX")
    mkdir -p "$work/upper" "$work/work" "$work/root"
    : >> /tmp/shardnet-harness.lock
    # The namespace's first process mounts, then chroots; when it ends, so
    # do the mounts and every process left in the namespace.
    local rc=0
    unshare --mount --pid --fork --propagation private \
        "$HERE/chroot-enter.sh" "$base" "$work" "${#binds[@]}" "${binds[@]}" "$@" || rc=$?
    rm -rf "$work"
    return "$rc"
}

case "${1:-}" in
    make) shift; make_chroot "$@" ;;
    run) shift; run_chroot "$@" ;;
    *) die "usage: chroot.sh make RELEASE [clean] | run RELEASE [clean] [--bind HOST:GUEST]... -- CMD..." ;;
esac
