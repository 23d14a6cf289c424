#!/bin/bash
# Compares shardnet-probe --slurm-node with Slurm's own reading of the same
# saved topology (`HWLOC_XMLFILE=FILE slurmd -C`) on CPUs, Boards,
# SocketsPerBoard, CoresPerSocket and ThreadsPerCore.
# usage: slurmd-geometry.sh PROBE FILE.xml...   prints one line per topology,
# then "agree N of M"; exits 1 when any topology both can read disagrees
# or when none could be compared,
# 77 (skip) when slurmd is not installed.
set -uo pipefail
PROBE=$1; shift
SLURMD=${SLURMD:-$(command -v slurmd || echo /usr/sbin/slurmd)}
# A skip fails where everything must run (make check as root sets SHARDNET_NO_SKIP).
skip() { echo "SKIP: $*"; [ -z "${SHARDNET_NO_SKIP:-}" ] || { echo "FAIL: skipped under SHARDNET_NO_SKIP"; exit 1; }; exit 77; }
[ -x "$SLURMD" ] || { skip "slurmd not installed (Slurm's reading is the reference)"; }
geom() { grep -o 'CPUs=[0-9]* Boards=[0-9]* SocketsPerBoard=[0-9]* CoresPerSocket=[0-9]* ThreadsPerCore=[0-9]*' | head -1; }
agree=0 total=0 differ=0
for f in "$@"; do
    s=$(HWLOC_XMLFILE=$f timeout 30 "$SLURMD" -C 2>/dev/null | geom)
    [ -n "$s" ] || { echo "skip $(basename "$f"): slurmd cannot read it"; continue; }
    out=$("$PROBE" -i "$f" --host node1 --slurm-node 2>&1); rc=$?
    # A topology the probe refuses as broken (exit 2, t-probe.sh holds it
    # to that) is no comparison: slurmd of 24.11 then describes the live
    # machine instead of the file.
    if [ $rc = 2 ]; then echo "refused $(basename "$f"): probe exit 2 (slurmd: $s)"; continue; fi
    total=$((total + 1))
    p=$(geom <<<"$out")
    if [ "$s" = "$p" ]; then agree=$((agree + 1)); echo "same $(basename "$f"): $s"
    else differ=$((differ + 1)); echo "DIFF $(basename "$f"): slurmd '$s' probe '$p'"; fi
done
echo "agree $agree of $total"
# Nothing compared is no agreement: slurmd read none of the topologies.
[ $total -gt 0 ] || { echo "FAIL: slurmd read none of the $# topologies: nothing was compared"; exit 1; }
[ $differ = 0 ]
