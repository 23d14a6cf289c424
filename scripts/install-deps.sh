#!/bin/sh
# Installs the Debian packages ShardNet builds, tests and demos with, for
# this machine's release (Debian 12 bookworm or Debian 13 trixie), only
# those that are missing. Run as root; a no-op when all are there.
#
#   install-deps.sh [fuzz] [deb]              install what is missing
#   install-deps.sh --list RELEASE [fuzz] [deb]   print the names, install nothing
#
# fuzz: also clang and libFuzzer for `make fuzz`; deb: also what `make deb`
# builds and checks packages with. --list is what scripts/chroot.sh makes a
# clean chroot of a release with.
set -eu
list=""
if [ "${1:-}" = --list ]; then list=yes; release=${2:?--list needs a release}; shift 2
else release=$(. /etc/os-release && echo "${VERSION_CODENAME:-}"); fi
case "$release" in
    bookworm) boost=1.81 clang=15 ;;
    trixie) boost=1.83 clang=19 ;;
    *) echo "install-deps: Debian 12 (bookworm) or 13 (trixie) is needed, this is '${release}'" >&2; exit 1 ;;
esac
PKGS="build-essential autoconf automake libtool pkg-config
      slurmctld slurmd slurmdbd slurm-client libslurm-dev munge libmunge-dev mariadb-server
      libhwloc-dev hwloc libucx-dev ucx-utils
      libboost$boost-dev libboost-json$boost-dev doctest-dev
      libcurl4-openssl-dev libssl-dev nettle-dev libsqlite3-dev libyaml-cpp-dev
      nginx wrk hyperfine valgrind python3 python3-torch iproute2 curl openssl procps passwd util-linux
      chromium
      crun umoci skopeo busybox-static docker-registry"
# The API document's check (tests/openapi) runs its validator with node,
# installed there by npm: Debian's nodejs and npm, unless a node that has
# npm is there already (NodeSource's nodejs package brings its own npm).
if [ -n "$list" ] || ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then PKGS="$PKGS nodejs npm"; fi
for extra in "$@"; do
    case "$extra" in
        fuzz) PKGS="$PKGS clang-$clang libfuzzer-$clang-dev" ;;
        # systemd: systemd-analyze verify of the broker's unit.
        deb) PKGS="$PKGS debhelper dh-python dpkg-dev lintian fakeroot systemd" ;;
        # scripts/chroot.sh and in-chroot.sh: make a release's chroot, copy the tree in.
        chroot) PKGS="$PKGS mmdebstrap rsync" ;;
        *) echo "install-deps: unknown extra '$extra' (fuzz, deb or chroot)" >&2; exit 1 ;;
    esac
done
if [ -n "$list" ]; then echo $PKGS; exit 0; fi
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing Debian packages:$missing (run as root, or install them)" >&2
    exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Debian starts services on install; ours are started by the harness.
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
trap 'rm -f /usr/sbin/policy-rc.d' EXIT
apt-get install -y -qq --no-install-recommends $missing
