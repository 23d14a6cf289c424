#!/bin/bash
# Issue 5 test e: the run needs InfiniBand (its manifest) and 2 nodes; its
# nodes on beta were probed with an InfiniBand HCA, alpha's without. When
# beta loses a node with no spare, nothing compatible is left: no job is
# submitted anywhere, and the events name each reason.
. "$(dirname "$0")/lib.sh"
start_federation
FIX=$(cd "$(dirname "$0")/../fixtures/topologies" && pwd)
publish() {  # BROKER NODE XML
    "$BUILD/hwloc-probe/shardnet-probe" -i "$3" --host "$2" > "$WORK/$2.json"
    curl -sf --cacert "$(fed_crt "$1")" -H "Authorization: Bearer $ADMIN_TOKEN" -X POST --data-binary @"$WORK/$2.json" \
        "https://127.0.0.1:$(fed_port "$1")/v1/nodes" > /dev/null || fail "publishing $2 to broker $1"
}
for n in beta1 beta2; do publish B $n "$FIX/24em64t-2n6c2t-pci.xml"; done
for n in alpha1 alpha2; do publish A $n "$FIX/24em64t-minus-ib.xml"; done
curl -sf --cacert "$FED/b.crt" -H "Authorization: Bearer $ADMIN_TOKEN" -X POST \
    -d '{"id": "ib-run", "manifest": {"requires": {"fabric": "infiniband", "memory_gb": 4}}}' \
    "https://127.0.0.1:$B_PORT/v1/runs" > /dev/null || fail "creating ib-run at B"
cap=$(fed_get B "/v1/capacity?fabric=infiniband")
/usr/bin/python3 - "$cap" <<'PY' || fail "capacity?fabric=infiniband: $cap"
import json, sys
v = json.loads(sys.argv[1])
clusters = {(r["broker"], r["cluster"]) for r in v["clusters"]}
assert ("beta-broker", "beta") in clusters and ("alpha-broker", "alpha") not in clusters, clusters
PY
ok "capacity with fabric=infiniband: beta only (alpha's descriptors have no InfiniBand)"
cat > "$WORK/train.sh" <<'SH'
#!/bin/bash
for s in $(seq 1 400); do echo $s > "$SHARDNET_PROGRESS"; sleep 0.25; done
SH
chmod 755 "$WORK/train.sh"
j=$(as_user beta sbatch --parsable -N2 -n2 -o "$WORK/ib-%j.out" --shardnet=ib-run --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
# Both nodes' step workers must have reported before one dies: a node lost
# before its first heartbeat is not a worker the broker knows.
fed_wait 30 'v["state"] == "RUNNING" and len([w for w in v["workers"] if w["role"] == "step"]) == 2' B /v1/runs/ib-run \
    || fail "ib-run never ran on 2 nodes: $(fed_get B /v1/runs/ib-run)"
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
fed_wait 40 'any(e["kind"] == "PLACEMENT" and e["cause"].startswith("no placement") for e in v["events"])' B /v1/runs/ib-run/events \
    || fail "no failed PLACEMENT at B: $(fed_get B /v1/runs/ib-run/events)"
fed_get B /v1/runs/ib-run/events | /usr/bin/python3 -c '
import json, sys, time
for e in json.load(sys.stdin)["events"]:
    print("   ", time.strftime("%H:%M:%S", time.localtime(e["time"])), "%-10s" % e["kind"], e["cause"][:300])'
# The peer's refusal names its reasons; then B's own clusters, queues too,
# are tried again (beta's one healthy node cannot take 2): the run waits.
placements=$(fed_get B /v1/runs/ib-run/events | /usr/bin/python3 -c 'import json,sys; [print(e["cause"]) for e in json.load(sys.stdin)["events"] if e["kind"] == "PLACEMENT"]')
why=$(grep "broker alpha-broker refused (" <<<"$placements" | tail -1)
grep -q "beta rejected: 0 of 0 idle node(s) fit, 2 needed" <<<"$why" || fail "beta's reason missing: $why"
grep -q "alpha rejected: 0 of 2 idle node(s) fit, 2 needed; 2: no infiniband fabric" <<<"$why" || fail "alpha's reason missing: $why"
tail -1 <<<"$placements" | grep -q "1 counting those in use (every peer broker refused); tried again every 30 s" \
    || fail "after the refusal, B's own queue not tried, or not said: $(tail -1 <<<"$placements")"
[ -z "$(slurm alpha squeue -h)" ] || fail "a job was submitted on alpha: $(slurm alpha squeue -h)"
fed_get B /v1/runs/ib-run | grep -q '"state":"DEGRADED"' || fail "ib-run should be DEGRADED: $(fed_get B /v1/runs/ib-run)"
ok "no compatible capacity: nothing submitted, run DEGRADED, each reason named"
slurm beta scancel "$j"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2
for _ in $(seq 150); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done
