#!/bin/bash
# Issue 43: three attacks of one unprivileged user (the attacker,
# shardtest2) on the broker and on another user's runs (the victim,
# shardtest), on real Slurm, each now defeated.
#  1. A held job whose name is not UTF-8 (Slurm 22.05 writes it raw into
#     `squeue --json`) must not blind the broker: the victim's run is
#     admitted, loses a node and RECOVERS, /v1/health stays ok, and what the
#     broker says of the run (API, events, its log) is valid UTF-8.
#  2. A peer's decision for run id llama-run, for the attacker, with
#     PATH/BASH_ENV pointing at the attacker's planted srun, that sbatch
#     refuses: answered 409, and nothing of it kept under the run id. The
#     victim's own llama-run then loses a node: attempt 2 runs with the
#     victim's environment, and the attacker's code never runs.
#  3. The attacker's own run, its agents stopped and its node's slurmd
#     flooded with connections (127.0.0.1 only): the broker may FAULT the run
#     (seen_by: broker, Slurm still has the node up), but must not hold the
#     node for other runs, neither during the flood nor after Slurm's
#     SlurmdTimeout has passed with the node up.
. "$(dirname "$0")/lib.sh"
ATTACKER=$OTHER_USER
VICTIM=$TEST_USER
VICTIM_UID=$(id -u "$VICTIM")
ATTACK=$WORK/attackerbin   # the attacker's planted tools, owned by the attacker
LOOT=$ATTACK/loot          # where they write whose uid they ran as
HELD=()                    # CLUSTER:JOB of the raw-named held jobs
FLOOD_PID_FILE=$WORK/flood.pid
STOPPED=()                 # agents this test stopped
cleanup() {
    [ -s "$FLOOD_PID_FILE" ] && kill "$(cat "$FLOOD_PID_FILE")" 2>/dev/null || true
    [ -n "${FLOOD_RUNNER:-}" ] && kill "$FLOOD_RUNNER" 2>/dev/null || true
    [ -n "${WATCH_PID:-}" ] && kill "$WATCH_PID" 2>/dev/null || true
    for p in "${STOPPED[@]:-}"; do [ -n "$p" ] && kill -CONT "$p" 2>/dev/null || true; done
    for h in "${HELD[@]:-}"; do [ -n "$h" ] && slurm "${h%%:*}" scancel "${h#*:}" 2>/dev/null || true; done
    local c
    for c in alpha beta; do
        slurm "$c" scancel -u "$ATTACKER" 2>/dev/null || true
        slurm "$c" scancel -u "$VICTIM" 2>/dev/null || true
    done
    cleanup_lib
}
trap cleanup EXIT

start_broker 600
# A peer broker's token that may submit for the attacker only (tokens[].users),
# added by a reload (SIGHUP) of the broker's config.
PEER_TOKEN=$(secret)
/usr/bin/python3 - "$WORK/broker.json" "$(printf %s "$PEER_TOKEN" | sha256sum | cut -d' ' -f1)" "$ATTACKER" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["tokens"].append({"name": "rogue-broker", "scope": "peer", "sha256": sys.argv[2], "users": [sys.argv[3]]})
json.dump(c, open(sys.argv[1], "w"))
PY
kill -HUP "$BROKER_PID"
for _ in $(seq 50); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $PEER_TOKEN" "$BROKER_URL/v1/clusters")" = 200 ] && break
    sleep 0.1
done
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $PEER_TOKEN" "$BROKER_URL/v1/clusters")" = 200 ] \
    || fail "the peer token was not taken by a reload: $(tail -3 "$WORK/broker.log")"
