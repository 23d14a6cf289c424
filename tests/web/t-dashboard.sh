#!/bin/bash
# The dashboard in a real browser: Debian's chromium, headless, driven by
# puppeteer-core (dashboard.mjs) against a standalone broker filled through
# its API (runs, heartbeats, checkpoint commits) and, for what only Slurm
# makes happen (a FAULT on beta, attempt 2 placed on alpha, RECOVERED),
# through its database while it is stopped (seed_recovery.py). Checks
# sign-in, the runs table, a user's view of another's run, the capacity
# table, the timeline's lanes, points and lost work, a live event within
# 1 s, no console errors; screenshots in $OUT_DIR (default: a folder kept
# under the build's test-logs/). Run by `make check` with BROKER set.
set -uo pipefail
BROKER=${BROKER:?}
T=$(mktemp -d); BROKER_PID=""
trap '[ -n "$BROKER_PID" ] && kill -9 $BROKER_PID 2>/dev/null && wait $BROKER_PID 2>/dev/null; rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"
OUT_DIR=${OUT_DIR:-$PWD/test-logs/web-dashboard}
mkdir -p "$OUT_DIR"; rm -f "$OUT_DIR"/*.png
web_deps
# The logic first, without a browser: the SSE parser, the timeline's model.
node --test "$WEB_TESTS/units.test.mjs" > "$T/units.out" 2>&1 || { cat "$T/units.out"; fail "tests/web/units.test.mjs"; }
echo "ok: $(grep -E '^# (pass|fail)' "$T/units.out" | tr '\n' ' ')(units.test.mjs)"
# The broker signs receipts (doc/receipts.md) and computes checkpoint
# policies (doc/checkpoint-policy.md) with a prior of one node-hour.
openssl genpkey -algorithm ed25519 -out "$T/receipts.key" 2>/dev/null && chmod 600 "$T/receipts.key" || fail "openssl genpkey ed25519"
POLICY_CONF='"checkpoint_policy": {"mtbf_node_hours": 1}'
web_config "$T/broker.db" "$POLICY_CONF, \"receipts\": {\"key_file\": \"$T/receipts.key\"}"
web_start

# Three runs: two of daemon's, one of bin's. r-move heartbeats on beta,
# seals ckpt-100 and goes on to step 140 (lost when b1 dies).
for r in r-move:daemon r-daemon:daemon r-bin:bin; do api POST /v1/runs "{\"id\":\"${r%%:*}\",\"owner\":\"${r##*:}\",\"world_size\":2}"; done
hb() {  # RUN ATTEMPT NODE CLUSTER RANK STEP
    api POST /v1/heartbeats "{\"run\":\"$1\",\"attempt\":$2,\"node\":\"$3\",\"cluster\":\"$4\",\"interval\":600,\"state\":\"running\",\"ranks\":[{\"rank\":$5,\"step\":$6}]}"
}
commit() {  # RUN ATTEMPT NAME
    for rank in 0 1; do
        api POST "/v1/runs/$1/checkpoints/$3/commit" "{\"attempt\":$2,\"rank\":$rank,\"world_size\":2,\"files\":[{\"path\":\"rank-$rank.pt\",\"sha256\":\"$(sha "$3$rank")\",\"bytes\":1024}]}"
    done
}
hb r-move 1 b1 beta 0 90; hb r-move 1 b2 beta 1 90
hb r-daemon 1 d1 beta 0 5; hb r-bin 1 x1 alpha 0 7
sleep 0.5; commit r-move 1 ckpt-100
sleep 1.5; hb r-move 1 b1 beta 0 140; hb r-move 1 b2 beta 1 140
sleep 1.2   # the summary (1 s) keeps the workers' last heartbeat in the database
web_stop
/usr/bin/python3 "$WEB_TESTS/seed_recovery.py" "$T/broker.db" r-move > "$T/seeded" || fail "seed_recovery.py failed"
# The seeded events lie up to 6 s after the last real one: the broker comes
# back after them, so that the live event is the newest.
sleep "$(/usr/bin/python3 -c "import time; print(max(0, $(cat "$T/seeded") - time.time() + 0.2))")"
web_start
hb r-move 2 a1 alpha 0 150; hb r-move 2 a2 alpha 1 150

# r-auto lets the broker choose its interval (its agent sends "policy":0):
# two steps and a seal timed 0.5 s, then a summary (1 s) computes policy v1.
api POST /v1/runs '{"id":"r-auto","owner":"daemon","world_size":1}'
hba() {  # STEP
    api POST /v1/heartbeats "{\"run\":\"r-auto\",\"attempt\":1,\"node\":\"p1\",\"cluster\":\"alpha\",\"job\":31,\"interval\":600,\"state\":\"running\",\"policy\":0,\"ranks\":[{\"rank\":0,\"step\":$1}]}"
}
commit_auto() {  # NAME WRITE_SECONDS
    api POST "/v1/runs/r-auto/checkpoints/$1/commit" "{\"attempt\":1,\"rank\":0,\"world_size\":1,\"write_seconds\":$2,\"files\":[{\"path\":\"rank-0.pt\",\"sha256\":\"$(sha "$1")\",\"bytes\":2048}]}"
}
hba 1; sleep 0.4; hba 5
# Its agent's word on its one rank (an agent posts this once its trainer reports).
api POST /v1/runs/r-auto/ranks '{"attempt":1,"world_size":1,"node":"p1","ranks":[{"rank":0,"environment":{"python":"3.11.2","torch":"1.13.0"}}]}'
commit_auto ckpt-a1 0.5
for _ in $(seq 50); do
    curl -s -H "Authorization: Bearer admin-t" "http://127.0.0.1:$P/v1/runs/r-auto/policy" | grep -q '"in_force"' && break; sleep 0.1
done
curl -s -H "Authorization: Bearer admin-t" "http://127.0.0.1:$P/v1/runs/r-auto/policy" | grep -q '"in_force"' || fail "r-auto has no policy in force"
# The driver makes a new version while the page is open: two seals timed
# 30 s move the median write time (and the interval) well past the hysteresis.
cat > "$T/policy.sh" <<POLICY
#!/bin/sh
for c in ckpt-a2 ckpt-a3; do
curl -s -o /dev/null -H "Authorization: Bearer admin-t" --data-binary "{\"attempt\":1,\"rank\":0,\"world_size\":1,\"write_seconds\":30,\"files\":[{\"path\":\"rank-0.pt\",\"sha256\":\"$(sha a2)\",\"bytes\":2048}]}" \
    "http://127.0.0.1:$P/v1/runs/r-auto/checkpoints/\$c/commit"
done
POLICY
chmod +x "$T/policy.sh"

# r-fail: its batch script exits 3, a code its job calls fatal; its stderr
# tail is hostile markup, which the page must show as text.
api POST /v1/runs '{"id":"r-fail","owner":"daemon","world_size":1}'
api POST /v1/heartbeats '{"run":"r-fail","attempt":1,"node":"f1","cluster":"alpha","step":"batch","interval":600,"state":"ended","fatal_exit":[3],"stderr_tail":"loading shards\n<img src=x onerror=\"window.pwned=1\"><script>window.pwned=2</script>","ranks":[{"rank":0,"exit":{"code":3}}]}'

# The live event: posted by the driver while the run page is open.
cat > "$T/live.sh" <<LIVE
#!/bin/sh
for rank in 0 1; do
curl -s -o /dev/null -H "Authorization: Bearer admin-t" --data-binary "{\"attempt\":2,\"rank\":\$rank,\"world_size\":2,\"files\":[{\"path\":\"r\$rank\",\"sha256\":\"$(sha live)\",\"bytes\":1}]}" \
    "http://127.0.0.1:$P/v1/runs/r-move/checkpoints/ckpt-200/commit"
done
LIVE
chmod +x "$T/live.sh"
nice -n 15 node "$WEB_TESTS/dashboard.mjs" "http://127.0.0.1:$P" "$OUT_DIR" "$T/live.sh" "$T/policy.sh"
rc=$?
[ $rc = 0 ] && echo "ok: dashboard in chromium (screenshots in $OUT_DIR)" || echo "FAIL: dashboard in chromium (broker log: $(tail -3 "$T/broker.log"))"

# A receipt altered in the database while the broker is stopped (as
# tests/broker/t-receipts.sh alters one): the page says it fails and which checks.
web_stop
/usr/bin/python3 - "$T/broker.db" > "$T/altered" <<'PY' || fail "altering a receipt failed"
import base64, json, re, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
seq, env = db.execute("SELECT seq, envelope FROM receipts WHERE run = 'r-move' AND kind = 'checkpoint-sealed' ORDER BY seq LIMIT 1").fetchone()
e = json.loads(env)
st = base64.b64decode(e["payload"])
# The sealed files' total bytes (body.files, the file list's root) one more.
changed = re.sub(rb'("files":\{"merkle_root":"[0-9a-f]{64}","count":\d+,"bytes":)(\d+)', lambda m: m.group(1) + str(int(m.group(2)) + 1).encode(), st, 1)
assert changed != st, st[:300]
e["payload"] = base64.b64encode(changed).decode()
db.execute("UPDATE receipts SET envelope = ? WHERE run = 'r-move' AND seq = ?", (json.dumps(e, separators=(",", ":"), sort_keys=True), seq))
db.commit()
print(seq)
PY
web_start
nice -n 15 node "$WEB_TESTS/receipts.mjs" "http://127.0.0.1:$P" "$OUT_DIR" r-move "altered:$(cat "$T/altered")" || rc=1
# The same broker without "receipts" in its config: it signs none, and the page says so.
web_stop
web_config "$T/broker.db" "$POLICY_CONF"
web_start
nice -n 15 node "$WEB_TESTS/receipts.mjs" "http://127.0.0.1:$P" "$OUT_DIR" r-move off || rc=1
exit $rc
