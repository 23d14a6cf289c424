#!/bin/bash
# Federation across brokers (issue 5, tests a, d, f, g and the capacity
# search): a 2-node job on beta (broker B) with no spare loses a node; B has
# no local room and hands the decision to broker A, which resubmits the run
# on alpha from the last sealed checkpoint. On the way, the link B -> A
# loses A's answer (the decision arrived, its acknowledgement did not), and B
# is killed -9 and restarted: B resends, A applies the decision once.
. "$(dirname "$0")/lib.sh"
start_federation
write_trainer "$WORK/train.sh"

# Capacity: B answers for beta and, through the peer, for alpha; a silent
# peer is unknown, never available.
cap=$(fed_get B /v1/capacity)
/usr/bin/python3 - "$cap" <<'PY' || fail "capacity: $cap"
import json, sys
v = json.loads(sys.argv[1])
rows = {(r["broker"], r["cluster"]): r for r in v["clusters"]}
assert rows[("beta-broker", "beta")]["idle_nodes"] == 2, rows
assert rows[("alpha-broker", "alpha")]["idle_nodes"] == 2, rows
assert v["peers"] == [{"name": "alpha-broker", "status": "ok"}], v["peers"]
assert v["queried_at"] > 0
PY
proxy_mode refuse
cap=$(fed_get B /v1/capacity)
/usr/bin/python3 - "$cap" <<'PY' || fail "capacity with the peer cut off: $cap"
import json, sys
v = json.loads(sys.argv[1])
assert v["peers"][0]["status"] == "unknown", v["peers"]
assert not any(r["broker"] == "alpha-broker" for r in v["clusters"]), v["clusters"]
PY
proxy_mode pass
ok "capacity: beta and alpha (through the peer) idle 2/2; with the link cut alpha is unknown"

# The submitter's variable goes with the run to the peer (its kept
# environment travels with the decision).
j=$(as_user beta env FED_VAR=carried-7 sbatch --parsable -N2 -n2 -o "$WORK/fed-%j.out" --shardnet=fed-run --shardnet-heartbeat=1 \
    --wrap "echo \"fedvar=\${FED_VAR:-unset} batch attempt=\${SHARDNET_ATTEMPT:-1}\"; srun $WORK/train.sh")
# Two seals at least: the decision carries the newest two (the peer serves both).
fed_wait 30 'sum(e["kind"] == "SEALED" for e in v["events"]) >= 2' B /v1/runs/fed-run/events || fail "no two checkpoints sealed at B: $(fed_get B /v1/runs/fed-run/events)"
ok "fed-run runs on beta (job $j) and seals checkpoints at broker B"

# The decision will reach A, but A's answer will not reach B.
proxy_mode drop-replies
sealed_before=$(fed_get B /v1/runs/fed-run/checkpoints | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["checkpoints"][-1]["name"])')
t0=$(date +%s.%N)
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
fed_wait 40 'any(e["kind"] == "RECEIVED" for e in v["events"])' A /v1/runs/fed-run/events \
    || fail "A never received the decision: B: $(fed_get B /v1/runs/fed-run/events)"
sealed=$(fed_get B /v1/runs/fed-run/checkpoints | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["checkpoints"][-1]["name"])')
fed_get B /v1/runs/fed-run | grep -q '"state":"RECOVERING"' || fail "B should still be waiting for A's answer: $(fed_get B /v1/runs/fed-run)"
# B dies right after: its decision is on disk, unacknowledged.
sleep 1
fed_restart B
ok "decision applied at A while its answer was lost; B killed -9 and restarted"
proxy_mode pass
fed_wait 30 'v["state"] == "MOVED"' B /v1/runs/fed-run || fail "B never heard back: $(fed_get B /v1/runs/fed-run/events)"
fed_wait 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' A /v1/runs/fed-run/events \
    || fail "no RECOVERED at A: $(fed_get A /v1/runs/fed-run/events)"
dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
for b in B A; do
    echo "  broker $b:"
    fed_get $b /v1/runs/fed-run/events | /usr/bin/python3 -c '
import json, sys, time
for e in json.load(sys.stdin)["events"]:
    if e["kind"] != "SEALED": print("   ", time.strftime("%H:%M:%S", time.localtime(e["time"])), "%-10s" % e["kind"], e["cause"][:150])'
done
jobs=$(slurm alpha squeue -h -o '%i %k' | grep -c 'shardnet-decision:beta-broker:fed-run/attempt-2' || true)
[ "$jobs" = 1 ] || fail "expected exactly one replacement job on alpha, found $jobs: $(slurm alpha squeue -h -o '%i %k')"
new=$(slurm alpha squeue -h -o '%i %k' | awk '/shardnet-decision/ {print $1}')
ok "exactly one replacement job on alpha ($new); fault -> RECOVERED ${dt}s (with the lost answer and B's restart)"