for c in alpha beta; do plugstack $c "broker=$BROKER_URL worker_key_file=$WORKER_KEY_FILE heartbeat_min=1"; done
cat > "$WORK/loop.sh" <<'SH'
#!/bin/bash
echo "attempt=$SHARDNET_ATTEMPT rank=$SHARDNET_RANK uid=$(id -u) node=$SLURMD_NODENAME VICTIM_VAR=${VICTIM_VAR-unset} PATH=$PATH BASH_ENV=${BASH_ENV-unset}"
for s in $(seq 1 600); do echo $s > "$SHARDNET_PROGRESS"; sleep 0.5; done
SH
chmod 755 "$WORK/loop.sh"
# placed RUN -> the last placement's cluster and job
placed() {
    broker_get "/v1/runs/$1/events" | /usr/bin/python3 -c 'import json,sys
p=[e["evidence"] for e in json.load(sys.stdin)["events"] if e["kind"] == "PLACEMENT" and "new_job" in e["evidence"]]
print(p[-1]["target"], p[-1]["new_job"])'
}
node_back() {  # CLUSTER NODE: slurmd again, until Slurm has it idle
    "$HARNESS/clusters.sh" start-node "$SCRATCH" "$1" "$2"
    for _ in $(seq 150); do slurm "$1" sinfo -h -n "$2" -o %T | grep -qx idle && return 0; sleep 0.2; done
    fail "$1/$2 not idle again: $(slurm "$1" sinfo -h -n "$2" -o %T)"
}
# utf8 WHAT: stdin is strict UTF-8 (and, unless WHAT ends in .log, JSON)
utf8() {
    /usr/bin/python3 -c '
import json, sys
b = sys.stdin.buffer.read()
try: t = b.decode("utf-8", "strict")
except UnicodeDecodeError as e: sys.exit("%s is not valid UTF-8: %s near %r" % (sys.argv[1], e, b[max(0, e.start - 40):e.end + 20]))
if not sys.argv[1].endswith(".log"): json.loads(t)' "$1"
}
health_ok() {
    local h; h=$(curl -s "$BROKER_URL/v1/health")
    /usr/bin/python3 -c 'import json,sys; v=json.loads(sys.argv[1]); sys.exit(0 if v.get("ok") is True and "slurm_unreadable" not in v else 1)' "$h" \
        || fail "GET /v1/health is not ok ($1): $h"
}

###############################################################################
# 1. A raw-byte job name does not blind the broker.
for c in alpha beta; do
    h=$(as_other "$c" sbatch --parsable --hold -J $'x\xffy' -o /dev/null --wrap true) || fail "the held job was not submitted on $c"
    HELD+=("$c:$h")
done
# Slurm does write the name raw (else this part proves nothing).
slurm beta squeue --json | /usr/bin/python3 -c '
import sys
b = sys.stdin.buffer.read()
assert b"x\xffy" in b, "squeue --json does not hold the raw name"
try: b.decode("utf-8"); sys.exit("squeue --json is valid UTF-8: the raw name is escaped here")
except UnicodeDecodeError: pass' || fail "squeue --json of beta does not carry the raw job name"
ok "held jobs of $ATTACKER named x\\xffy pending on alpha and beta (${HELD[*]}); squeue --json is not valid UTF-8"
j=$(as_user beta sbatch --parsable -N2 -n2 -o "$WORK/raw-%j.out" --shardnet=raw-run --shardnet-heartbeat=1 --wrap "srun $WORK/loop.sh")
wait_for 30 'v["state"] == "RUNNING" and sum(1 for w in v["workers"] if w["node"].endswith("/0")) == 2' /v1/runs/raw-run \
    || fail "raw-run was not admitted while the raw-named job is pending: $(broker_get /v1/runs/raw-run) $(grep -i 'cannot be read\|unreadable' "$WORK/broker.log" | tail -3)"
health_ok "raw-run admitted"
ok "raw-run of $VICTIM (job $j on beta1,beta2) admitted: RUNNING, 2 workers; /v1/health ok"
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
wait_for 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' /v1/runs/raw-run/events \
    || fail "raw-run did not recover: $(broker_get /v1/runs/raw-run/events)"
wait_for 10 'v["state"] == "RUNNING" and v["attempt"] == 2' /v1/runs/raw-run || fail "raw-run is not RUNNING at attempt 2: $(broker_get /v1/runs/raw-run)"
read -r c1 j1 <<<"$(placed raw-run)"
health_ok "raw-run recovered"
for p in /v1/runs/raw-run /v1/runs/raw-run/events /v1/runs /v1/health /v1/clusters; do
    broker_get "$p" | utf8 "GET $p" || fail "GET $p"
