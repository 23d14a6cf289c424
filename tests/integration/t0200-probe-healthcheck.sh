#!/bin/bash
# shardnet-probe --check as a Slurm health check on a real cluster: a node
# whose recorded descriptor still holds is left alone; one that lost a GPU
# is drained with the probe's reason.
. "$(dirname "$0")/lib.sh"
TOP=$(cd "$(dirname "$0")/../.." && pwd)
PROBE=$BUILD/hwloc-probe/shardnet-probe
"$PROBE" > "$WORK/node.json" || fail "probe failed"
run_check() { SLURM_CONF=$SCRATCH/alpha/slurm.conf SHARDNET_PROBE=$PROBE SHARDNET_NODE=alpha1 SHARDNET_DESCRIPTOR=$1 \
    "$TOP/etc/shardnet-healthcheck.sh"; }
run_check "$WORK/node.json" || fail "health check failed on an unchanged node"
[ -z "$(slurm alpha sinfo -h -R)" ] || fail "a node was drained: $(slurm alpha sinfo -h -R)"
ok "unchanged node: health check passes, nothing drained"
# The recorded node had an H200 this one lacks (it went missing).
/usr/bin/python3 - "$WORK/node.json" "$WORK/had-gpu.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["accelerators"].append({"vendor": "nvidia", "class": "H200-SXM", "pci_bus": "0000:99:00.0", "pci_id": "10de:2335",
                          "memory_bytes": None, "nvlinks_up": None})
json.dump(d, open(sys.argv[2], "w"))
PY
run_check "$WORK/had-gpu.json" && fail "health check passed with a GPU missing"
reason=$(slurm alpha sinfo -h -R -o '%E|%N')
[ "$reason" = "accelerator H200-SXM at 0000:99:00.0 is missing|alpha1" ] || fail "drain reason: '$reason'"
ok "missing GPU: alpha1 drained, reason '$reason'"
slurm alpha scontrol update NodeName=alpha1 State=RESUME