# Attempt 2 resumed from the checkpoint B last sealed before the decision.
for _ in $(seq 50); do [ "$(grep -c 'attempt=2 cluster=alpha' "$WORK/fed-$j.out" 2>/dev/null)" = 2 ] && break; sleep 0.2; done
grep 'attempt=2' "$WORK/fed-$j.out" | sed 's/^/  /'
[ "$(grep -c 'attempt=2 cluster=alpha' "$WORK/fed-$j.out")" = 2 ] || fail "attempt 2 did not run 2 ranks on alpha: $(cat "$WORK/fed-$j.out")"
resume=$(grep -o "attempt=2 .*resume='[^']*'" "$WORK/fed-$j.out" | head -1 | sed "s/.*resume='\\([^']*\\)'/\\1/")
start=$(grep -o 'attempt=2 .* start=[0-9]*' "$WORK/fed-$j.out" | head -1 | sed 's/.*start=//')
case "$(basename "$resume")" in "$sealed_before"|"$sealed") ;; *) fail "attempt 2 resumed from '$resume', B had sealed $sealed" ;; esac
[ "$start" = "$((10#${resume##*-}))" ] || fail "attempt 2 started at step $start, not from $resume"
fed_wait 20 'any(e["kind"] == "SEALED" and e["evidence"].get("attempt") == 2 for e in v["events"])' A /v1/runs/fed-run/events \
    || fail "attempt 2 sealed nothing at A: $(fed_get A /v1/runs/fed-run/events)"