done
utf8 broker.log < "$WORK/broker.log" || fail "the broker's log"
! grep -q "Slurm's answer cannot be read" "$WORK/broker.log" || fail "the broker could not read Slurm: $(grep "cannot be read" "$WORK/broker.log" | head -2)"
broker_get /v1/runs/raw-run/events | /usr/bin/python3 -c '
import json, sys, time
for e in json.load(sys.stdin)["events"]:
    print("  ", time.strftime("%H:%M:%S", time.localtime(e["time"])), "%-10s" % e["kind"], e["cause"][:150])'
ok "beta2 killed: raw-run RECOVERED as attempt 2 ($c1 job $j1); health ok, its API output, events and the broker's log valid UTF-8"
slurm "$c1" scancel "$j1"; slurm beta scancel "$j" 2>/dev/null || true
node_back beta beta2

###############################################################################
# 2. A refused peer decision's environment never runs in another user's job.
mkdir -p "$ATTACK" "$LOOT"; chown -R "$ATTACKER": "$ATTACK"; chmod 755 "$ATTACK"; chmod 777 "$LOOT"
cat > "$ATTACK/srun" <<SH
#!/bin/sh
id > $LOOT/srun.\$(id -u)
exec /usr/bin/srun "\$@"
SH
cat > "$ATTACK/evil.sh" <<SH
id > $LOOT/bash_env.\$(id -u)
SH
chown "$ATTACKER": "$ATTACK/srun" "$ATTACK/evil.sh"; chmod 755 "$ATTACK/srun" "$ATTACK/evil.sh"
decision=$(/usr/bin/python3 - "$ATTACKER" "$ATTACK" <<'PY'
import json, sys
user, bin = sys.argv[1], sys.argv[2]
print(json.dumps({"id": "rogue:llama-run/attempt-2", "from_broker": "rogue-broker", "run": "llama-run", "from_attempt": 1, "to_attempt": 2,
    "spec": {"user": user, "uid": 0, "gid": 0, "nodes": 1, "tasks": 1, "workdir": "/tmp", "options": {"licenses": "nosuchlicense:1"}},
    "script": "#!/bin/sh\nsrun true\n", "owner": user, "resume": "latest", "manifest": "{}",
    "environment": ["PATH=%s:/usr/bin:/bin" % bin, "BASH_ENV=%s/evil.sh" % bin]}))
PY
)
code=$(curl -s -o "$WORK/decision.answer" -w '%{http_code}' -X POST -H "Authorization: Bearer $PEER_TOKEN" \
    -H 'Content-Type: application/json' "$BROKER_URL/v1/decisions" -d "$decision")
[ "$code" = 409 ] || fail "the decision with an option sbatch refuses was answered $code: $(cat "$WORK/decision.answer")"
grep -qi "license" "$WORK/decision.answer" || fail "the refusal does not say why (sbatch's license error): $(cat "$WORK/decision.answer")"
[ ! -e "$WORK/decisions/llama-run.environment" ] \
    || fail "the refused decision's environment is kept under llama-run: $(tr '\0' ' ' < "$WORK/decisions/llama-run.environment")"
! grep -rqs "attackerbin" "$WORK/decisions" || fail "the broker's private dir holds the attacker's PATH: $(grep -rls attackerbin "$WORK/decisions")"
others=$(for c in alpha beta; do slurm "$c" squeue -h -u "$ATTACKER" -o "$c:%i"; done |
    while read -r x; do [[ " ${HELD[*]:-} " == *" $x "* ]] || echo "$x"; done)
[ -z "$others" ] || fail "the refused decision left a job of $ATTACKER: $others"
ok "the peer's decision for llama-run ($ATTACKER, licenses nosuchlicense:1, PATH/BASH_ENV of $ATTACK) refused 409: $(head -c 160 "$WORK/decision.answer"); nothing kept in $WORK/decisions"

j=$(cd "$WORK" && runuser -u "$VICTIM" -- env SLURM_CONF="$SCRATCH/beta/slurm.conf" PATH=/usr/bin:/bin VICTIM_VAR=victim-own-42 \
    sbatch --parsable -N2 -n2 -o "$WORK/llama-%j.out" --shardnet=llama-run --shardnet-heartbeat=1 --wrap "srun $WORK/loop.sh")
wait_for 30 'v["state"] == "RUNNING" and sum(1 for w in v["workers"] if w["node"].endswith("/0")) == 2' /v1/runs/llama-run \
    || fail "llama-run never ran: $(broker_get /v1/runs/llama-run)"
