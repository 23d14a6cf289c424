#!/bin/bash
# sbatch, srun and salloc list every --shardnet-* option.
. "$(dirname "$0")/lib.sh"
for cmd in sbatch srun salloc; do
    help=$(as_user alpha "$cmd" --help 2>&1)
    for opt in "--shardnet=\[RUN\]" --shardnet-ckpt-dir=DIR --shardnet-ckpt-every --shardnet-heartbeat=SECONDS \
               --shardnet-resume --shardnet-requeue --shardnet-max-attempts=N --shardnet-fatal-exit=CODES \
               "--shardnet-on-timeout=fail|requeue" --shardnet-spares=N "--shardnet-straggler=report|replace"; do
        grep -q -- "$opt" <<<"$help" || fail "$cmd --help lacks $opt"
    done
    ok "$cmd --help lists the options"
done
