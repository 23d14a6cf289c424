#!/bin/bash
# A hostile peer (issue 13 item 8): broker B's only peer is
# tests/harness/hostile_peer.py over TLS, answering with the wrong shapes
# and types. A 2-node job on beta loses a node; B has no local room and
# hands the decision to the peer, whose answers cannot be read. B must
# stay up (also across a kill -9), list the peer unknown in its capacity,
# and end the decision: failed, a PLACEMENT event naming the field, the
# run DEGRADED, nothing sent again after a restart.
. "$(dirname "$0")/lib.sh"
start_federation
write_trainer "$WORK/train.sh"

echo "capacity=clusters-mixed decisions=job-string" > "$FED/hp.mode"
/usr/bin/python3 "$HARNESS/hostile_peer.py" --port-file "$FED/hp.port" --mode-file "$FED/hp.mode" --log "$FED/hp.log" \
    --cert "$FED/a.crt" --key "$FED/a.key" &
RX_PIDS+=($!)
for _ in $(seq 50); do [ -s "$FED/hp.port" ] && break; sleep 0.1; done
[ -s "$FED/hp.port" ] || fail "the hostile peer did not start"
/usr/bin/python3 - "$FED/b.json" "https://127.0.0.1:$(cat "$FED/hp.port")" <<'PY'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["peers"][0]["name"], cfg["peers"][0]["url"] = "hostile", sys.argv[2]
json.dump(cfg, open(sys.argv[1], "w"))
PY
fed_restart B

cap=$(fed_get B /v1/capacity) || fail "capacity at B failed"
/usr/bin/python3 - "$cap" <<'PY' || fail "capacity with a hostile peer: $cap"
import json, sys
v = json.loads(sys.argv[1])
assert v["peers"] == [{"name": "hostile", "status": "unknown", "reason": "bad answer: clusters[0]: expected an object"}], v["peers"]
assert {r["broker"] for r in v["clusters"]} == {"beta-broker"}, v["clusters"]
PY
ok "capacity at B: beta, and the hostile peer unknown (clusters[0]: expected an object)"

j=$(as_user beta sbatch --parsable -N2 -n2 -o "$WORK/hp-%j.out" --shardnet=hp-run --shardnet-heartbeat=1 --wrap "srun $WORK/train.sh")
fed_wait 30 'any(e["kind"] == "SEALED" for e in v["events"])' B /v1/runs/hp-run/events || fail "no checkpoint sealed at B: $(fed_get B /v1/runs/hp-run/events)"
ok "hp-run runs on beta (job $j)"
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
fed_wait 40 'any(e["kind"] == "DELIVERY" for e in v["events"])' B /v1/runs/hp-run/events \
    || fail "no DELIVERY event at B: $(fed_get B /v1/runs/hp-run/events)"
fed_restart B
ok "the decision went to the hostile peer, its answer was refused; B killed -9 and restarted"
fed_wait 40 'any(e["kind"] == "PLACEMENT" and "the decision ends" in e["cause"] and e["evidence"]["field"] == "accepted" for e in v["events"])' \
    B /v1/runs/hp-run/events || fail "the decision did not end: $(fed_get B /v1/runs/hp-run/events)"
fed_wait 10 'v["state"] == "DEGRADED"' B /v1/runs/hp-run || fail "hp-run is not DEGRADED: $(fed_get B /v1/runs/hp-run)"
fed_get B /v1/runs/hp-run/events | /usr/bin/python3 -c '
import json, sys, time
for e in json.load(sys.stdin)["events"]:
    if e["kind"] != "SEALED": print("   ", time.strftime("%H:%M:%S", time.localtime(e["time"])), "%-10s" % e["kind"], e["cause"][:160])'
ok "the decision ended after 5 unreadable answers: PLACEMENT names the field, hp-run DEGRADED"

sent=$(grep -c '"decisions"' "$FED/hp.log")
fed_restart B
sleep 2
[ "$(grep -c '"decisions"' "$FED/hp.log")" = "$sent" ] || fail "the ended decision was sent again after a restart"
fed_get B /v1/health >/dev/null || fail "B is down"
ok "restarted again: B up, the ended decision not sent again"
slurm beta scancel "$j" || true
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2
for _ in $(seq 150); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done