for _ in $(seq 50); do [ -s "$WORK/decisions/llama-run.environment" ] && break; sleep 0.2; done
[ -s "$WORK/decisions/llama-run.environment" ] || fail "llama-run's environment was not kept: $(grep -i environment "$WORK/broker.log" | tail -3)"
origin=$(head -z -n1 "$WORK/decisions/llama-run.environment" | tr -d '\0')
[ "$origin" = "#origin uid=$VICTIM_UID cluster=beta job=$j" ] || fail "llama-run's kept environment is not attempt 1's ($j, uid $VICTIM_UID): $origin"
! grep -q attackerbin "$WORK/decisions/llama-run.environment" || fail "llama-run's kept environment holds the attacker's PATH"
grep -qa "VICTIM_VAR=victim-own-42" "$WORK/decisions/llama-run.environment" || fail "llama-run's kept environment lacks VICTIM_VAR"
ok "llama-run of $VICTIM runs (job $j); its kept environment is its own: $origin"
"$HARNESS/clusters.sh" kill-node "$SCRATCH" beta beta2
wait_for 60 'any(e["kind"] == "RECOVERED" for e in v["events"])' /v1/runs/llama-run/events \
    || fail "llama-run did not recover: $(broker_get /v1/runs/llama-run/events)"
read -r c2 j2 <<<"$(placed llama-run)"
for _ in $(seq 50); do [ "$(grep -c '^attempt=2 ' "$WORK/llama-$j.out" 2>/dev/null)" = 2 ] && break; sleep 0.2; done
grep '^attempt=' "$WORK/llama-$j.out" | sed 's/^/  /'
[ "$(grep -c "^attempt=2 rank=[01] uid=$VICTIM_UID node=.* VICTIM_VAR=victim-own-42 PATH=/usr/bin:/bin BASH_ENV=unset$" "$WORK/llama-$j.out")" = 2 ] \
    || fail "attempt 2 ($c2 job $j2) did not run with $VICTIM's own environment: $(grep '^attempt=2' "$WORK/llama-$j.out")"
[ -z "$(ls -A "$LOOT")" ] || fail "the attacker's planted code ran: $(for f in "$LOOT"/*; do echo "$f: $(cat "$f")"; done)"
! grep -q attackerbin "$WORK/decisions/llama-run.environment" 2>/dev/null || fail "the attacker's PATH reached the kept environment"
ok "beta2 killed: llama-run attempt 2 ($c2 job $j2) ran with VICTIM_VAR, PATH=/usr/bin:/bin, no BASH_ENV; $LOOT empty: no planted srun/BASH_ENV ran"
slurm "$c2" scancel "$j2"; slurm beta scancel "$j" 2>/dev/null || true
node_back beta beta2

###############################################################################
# 3. A connect flood with stopped agents does not quarantine a node that
#    Slurm still has up. beta1: parts 1 and 2 killed beta2, whose death
#    the broker may still be asking Slurm about.
FN=beta1
timeout_s=$(slurm beta scontrol show config | awk '$1 == "SlurmdTimeout" {print $3}')
[ -n "$timeout_s" ] || fail "no SlurmdTimeout in scontrol show config"
read -r addr port <<<"$(slurm beta scontrol -o show node $FN | tr ' ' '\n' | awk -F= '$1 == "NodeAddr" {a=$2} $1 == "Port" {p=$2} END {print a, p}')"
[ "$addr" = 127.0.0.1 ] && [ -n "$port" ] || fail "$FN's slurmd is not on 127.0.0.1 (NodeAddr=$addr Port=$port): no flood"
# The attacker's flood: COUNT connections to slurmd, none of them ever
# sending a byte, until the listen queue is full (a connect within 0.5 s
# fails: READY says "blinded"), held until RELEASE appears or HOLD seconds.
cat > "$WORK/flood.py" <<'PY'
import os, resource, socket, sys, time
host, port, count, hold, pid_file, ready, release = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), *sys.argv[5:8]
assert host == "127.0.0.1", "the flood stays on this host"
open(pid_file, "w").write(str(os.getpid()))
start = time.time()
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 64), hard))
socks = []
for _ in range(count):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    try: s.connect((host, port))
    except BlockingIOError: pass
    except OSError: s.close(); break
    socks.append(s)
