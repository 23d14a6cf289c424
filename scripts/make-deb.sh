#!/bin/bash
# Debian packages of ShardNet (debian/, debhelper), built against this
# machine's Slurm, into OUTDIR; then lintian, which must report no error and
# no warning that debian/*.lintian-overrides does not justify.
#
#   scripts/make-deb.sh OUTDIR                 this tree as git sees it
#   scripts/make-deb.sh OUTDIR --previous REF VERSION
#       the broker alone (profile pkg.shardnet.broker-only) of an earlier
#       commit REF, as package version VERSION, with this tree's debian/:
#       what tests/packages/t-install.sh upgrades from (its database schema
#       is REF's).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
out=${1:?usage: make-deb.sh OUTDIR [--previous REF VERSION]}
ref="" version=""
if [ "${2:-}" = --previous ]; then ref=${3:?--previous REF VERSION}; version=${4:?--previous REF VERSION}; fi
mkdir -p "$out"; out=$(cd "$out" && pwd)
work=$(mktemp -d /var/tmp/shardnet-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
src=$work/shardnet
mkdir -p "$src"
start=$(date +%s)
if [ -z "$ref" ] && git -C "$TOP" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$TOP" && git ls-files -z --cached --others --exclude-standard) |
        (cd "$TOP" && rsync -a --from0 --files-from=- ./ "$src/")
elif [ -z "$ref" ]; then
    # No git (scripts/in-chroot.sh's copy is the tree as git listed it,
    # plus what a build there made).
    rsync -a --exclude=/build --exclude=/dist --exclude='/build-*' --exclude=autom4te.cache \
        --exclude=node_modules --exclude=__pycache__ "$TOP/" "$src/"
else
    git -C "$TOP" archive "$ref" | tar -x -C "$src"
    rm -rf "$src/debian"; cp -a "$TOP/debian" "$src/debian"
    # The changelog says what this build is.
    { printf 'shardnet (%s) unstable; urgency=medium\n\n  * The broker of %s, for upgrade tests.\n\n -- %s\n\n' \
          "$version" "$ref" "$(sed -n 's/^ -- //p' "$TOP/debian/changelog" | head -1)"
      cat "$TOP/debian/changelog"; } > "$src/debian/changelog"
fi
cd "$src"
profiles=()
[ -z "$ref" ] || profiles=(-Ppkg.shardnet.broker-only,nocheck)   # one -P: a second replaces the first
DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-} parallel=$(nproc)${ref:+ nocheck}" \
    dpkg-buildpackage -b -uc -us "${profiles[@]}"
cd "$work"
changes=$(ls shardnet_*.changes)
rm -f "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo
cp ./*.deb ./*.changes ./*.buildinfo "$out/"
echo "make-deb.sh: built $(ls ./*.deb | wc -l) packages in $(( $(date +%s) - start )) s into $out"
[ -n "$ref" ] && exit 0
# No error, and no warning left unjustified (debian/*.lintian-overrides).
lintian --fail-on error,warning --info "$out/$changes"
echo "make-deb.sh: lintian: no error, no unjustified warning"
