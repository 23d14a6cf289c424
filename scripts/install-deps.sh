#!/bin/sh
# Installs the Debian 12 packages ShardNet builds, tests and demos with,
# only those that are missing. Run as root; a no-op when all are there.
# With the argument fuzz, also clang-15 and libFuzzer for `make fuzz`.
set -eu
PKGS="build-essential autoconf automake libtool pkg-config
      slurmctld slurmd slurmdbd slurm-client libslurm-dev munge libmunge-dev mariadb-server
      libhwloc-dev hwloc libucx-dev ucx-utils
      libboost1.81-dev libboost-json1.81-dev doctest-dev
      libcurl4-openssl-dev libssl-dev nettle-dev libsqlite3-dev libyaml-cpp-dev
      nginx wrk hyperfine valgrind python3 python3-torch iproute2 curl openssl procps passwd util-linux
      chromium"
# The API document's check (tests/openapi) runs its validator with node,
# installed there by npm: Debian's nodejs and npm, unless a node that has
# npm is there already (NodeSource's nodejs package brings its own npm).
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
# `install-deps.sh fuzz`: also what `make fuzz` builds with.
[ "${1:-}" = fuzz ] && PKGS="$PKGS clang-15 libfuzzer-15-dev"
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
