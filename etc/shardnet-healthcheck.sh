#!/bin/sh
# Slurm HealthCheckProgram (it takes no arguments): drains this node with
# shardnet-probe's one-line reason when a GPU, NIC or memory recorded in the
# node's descriptor went missing or degraded.
#   slurm.conf: HealthCheckProgram=/usr/libexec/shardnet/shardnet-healthcheck.sh
#               HealthCheckInterval=300
DESCRIPTOR=${SHARDNET_DESCRIPTOR:-/var/lib/shardnet/node.json}
NODE=${SHARDNET_NODE:-$(hostname -s)}
[ -r "$DESCRIPTOR" ] || exit 0   # nothing recorded yet: nothing to compare
if ! reason=$("${SHARDNET_PROBE:-/usr/sbin/shardnet-probe}" --check "$DESCRIPTOR"); then
    scontrol update NodeName="$NODE" State=DRAIN Reason="${reason#shardnet-probe: }"
    exit 1
fi
