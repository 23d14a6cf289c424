#!/bin/bash
# The packages of dist/RELEASE installed as a site installs them: apt-get
# install ./...deb into a clean chroot of that release (scripts/chroot.sh,
# nothing but apt in it), then tests/packages/inside.sh checks them there.
# When dist/RELEASE/previous/ holds an earlier broker package (make-deb.sh
# --previous), it is installed first, its database filled, and the test
# upgrades from it.
#
#   tests/packages/t-install.sh RELEASE        (as root; `make install-test DIST=RELEASE`)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
release=${1:?usage: t-install.sh RELEASE}
dist=$TOP/dist/$release
ls "$dist"/shardnet-broker_*.deb >/dev/null 2>&1 || { echo "t-install: no packages in $dist (make deb DIST=$release)" >&2; exit 1; }
start=$(date +%s)
rc=0
"$TOP/scripts/chroot.sh" run "$release" clean --bind "$dist:/dist" --bind "$HERE:/t" --bind "$TOP/tests/fuzz/corpus/probe_descriptor:/descriptors" \
    -- /bin/bash /t/inside.sh || rc=$?
echo "t-install: $release: exit $rc after $(( $(date +%s) - start )) s"
exit "$rc"
