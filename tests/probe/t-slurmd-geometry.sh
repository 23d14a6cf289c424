#!/bin/bash
# --slurm-node's CPU geometry agrees with `HWLOC_XMLFILE=F slurmd -C` on
# every fixture topology slurmd can read. Run by `make check`.
set -uo pipefail
exec "$(dirname "$0")/slurmd-geometry.sh" "${PROBE:?}" "${FIXTURES:?}"/topologies/*.xml