state = "answered"
while time.time() - start < 6:
    p = socket.socket(); p.settimeout(0.5)   # on loopback a connect is at once, or its SYN was dropped
    try: p.connect((host, port))
    except OSError: state = "blinded"
    p.close()
    if state == "blinded": break
    time.sleep(0.2)
open(ready + ".tmp", "w").write("%s %d %.1f\n" % (state, len(socks), time.time() - start)); os.rename(ready + ".tmp", ready)
while time.time() - start < hold and not os.path.exists(release): time.sleep(0.1)
for s in socks: s.close()
print("flood: %d connections to %s:%d held %.1f s" % (len(socks), host, port, time.time() - start), flush=True)
PY
# What Slurm and the broker say of the node, every half second: Slurm's
# state and whether the broker holds it.
cat > "$WORK/watch.py" <<'PY'
import json, os, subprocess, sys, time, urllib.request
conf, node, url, token, out, stop = sys.argv[1:7]
env = dict(os.environ, SLURM_CONF=conf)
with open(out, "a") as f:
    while not os.path.exists(stop):
        t = time.time()
        try: state = [w for w in subprocess.run(["scontrol", "-o", "show", "node", node], env=env, capture_output=True, text=True,
                                                timeout=10).stdout.split() if w.startswith("State=")][0][6:]
        except Exception as e: state = "unknown(%s)" % type(e).__name__
        try:
            r = urllib.request.urlopen(urllib.request.Request(url + "/v1/bad-nodes", headers={"Authorization": "Bearer " + token}), timeout=10)
            held = any(n["cluster"] == "beta" and n["node"] == node and n["held"] for n in json.load(r)["nodes"])
        except Exception as e: held = "unknown(%s)" % type(e).__name__
        f.write("%.1f %s %s\n" % (t, state, held)); f.flush()
        time.sleep(max(0, 0.5 - (time.time() - t)))
