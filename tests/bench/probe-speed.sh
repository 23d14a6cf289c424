#!/bin/bash
# shardnet-probe's wall time against lstopo-no-graphics on the same machine
# in the same run (target <= 1.1x), and from a saved XML (target <= 50 ms).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build}" && pwd)
PROBE=$BUILD/hwloc-probe/shardnet-probe
XML=$TOP/tests/fixtures/topologies/nvidiaDGX2.xml
RUNS=${RUNS:-20}
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
run() {  # NAME COMMAND
    hyperfine -N --style none --warmup 3 --runs "$RUNS" --export-json "$OUT/$1.json" "$2" >/dev/null 2>&1
    /usr/bin/python3 -c 'import json,sys,statistics as s
print("%.2f" % (s.median(json.load(open(sys.argv[1]))["results"][0]["times"]) * 1000))' "$OUT/$1.json"
}
# The live pair alternates over ROUNDS rounds (load from elsewhere drifts on a
# shared machine): medians of the rounds' medians, and of their ratios.
ROUNDS=${ROUNDS:-5}
ls_r=() pr_r=() ratios=()
for r in $(seq "$ROUNDS"); do
    l=$(run lstopo "lstopo-no-graphics --of xml $OUT/topo.xml --force")
    p=$(run probe "$PROBE")
    ls_r+=("$l"); pr_r+=("$p")
    ratios+=("$(/usr/bin/python3 -c "print('%.2f' % ($p / $l))")")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
lstopo=$(median "${ls_r[@]}"); probe=$(median "${pr_r[@]}"); live_ratio=$(median "${ratios[@]}")
probe_hw=$(run probe_hw "$PROBE --slurm-node")
SOURCE_DATE_EPOCH=1 "$PROBE" > "$OUT/live.json"
probe_ck=$(run probe_ck "$PROBE --check $OUT/live.json")
lstopo_x=$(run lstopo_x "lstopo-no-graphics -i $XML --if xml --of xml $OUT/copy.xml --force")
probe_x=$(run probe_x "$PROBE -i $XML")
ratio() { /usr/bin/python3 -c "print('%.2f' % ($1 / $2))"; }
printf '%-52s %9s %7s %8s\n' "median of $RUNS runs (live pair: of $ROUNDS rounds)" "ms" "ratio" "target"
printf '%-52s %9s %7s %8s\n' "lstopo-no-graphics --of xml (live)" "$lstopo" "1.00" "-"
printf '%-52s %9s %7s %8s\n' "shardnet-probe (live: hwloc+meminfo+UCX+NVML)" "$probe" "$live_ratio" "<=1.1"
printf '%-52s %s\n' "  ratio in each round" "${ratios[*]}"
printf '%-52s %9s %7s %8s\n' "shardnet-probe --slurm-node (live, no UCX)" "$probe_hw" "$(ratio "$probe_hw" "$lstopo")" "-"
printf '%-52s %9s %7s %8s\n' "shardnet-probe --check (health check, no UCX)" "$probe_ck" "$(ratio "$probe_ck" "$lstopo")" "-"
printf '%-52s %9s %7s %8s\n' "lstopo-no-graphics from saved DGX-2 XML" "$lstopo_x" "1.00" "-"
printf '%-52s %9s %7s %8s\n' "shardnet-probe -i saved DGX-2 XML" "$probe_x" "$(ratio "$probe_x" "$lstopo_x")" "<=50ms"
