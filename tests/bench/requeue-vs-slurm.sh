#!/bin/bash
# Seconds from a fault to the run working again, ShardNet against Slurm's
# own --requeue, on the same harness with the same SlurmdTimeout (10 s), in
# the same run:
#   1. 1-node job, its node killed -9, a spare node on the same cluster:
#      ShardNet (broker B, tier 1) -> RECOVERED; Slurm --requeue -> the job
#      RUNNING again on the spare.
#   2. 2-node job on beta, a node killed, no spare: ShardNet hands the run
#      to broker A (alpha) -> RECOVERED. (Slurm cannot: no room on beta.)
#   3. all of beta killed: ShardNet resumes on alpha -> RECOVERED.
# Target: <= detection deadline (3 x 1 s) + 3 s, and >= 10x faster than Slurm.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
SCRATCH=$(mktemp -d /tmp/shardnet-bench.XXXXXX); chmod 755 "$SCRATCH"
trap '"$TOP/tests/harness/clusters.sh" down "$SCRATCH"' EXIT
"$TOP/tests/harness/clusters.sh" up "$SCRATCH" "$BUILD" alpha beta || exit 1
export SCRATCH BUILD
. "$TOP/tests/integration/lib.sh"
trap 'cleanup_lib; "$TOP/tests/harness/clusters.sh" down "$SCRATCH"' EXIT
start_federation
write_trainer "$WORK/train.sh"
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b-a}'; }
recovered_at() {  # BROKER RUN
    fed_get "$1" "/v1/runs/$2/events" | /usr/bin/python3 -c 'import json,sys
print([e["time"] for e in json.load(sys.stdin)["events"] if e["kind"] == "RECOVERED"][0])'
}

# 1a. ShardNet, 1 node, same cluster.
j=$(as_user beta sbatch --parsable -N1 -o "$WORK/b1-%j.out" --shardnet=bench-1 --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
fed_wait 30 'any(e["kind"] == "SEALED" for e in v["events"])' B /v1/runs/bench-1/events || fail "bench-1 did not start"
victim=$(slurm beta squeue -h -j "$j" -o %N)
t0=$(now); "$HARNESS/clusters.sh" kill-node "$SCRATCH" beta "$victim"
fed_wait 90 'any(e["kind"] == "RECOVERED" for e in v["events"])' B /v1/runs/bench-1/events || fail "bench-1 not recovered"
s1=$(secs "$t0" "$(recovered_at B bench-1)")
slurm beta scancel -u "$TEST_USER"; "$HARNESS/clusters.sh" start-node "$SCRATCH" beta "$victim"

# 1b. Slurm --requeue, 1 node, same cluster (no ShardNet).
j=$(as_user alpha sbatch --parsable -N1 --requeue -o /dev/null --wrap "sleep 600")
for _ in $(seq 100); do [ "$(job_state alpha "$j")" = RUNNING ] && break; sleep 0.2; done
victim=$(slurm alpha squeue -h -j "$j" -o %N)
t0=$(now); "$HARNESS/clusters.sh" kill-node "$SCRATCH" alpha "$victim"
sleep 2
for _ in $(seq 1500); do
    st=$(job_state alpha "$j"); node=$(slurm alpha squeue -h -j "$j" -o %N)
    [ "$st" = RUNNING ] && [ "$node" != "$victim" ] && break
    sleep 0.2
done
s1_slurm=$(secs "$t0" "$(now)")
[ "$st" = RUNNING ] || s1_slurm=">300"
slurm alpha scancel "$j"; "$HARNESS/clusters.sh" start-node "$SCRATCH" alpha "$victim"
for c in alpha beta; do for _ in $(seq 150); do [ "$(slurm $c sinfo -h -o %T | sort -u | tr '\n' ' ')" = "idle " ] && break; sleep 0.2; done; done

# 2. ShardNet, 2 nodes, no spare on beta: through broker A to alpha.
j=$(as_user beta sbatch --parsable -N2 -n2 -o "$WORK/b2-%j.out" --shardnet=bench-2 --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
fed_wait 30 'any(e["kind"] == "SEALED" for e in v["events"])' B /v1/runs/bench-2/events || fail "bench-2 did not start"
t0=$(now); "$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
fed_wait 90 'any(e["kind"] == "RECOVERED" for e in v["events"])' A /v1/runs/bench-2/events || fail "bench-2 not recovered"
s2=$(secs "$t0" "$(recovered_at A bench-2)")
slurm alpha scancel -u "$TEST_USER"; slurm beta scancel -u "$TEST_USER"; "$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2
for c in alpha beta; do for _ in $(seq 150); do [ "$(slurm $c sinfo -h -o %T | sort -u | tr '\n' ' ')" = "idle " ] && break; sleep 0.2; done; done

# 3. ShardNet, all of beta down.
j=$(as_user beta sbatch --parsable -N2 -n2 -o "$WORK/b3-%j.out" --shardnet=bench-3 --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
fed_wait 30 'any(e["kind"] == "SEALED" for e in v["events"])' B /v1/runs/bench-3/events || fail "bench-3 did not start"
t0=$(now); "$HARNESS/clusters.sh" kill-cluster "$SCRATCH" beta
fed_wait 90 'any(e["kind"] == "RECOVERED" for e in v["events"])' A /v1/runs/bench-3/events || fail "bench-3 not recovered"
s3=$(secs "$t0" "$(recovered_at A bench-3)")
slurm alpha scancel -u "$TEST_USER"

ratio() { /usr/bin/python3 -c "import sys; a, b = sys.argv[1:]; print('%.1fx' % (float(b) / float(a)) if b[0] != '>' else '>%.0fx' % (300 / float(a)))" "$1" "$2"; }
printf '%-66s %10s %10s\n' "fault (kill -9) -> working again, SlurmdTimeout=10, heartbeat 1 s" "seconds" "vs Slurm"
printf '%-66s %10s %10s\n' "Slurm --requeue, 1 node, spare on the same cluster" "$s1_slurm" "1.0x"
printf '%-66s %10s %10s\n' "ShardNet, 1 node, spare on the same cluster (RECOVERED)" "$s1" "$(ratio "$s1" "$s1_slurm")"
printf '%-66s %10s %10s\n' "ShardNet, 2 nodes, no spare: to alpha through the peer broker" "$s2" "$(ratio "$s2" "$s1_slurm")"
printf '%-66s %10s %10s\n' "ShardNet, all of beta down: to alpha through the peer broker" "$s3" "$(ratio "$s3" "$s1_slurm")"
echo "target: <= 6 s (3 s detection + 3 s) and >= 10x faster than Slurm's requeue"