PY
held_now() { broker_get /v1/bad-nodes | /usr/bin/python3 -c 'import json,sys
print(",".join("%s/%s" % (n["cluster"], n["node"]) for n in json.load(sys.stdin)["nodes"] if n["held"]))'; }
[ -z "$(held_now)" ] || fail "nodes held before the flood: $(held_now)"

j=$(as_other beta sbatch --parsable -N2 -n2 -o "$WORK/flood-%j.out" --shardnet=flood-run --shardnet-heartbeat=1 --wrap "srun $WORK/loop.sh")
wait_for 30 'v["state"] == "RUNNING" and sum(1 for w in v["workers"] if w["node"].endswith("/0")) == 2' /v1/runs/flood-run \
    || fail "flood-run never ran: $(broker_get /v1/runs/flood-run)"
ok "flood-run of $ATTACKER (job $j) runs on beta1,beta2; $FN's slurmd at $addr:$port; SlurmdTimeout $timeout_s s"
/usr/bin/python3 "$WORK/watch.py" "$SCRATCH/beta/slurm.conf" "$FN" "$BROKER_URL" "$ADMIN_TOKEN" "$WORK/watch.log" "$WORK/watch.stop" &
WATCH_PID=$!
(cd "$WORK" && exec runuser -u "$ATTACKER" -- /usr/bin/python3 "$WORK/flood.py" 127.0.0.1 "$port" 5000 9 "$FLOOD_PID_FILE" \
    "$WORK/flood.ready" "$WORK/flood.release") > "$WORK/flood.out" 2>&1 &
FLOOD_RUNNER=$!
for _ in $(seq 100); do [ -s "$WORK/flood.ready" ] && break; sleep 0.1; done
read -r blind nsocks took < "$WORK/flood.ready" || fail "the flood did not start: $(cat "$WORK/flood.out")"
[ "$blind" = blinded ] || fail "$nsocks connections did not keep $FN's slurmd from answering a connect: this part proves nothing"
t_flood=$(date +%s.%N)
agents=$(pgrep -u "$ATTACKER" -f "^$SCRATCH/lib/shardnet-agent" || true)
[ -n "$agents" ] || fail "no shardnet-agent of $ATTACKER to stop"
for p in $agents; do kill -STOP "$p" && STOPPED+=("$p"); done
ok "flood of $nsocks connections to $FN's slurmd: a connect fails after ${took}s; $ATTACKER's agents stopped (${STOPPED[*]})"
wait_for 15 'any(e["kind"] == "FAULT" and e["evidence"].get("slurmd_answers") is False for e in v["events"])' /v1/runs/flood-run/events \
    || fail "no FAULT with slurmd unreachable while $FN was flooded: $(broker_get /v1/runs/flood-run/events)"
touch "$WORK/flood.release"
t_fault=$(date +%s.%N)
during=$(held_now)
wait "$FLOOD_RUNNER" || true; FLOOD_RUNNER=""
cat "$WORK/flood.out"
[ -z "$during" ] || fail "the broker holds $during on its own word during the flood: $(broker_get /v1/bad-nodes)"
fault=$(broker_get /v1/runs/flood-run/events | /usr/bin/python3 -c 'import json,sys
print(json.dumps([e for e in json.load(sys.stdin)["events"] if e["kind"] == "FAULT" and e["evidence"].get("slurmd_answers") is False][0]))')
/usr/bin/python3 -c 'import json,sys
e = json.loads(sys.argv[1]); ev = e["evidence"]
assert ev.get("seen_by") == "broker", "seen_by %r" % ev.get("seen_by")
st = ev.get("slurm_node_state", "")
assert st and not any(x in st for x in ("DOWN", "FAIL", "NOT_RESPONDING", "*")), "Slurm said %r" % st' "$fault" || fail "the FAULT does not say the broker alone saw $FN down: $fault"
ok "FAULT $(/usr/bin/python3 -c 'import json,sys; e=json.loads(sys.argv[1]); print(repr(e["cause"]), "seen_by", e["evidence"]["seen_by"])' "$fault"); $FN not held (flood on)"
# Past SlurmdTimeout (and 20 s), the broker asking Slurm again every 5 s:
# Slurm keeps the node up, the broker never holds it.
while [ "$(awk -v a="$t_fault" -v b="$(date +%s.%N)" -v t="$timeout_s" 'BEGIN{print (b - a >= 20 && b - a >= t + 12)}')" != 1 ]; do sleep 0.5; done
after=$(held_now)
touch "$WORK/watch.stop"; wait "$WATCH_PID" || true; WATCH_PID=""
awk -v t0="$t_flood" '$2 != prev {printf "  %+6.1fs Slurm: %s, held by the broker: %s\n", $1 - t0, $2, $3} {prev = $2}' "$WORK/watch.log"
slurm_saw=$(awk '$2 ~ /DOWN|NOT_RESPONDING|FAIL|\*/ {print $2}' "$WORK/watch.log" | sort -u | tr '\n' ' ')
[ -z "$slurm_saw" ] || fail "Slurm itself marked $FN $slurm_saw during the flood: it was too large for this host (make it smaller); the broker may then hold the node on Slurm's word"
[ -z "$after" ] || fail "the broker holds $after after SlurmdTimeout with $FN up in Slurm: $(broker_get /v1/bad-nodes)"
! awk '$3 == "True"' "$WORK/watch.log" | grep -q . || fail "the broker held $FN at some point: $(awk '$3 == "True"' "$WORK/watch.log" | head -3)"
ok "$(awk -v a="$t_fault" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", b-a}') s after the FAULT (SlurmdTimeout $timeout_s s): Slurm kept $FN up throughout, the broker never held it ($(wc -l < "$WORK/watch.log") samples of GET /v1/bad-nodes)"
for p in "${STOPPED[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
STOPPED=()

###############################################################################
# Every job of this test ends; the clusters are left idle.
for h in "${HELD[@]}"; do slurm "${h%%:*}" scancel "${h#*:}"; done
HELD=()
for c in alpha beta; do slurm "$c" scancel -u "$ATTACKER" 2>/dev/null || true; slurm "$c" scancel -u "$VICTIM" 2>/dev/null || true; done
for c in alpha beta; do
    for _ in $(seq 300); do [ -z "$(slurm "$c" squeue -h -o %i)" ] && break; sleep 0.2; done
    for _ in $(seq 150); do [ "$(slurm "$c" sinfo -h -N -o %T | sort -u | tr '\n' ' ')" = "idle " ] && break; sleep 0.2; done
done
ok "held jobs cancelled; alpha and beta idle"
