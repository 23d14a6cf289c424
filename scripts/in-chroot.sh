#!/bin/bash
# `make TARGET DIST=RELEASE`: the top-level Makefile's TARGET (check, unit,
# integration, deb, ...) run in a clean chroot of that Debian release
# (scripts/chroot.sh), on a copy of this tree. The copy is kept between runs
# (its build/ too, so a second run builds only what changed) under
# SHARDNET_CHROOT_WORK (/var/cache/shardnet/work/RELEASE); what a run makes
# in dist/RELEASE comes back to this tree's dist/RELEASE, and failed tests'
# logs to build-RELEASE/test-logs.
#
#   scripts/in-chroot.sh RELEASE TARGET [VAR=VALUE]...
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
release=${1:?usage: in-chroot.sh RELEASE TARGET [VAR=VALUE]...}
target=${2:?usage: in-chroot.sh RELEASE TARGET [VAR=VALUE]...}
shift 2
work=${SHARDNET_CHROOT_WORK:-/var/cache/shardnet/work}/$release
[ "$(id -u)" = 0 ] || { echo "in-chroot.sh: must run as root (chroot, mounts)" >&2; exit 1; }

"$HERE/chroot.sh" make "$release" > /dev/null
mkdir -p "$work/src"
# The tree as git sees it: tracked files and new ones, none it ignores
# (this tree's own build/ and dist/ stay out); what the chroot's build made
# in the copy stays, as it is ignored there too.
start=$(date +%s)
(cd "$TOP" && git ls-files -z --cached --others --exclude-standard) |
    rsync -a --delete-missing-args --from0 --files-from=- "$TOP/" "$work/src/"
# A file of the copy's that git neither lists nor ignores is one removed
# or renamed here since the last run: removed there too.
git -C "$TOP" ls-files --cached --others --exclude-standard | sort > "$work/listed"
(cd "$work/src" && find . -path ./build -prune -o -path ./dist -prune -o -type f -print | sed 's|^\./||' | sort) > "$work/present"
# (check-ignore exits 1 when it ignores none of them.)
comm -13 "$work/listed" "$work/present" | { git -C "$TOP" check-ignore --stdin --non-matching --verbose || true; } |
    sed -n 's/^::\t//p' | (cd "$work/src" && xargs -r -d '\n' rm -f --)

rc=0
"$HERE/chroot.sh" run "$release" --bind "$work/src:/src" -- \
    /bin/sh -c 'cd /src && exec nice -n 10 make "$@"' make "$target" "$@" || rc=$?
if [ -d "$work/src/dist/$release" ]; then
    mkdir -p "$TOP/dist/$release"
    rsync -a --delete "$work/src/dist/$release/" "$TOP/dist/$release/"
fi
if [ -d "$work/src/build/test-logs" ] && [ -n "$(ls -A "$work/src/build/test-logs" 2>/dev/null)" ]; then
    mkdir -p "$TOP/build-$release"
    rsync -a --delete "$work/src/build/test-logs/" "$TOP/build-$release/test-logs/"
fi
echo "in-chroot.sh: make $target in $release: exit $rc after $(( $(date +%s) - start )) s"
exit "$rc"