ok "attempt 2 resumed from $(basename "$resume") at step $start and seals its own checkpoints at A"
# The decision carried B's newest two seals: A serves their digests (a
# resume there is checked against them, never answered sealed_elsewhere),
# each file with its proof against B's root, to the run's own reader token
# at A. (Attempt 2's trainer reports the checkpoint it resumed from as its
# last committed one, so its agents commit it again: A answers that commit
# with the carried seal and seals nothing of that name itself.)
reader=$("$HARNESS/worker_token.py" --reader "$FED/a.worker.key" fed-run 2 2 "$(id -u "$TEST_USER")" "$new" alpha)
files_at_a() { curl -s --cacert "$FED/a.crt" -H "Authorization: Bearer $reader" "https://127.0.0.1:$A_PORT/v1/runs/fed-run/checkpoints/$1/files?rank=0"; }
named=$(basename "$resume")
before=$(fed_get B /v1/runs/fed-run/checkpoints | /usr/bin/python3 -c '
import json, sys
names = [c["name"] for c in json.load(sys.stdin)["checkpoints"]]
print(names[names.index(sys.argv[1]) - 1] if names.index(sys.argv[1]) > 0 else "")' "$named")
[ -n "$before" ] || fail "B sealed nothing before $named"
/usr/bin/python3 - "$(files_at_a "$named")" "$(fed_get B "/v1/runs/fed-run/checkpoints/$named/files?rank=0")" "$(files_at_a "$before")" <<'PY' \
    || fail "A does not serve the seals B's decision carried: $(files_at_a "$before")"
import json, sys
resumed, at_b, older = (json.loads(a) for a in sys.argv[1:4])
assert resumed["list"] == at_b["list"] and resumed["files"][0]["sha256"] == at_b["files"][0]["sha256"], (resumed, at_b)
assert resumed.get("carried") and resumed["sealed_by"] == "beta-broker" and resumed["receipt"] is None, resumed
assert older.get("carried") and older["sealed_by"] == "beta-broker" and older["list"]["count"] == 2, older
assert older["receipt"] is None or len(older["receipt"]["digest"]) == 64, older
for f in older["files"]:
    assert f["rank"] == 0 and len(f["inclusion"]) >= 1, f
PY
ok "A serves $before as B's decision carried it (carried, sealed by beta-broker, with proofs) to the run's reader token there; $named's root at A is B's"
grep -q 'fedvar=carried-7 batch attempt=2' "$WORK/fed-$j.out" || fail "attempt 2 at A did not get the submitter's FED_VAR: $(grep fedvar "$WORK/fed-$j.out")"
ok "the submitter's FED_VAR reached attempt 2 at broker A (the environment travels with the decision)"

# The broker the run left tells where it went and what became of it there
# (issue 27 E): GET /v1/runs/R at B carries A's story, and `shard show`
# at B (the user's first broker) says it, for the user who owns the run.
fed_wait 20 '"onward" in v["run"] and v["run"]["onward"]["status"] == "ok" and any(e["kind"] == "RECOVERED" for e in v["run"]["onward"].get("events", []))' \
    B /v1/views/runs/fed-run || fail "B's view of the moved run has no story from A: $(fed_get B /v1/views/runs/fed-run)"
/usr/bin/python3 - "$(fed_get B /v1/runs/fed-run)" "$(fed_get B /v1/views/runs/fed-run)" "$new" <<'PY' || fail "B's onward view"
import json, sys
v, view, new = json.loads(sys.argv[1]), json.loads(sys.argv[2])["run"], int(sys.argv[3])
o = v["onward"]
assert v["state"] == "MOVED", v["state"]
assert o["broker"] == "alpha-broker" and o["attempt"] == 2 and o["job"] == new, o
assert o["run"]["state"] in ("RUNNING", "RECOVERING"), o["run"]
assert o["run"]["cluster"] == "alpha" and o["run"]["job"] == new and o["run"]["attempt"] == 2, o["run"]
# GET /v1/runs lists the newest few of A's events; the dashboard's view all of them.
assert 0 < len(o["events"]) <= 5 and o["omitted"] >= 0 and len(view["onward"]["events"]) >= len(o["events"]), o
kinds = [e["kind"] for e in view["onward"]["events"]]
assert kinds[0] == "RECEIVED" and "RECOVERED" in kinds, kinds
# A's RECOVERED names attempt 2: the dashboard's recovery ends there.
assert any(e["kind"] == "RECOVERED" and e["evidence"].get("attempt") == 2 for e in view["onward"]["events"]), view["onward"]["events"]
PY
# A's story route is for its peers and admins: B's user token gets 403, a run
# that never crossed with the peer asking is 404 like a missing one.
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$FED/a.crt" -H "Authorization: Bearer $USER_TOKEN" "https://127.0.0.1:$A_PORT/v1/runs/fed-run/story")
[ "$code" = 403 ] || fail "a user's token read a story at A: HTTP $code"
show=$(shard show fed-run) || fail "shard show at B failed: $show"
echo "$show" | sed 's/^/  | /'
grep -q "^moved to broker alpha-broker: attempt 2 as job $new$" <<<"$show" || fail "shard show at B does not say where the run went"
grep -Eq "^  there: (RUNNING|RECOVERED), attempt 2 on alpha, job $new" <<<"$show" || fail "shard show at B does not say what became of it"
ok "B (the broker it left) follows the run: onward view from A (state, cluster, job $new, RECOVERED) in GET /v1/runs and shard show"

# Test f: the old attempt's worker comes back, with the token it held.
# (Its step's token: 2 ranks, the test user, job $j on beta.)
old_token=$("$HARNESS/worker_token.py" "$FED/b.worker.key" fed-run 1 2 "$(id -u "$TEST_USER")" "$j" beta)
post() { curl -s -o /dev/null -w '%{http_code}' --cacert "$FED/b.crt" -X POST -H "Authorization: Bearer $old_token" "https://127.0.0.1:$B_PORT$1" -d "$2"; }
hb=$(post /v1/heartbeats '{"run":"fed-run","attempt":1,"node":"beta1","ranks":[]}')
ck=$(post /v1/runs/fed-run/checkpoints/checkpoint-9999/commit '{"attempt":1,"rank":0,"world_size":2,"files":[{"path":"a","sha256":"00","bytes":1}]}')
[ "$hb $ck" = "409 409" ] && ok "the old attempt's worker is refused at B: heartbeat 409, commit 409" || fail "old attempt: heartbeat $hb, commit $ck"
slurm alpha scancel "$new"; slurm beta scancel "$j"
"$HARNESS/clusters.sh" start-node "$SCRATCH" beta beta2
for _ in $(seq 150); do slurm beta sinfo -h -n beta2 -o %T | grep -qx idle && break; sleep 0.2; done
# A peer's decision never runs a job as root on this side.
body='{"id":"evil-1","from_broker":"beta-broker","run":"evil","to_attempt":2,"script":"#!/bin/bash\nid\n","resume":"latest",
       "spec":{"user":"root","uid":"0","gid":"0","nodes":1,"tasks":1}}'
ans=$(curl -s --cacert "$FED/a.crt" -H "Authorization: Bearer $(cat "$FED/b-to-a.token")" -X POST -d "$body" "https://127.0.0.1:$A_PORT/v1/decisions")
grep -q "refusing to submit as root" <<<"$ans" || fail "a root decision was not refused: $ans"
[ -z "$(slurm alpha squeue -h -u root)" ] || fail "a job runs as root on alpha"
ok "a peer's decision to run as root is refused (409), nothing submitted"
