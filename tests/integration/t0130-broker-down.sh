#!/bin/bash
# Broker port closed, broker refusing (503), broker accepting but never
# answering: --shardnet jobs start, run and end as without ShardNet.
. "$(dirname "$0")/lib.sh"
run_case() {  # NAME URL
    local name=$1 url=$2
    plugstack alpha broker=$url heartbeat_min=1 timeout_ms=1000
    local t0; t0=$(date +%s.%N)
    as_user alpha srun -N2 -n2 --shardnet --shardnet-heartbeat=1 bash -c 'echo 1 > $SHARDNET_PROGRESS; sleep 2; echo done' \
        > "$WORK/$name.out" 2>&1 || fail "$name: job failed: $(cat "$WORK/$name.out")"
    local dt; dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')
    [ "$(grep -c done "$WORK/$name.out")" = 2 ] || fail "$name: tasks did not finish"
    # A 2 s job; anything near the request deadline on top means we held it up.
    awk -v d="$dt" 'BEGIN{exit !(d < 3.5)}' || fail "$name: job took $dt s"
    j=$(as_user alpha sbatch --parsable -N1 -o /dev/null --shardnet --shardnet-heartbeat=1 --wrap 'sleep 1')
    wait_job alpha "$j" 30
    [ "$(job_state alpha "$j")" = COMPLETED ] || fail "$name: sbatch job ended $(job_state alpha "$j")"
    ok "$name: srun in ${dt}s, sbatch COMPLETED"
}
run_case closed "http://127.0.0.1:$(closed_port)"
start_receiver refuse; run_case refusing "http://127.0.0.1:$RX_PORT"
start_receiver blackhole; run_case blackholed "http://127.0.0.1:$RX_PORT"
