#!/bin/bash
# Signed receipts on a real broker process (issue 19): kill -9 while commits
# seal, again and again; after each restart every seal has its receipt and
# every receipt its seal (both or neither), `shard verify RUN` passes with
# the pinned key, the log holds every receipt, and its head extends the one
# signed before the kill (consistency proof); a SIGHUP with a new key file
# rotates the signing key, the old one listed as retired. Run by `make check` with
# BROKER and SHARD set; no Slurm.
set -uo pipefail
BROKER=${BROKER:?}; SHARD=$(realpath "${SHARD:?}")
T=$(mktemp -d); PID=""
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null && wait $PID 2>/dev/null; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
hash() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
PY=/usr/bin/python3
ROUNDS=${RECEIPT_KILL_ROUNDS:-5}

openssl genpkey -algorithm ed25519 -out "$T/receipts.key" 2>/dev/null && chmod 600 "$T/receipts.key"
openssl pkey -in "$T/receipts.key" -pubout -out "$T/receipts.pub"
cat > "$T/broker.json" <<CONF
{"listen": "127.0.0.1:0", "plain_http": true, "database": "$T/broker.db", "broker_name": "solo",
 "receipts": {"key_file": "$T/receipts.key"},
 "tokens": [{"name": "ops", "scope": "admin", "sha256": "$(hash admin-t)"}]}
CONF
start() {
    rm -f "$T/port"
    "$BROKER" --config "$T/broker.json" --port-file "$T/port" 2>> "$T/log" &
    PID=$!
    for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
    P=$(cat "$T/port")
}
get() { curl -sf -H "Authorization: Bearer admin-t" "http://127.0.0.1:$P$1"; }
# The log heads the CLI keeps per broker go to this test's directory.
shard() { SHARD_BROKER="http://127.0.0.1:$P" SHARD_TOKEN=admin-t XDG_STATE_HOME="$T/state" "$SHARD" "$@"; }

# A key readable by others is refused at start, naming the file.
chmod 644 "$T/receipts.key"
"$BROKER" --config "$T/broker.json" --check-config 2> "$T/err"; rc=$?
[ $rc != 0 ] && grep -q "receipts.key_file" "$T/err" && ok "a group/other-readable receipts key is refused: $(head -c 160 "$T/err")" \
    || fail "receipts key with mode 644 accepted (rc $rc): $(cat "$T/err")"
chmod 600 "$T/receipts.key"

start
curl -sf -X POST -H "Authorization: Bearer admin-t" "http://127.0.0.1:$P/v1/heartbeats" --data-binary \
    '{"run":"r1","attempt":1,"node":"n1","step":"batch","cluster":"c1","job":7,"interval":1,"state":"running","ranks":[{"rank":0,"step":1}]}' \
    || fail "first heartbeat"
[ "$(curl -s "http://127.0.0.1:$P/v1/keys" | $PY -c 'import json,sys; print(json.load(sys.stdin)["keys"][0]["status"])')" = current ] \
    && ok "GET /v1/keys without a token: the current key" || fail "GET /v1/keys"

# Commits from 4 clients, each sealing at once (world 1), until the broker goes.
commit_burst() {  # ROUND
    $PY - "$P" "$1" <<'PY'
import hashlib, http.client, json, sys, threading
port, rnd = int(sys.argv[1]), sys.argv[2]
def worker(w):
    for i in range(100000):
        name = "ck-%s-%d-%d" % (rnd, w, i)
        path = "rank-0/%s.pt" % name
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("POST", "/v1/runs/r1/checkpoints/%s/commit" % name,
                      json.dumps({"attempt": 1, "rank": 0, "world_size": 1,
                                  "files": [{"path": path, "sha256": hashlib.sha256(path.encode()).hexdigest(), "bytes": 10}]}),
                      {"Authorization": "Bearer admin-t"})
            c.getresponse().read()
        except Exception:
            return
ts = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
PY
}
# Seals and their receipts agree in the database, and the log holds exactly the receipts.
both_or_neither() {
    $PY - "$T/broker.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
seals = {r[0] for r in db.execute("SELECT name FROM checkpoints WHERE run = 'r1'")}
receipts = {}
import base64, json
for (env,) in db.execute("SELECT envelope FROM receipts WHERE run = 'r1' AND kind = 'checkpoint-sealed'"):
    st = json.loads(base64.b64decode(json.loads(env)["payload"]))
    receipts[st["predicate"]["body"]["checkpoint"]] = st
assert seals == set(receipts), ("seal without receipt", sorted(seals - set(receipts))[:3], "receipt without seal", sorted(set(receipts) - seals)[:3])
n = db.execute("SELECT count(*) FROM receipts").fetchone()[0]
leaves = db.execute("SELECT count(*) FROM log_nodes WHERE level = 0").fetchone()[0]
idx = sorted(r[0] for r in db.execute("SELECT log_index FROM receipts"))
assert leaves == n and idx == list(range(n)), ("log leaves", leaves, "receipts", n)
print(len(seals))
PY
}

head_bundle() {  # OLD-HEAD-FILE OUT: the current head, every receipt's inclusion, consistency from OLD
    $PY - "$1" "$2" "$T/envs.json" "http://127.0.0.1:$P" <<'PY'
import json, sys, urllib.request
old_file, out, envs_out, base = sys.argv[1:5]
def get(path):
    rq = urllib.request.Request(base + path, headers={"Authorization": "Bearer admin-t"})
    return json.load(urllib.request.urlopen(rq))
# The receipts page by page (1000 each), each with its inclusion proof
# against the first page's head; one per-receipt proof is checked to agree.
recs, head, after = [], None, 0
while True:
    page = get("/v1/runs/r1/receipts?proofs=1" + ("&after=%d" % after if after else "") + ("&size=%d" % head["tree_size"] if head else ""))
    head = head or page["log"]
    assert page["log"]["tree_size"] == head["tree_size"], "a later page proves against another head"
    recs += page["receipts"]
    if page["next_after"] is None:
        break
    after = page["next_after"]
n = head["tree_size"]
assert n == len(recs), ("the log has %d leaves, the run %d receipts (the only run)" % (n, len(recs)))
assert [r["seq"] for r in recs] == list(range(1, n + 1)), "the pages are not seq 1..n"
inc = [{"leaf_hash": r["inclusion"]["leaf_hash"], "leaf_index": r["log_index"], "path": r["inclusion"]["path"]} for r in recs]
if recs:   # (a kill before the first seal, on a loaded machine, leaves none)
    one = get("/v1/log/proof/inclusion?index=%d&size=%d" % (recs[-1]["log_index"], n))
    assert one["path"] == recs[-1]["inclusion"]["path"], "the page's proof is not the proof endpoint's"
bundle = {"head": head["head"], "inclusion": inc}
try:
    old = json.load(open(old_file))
    c = get("/v1/log/proof/consistency?first=%d&second=%d" % (old["tree_size"], n))
    bundle["consistency"] = {"head": old["head"], "path": c["path"]}
except FileNotFoundError:
    pass
json.dump(bundle, open(out, "w"))
json.dump([r["envelope"] for r in recs], open(envs_out, "w"))
PY
}

for round in $(seq "$ROUNDS"); do
    get /v1/log/head > "$T/old-head.json" || fail "round $round: no head"
    commit_burst "$round" &
    CLIENT=$!
    sleep "0.$((RANDOM % 8 + 3))"
    { kill -9 $PID; wait $PID; } 2>/dev/null; wait $CLIENT; PID=""
    seals=$(both_or_neither) && ok "round $round: kill -9 mid-seal: $seals seals, each with its receipt and no receipt without one; log = receipts" \
        || fail "round $round: seals and receipts disagree"
    start
    out=$(shard verify r1 --key "$T/receipts.pub" 2>&1) && grep -q "^ok: " <<<"$out" \
        && ok "round $round: shard verify r1: $(grep '^ok:' <<<"$out")" || fail "round $round: shard verify r1: $out"
    if head_bundle "$T/old-head.json" "$T/bundle.json"; then
        out=$("$SHARD" verify "$T/envs.json" --key "$T/receipts.pub" --head "$T/bundle.json" 2>&1) \
            && ok "round $round: every receipt in the head; it extends the head before the kill: $(grep '^log head' <<<"$out")" \
            || fail "round $round: log inconsistent: $out"
    else
        fail "round $round: head or proofs not served"
    fi
done

# Without --key: the broker's own keys, with the warning that they prove less.
out=$(shard verify r1 2>&1) && grep -q "warning: no --key" <<<"$out" && ok "shard verify r1 without --key warns: $(grep -o 'warning: no --key[^.]*' <<<"$out")" \
    || fail "shard verify without --key: $out"
out=$(shard receipts r1 2>&1) && grep -q "attempt-started" <<<"$out" && grep -q "checkpoint-sealed" <<<"$out" \
    && ok "shard receipts r1: $(tail -1 <<<"$out")" || fail "shard receipts: $out"
[ "$(shard receipts r1 --json | $PY -c 'import json,sys; print(json.load(sys.stdin)[0]["payloadType"])')" = application/vnd.in-toto+json ] \
    && ok "shard receipts --json: the envelopes" || fail "shard receipts --json"
# Key rotation without a restart: the config's key_file now names a new key;
# on SIGHUP the broker signs with it and keeps listing the old one, retired.
openssl genpkey -algorithm ed25519 -out "$T/receipts2.key" 2>/dev/null && chmod 600 "$T/receipts2.key"
openssl pkey -in "$T/receipts2.key" -pubout -out "$T/receipts2.pub"
sed -i "s|$T/receipts.key|$T/receipts2.key|" "$T/broker.json"
kill -HUP $PID
for _ in $(seq 50); do grep -q "signing key rotated" "$T/log" && break; sleep 0.1; done
hash_p=$(printf 'rank-0/after-rotation.pt' | sha256sum | cut -d' ' -f1)
curl -sf -o /dev/null -H "Authorization: Bearer admin-t" "http://127.0.0.1:$P/v1/runs/r1/checkpoints/after-rotation/commit" --data-binary \
    "{\"attempt\":1,\"rank\":0,\"world_size\":1,\"files\":[{\"path\":\"rank-0/after-rotation.pt\",\"sha256\":\"$hash_p\",\"bytes\":10}]}" \
    || fail "a seal after the rotation"
keys=$(curl -s "http://127.0.0.1:$P/v1/keys" | $PY -c 'import json,sys; print(" ".join(sorted(k["status"] for k in json.load(sys.stdin)["keys"])))')
[ "$keys" = "current retired" ] && ok "SIGHUP with a new key_file: /v1/keys lists the new key current and the old one retired" \
    || fail "keys after the rotation: $keys ($(grep rotated "$T/log"))"
out=$(shard verify r1 --key "$T/receipts.pub" --key "$T/receipts2.pub" 2>&1) && ok "shard verify r1 across the rotation, with both keys: $(grep '^ok' <<<"$out")" \
    || fail "shard verify across the rotation: $(tail -3 <<<"$out")"
out=$(shard verify r1 --key "$T/receipts.pub" 2>&1) && fail "the receipt signed by the new key verified with the old key alone"
grep -q "signed by unknown key" <<<"$out" && ok "with the old key alone the new receipt is refused: $(grep -m1 'unknown key' <<<"$out" | cut -c1-120)" \
    || fail "no unknown-key line: $(tail -3 <<<"$out")"

# A tampered receipt in the database is caught by shard verify RUN.
kill -9 $PID; wait $PID 2>/dev/null; PID=""
$PY - "$T/broker.db" <<'PY'
import base64, json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
seq, env = db.execute("SELECT seq, envelope FROM receipts WHERE run = 'r1' AND kind = 'checkpoint-sealed' LIMIT 1").fetchone()
e = json.loads(env)
payload = base64.b64decode(e["payload"])
st = payload.replace(b'"count":1,"bytes":10}', b'"count":1,"bytes":11}')   # the sealed files' total (body.files)
assert st != payload, "no body.files to alter in " + payload.decode()[:300]
e["payload"] = base64.b64encode(st).decode()
db.execute("UPDATE receipts SET envelope = ? WHERE run = 'r1' AND seq = ?", (json.dumps(e, separators=(",", ":"), sort_keys=True), seq))
db.commit()
PY
start
out=$(shard verify r1 --key "$T/receipts.pub" --key "$T/receipts2.pub" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "bad signature" <<<"$out" && ok "a receipt altered in the database: $(grep -m1 FAIL <<<"$out")" \
    || fail "altered receipt not caught (rc $rc): $out"

# Heads only move forward: the last head signed is pinned beside the key
# (receipts2.key.head, 0600); a database whose log was cut back below it
# is not started on, with a message naming both sizes.
size=$(get /v1/log/head | $PY -c 'import json,sys; print(json.load(sys.stdin)["tree_size"])')
pinned=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["tree_size"])' "$T/receipts2.key.head" 2>/dev/null || echo none)
[ "$pinned" = "$size" ] && [ "$(stat -c %a "$T/receipts2.key.head")" = 600 ] && ok "the head of size $size is pinned beside the key (0600)" \
    || fail "pinned head: $pinned, served head: $size"
kill -TERM $PID; wait $PID 2>/dev/null; PID=""
cp "$T/broker.db" "$T/broker.db.whole"
$PY - "$T/broker.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = db.execute("SELECT MAX(idx) FROM log_nodes WHERE level = 0").fetchone()[0]
db.execute("DELETE FROM log_nodes WHERE idx >= ? AND level = 0", (n - 1,))   # the newest two receipts' leaves
db.execute("DELETE FROM receipts WHERE seq IN (SELECT seq FROM receipts ORDER BY log_index DESC LIMIT 2)")
db.commit()
PY
"$BROKER" --config "$T/broker.json" --port-file "$T/port" > "$T/rolled" 2>&1; rc=$?
[ $rc != 0 ] && grep -q "fewer than the $size of the last head this broker signed" "$T/rolled" \
    && ok "a log rolled back below the pinned head: the broker refuses to start ($(grep -o 'the receipt log in the database holds [0-9]* receipts' "$T/rolled"))" \
    || fail "rolled-back log: rc $rc, $(cat "$T/rolled")"
# The same size, another history: the log's first leaves rewritten.
cp "$T/broker.db.whole" "$T/broker.db"; rm -f "$T/broker.db-wal" "$T/broker.db-shm"
$PY - "$T/broker.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE log_nodes SET hash = zeroblob(32) WHERE idx = 0")   # the leftmost node of every level
db.commit()
PY
"$BROKER" --config "$T/broker.json" --port-file "$T/port" > "$T/rewritten" 2>&1; rc=$?
[ $rc != 0 ] && grep -q "at size $size, the last head this broker signed .* has [0-9a-f]\{16\}\.\.\.: the log was rewritten. Refusing to start" "$T/rewritten" \
    && ok "a log of the pinned size with another root: the broker refuses to start (the log was rewritten)" \
    || fail "rewritten log: rc $rc, $(cat "$T/rewritten")"
cp "$T/broker.db.whole" "$T/broker.db"; rm -f "$T/broker.db-wal" "$T/broker.db-shm"
start
get /v1/log/head >/dev/null && ok "the whole database again: serves" || fail "the broker did not start on the whole database"

# A head that cannot be pinned is not served: the pin's path taken by a
# folder (root writes anywhere, so no mode bits), a receipt logged since.
pin_held=$(cat "$T/receipts2.key.head")
rm -f "$T/receipts2.key.head"; mkdir -p "$T/receipts2.key.head/held"
curl -sf -o /dev/null -H "Authorization: Bearer admin-t" "http://127.0.0.1:$P/v1/runs/r1/checkpoints/unpinned/commit" --data-binary \
    "{\"attempt\":1,\"rank\":0,\"world_size\":1,\"files\":[{\"path\":\"rank-0/unpinned.pt\",\"sha256\":\"$(hash rank-0/unpinned.pt)\",\"bytes\":10}]}" \
    || fail "seal unpinned"
code=$(curl -s -o "$T/unpinned.json" -w '%{http_code}' -H "Authorization: Bearer admin-t" "http://127.0.0.1:$P/v1/log/head")
[ "$code" = 500 ] && grep "the log head not pinned, so not served" "$T/log" | grep -q "cannot write $T/receipts2.key.head" \
    && ok "a head that cannot be pinned is not served: HTTP 500, the broker's log says why" \
    || fail "unpinnable head: HTTP $code $(cat "$T/unpinned.json")"
rm -rf "$T/receipts2.key.head"; printf '%s\n' "$pin_held" > "$T/receipts2.key.head"; chmod 600 "$T/receipts2.key.head"
get /v1/log/head >/dev/null && ok "the pin's path free again: the head is pinned and served" || fail "head after the pin came back"
# Nowhere to pin a head: the broker says so at start, not at the first
# head asked for (the pin's temporary path taken by a folder).
kill -TERM $PID; wait $PID 2>/dev/null; PID=""
mkdir -p "$T/receipts2.key.head.tmp/held"
"$BROKER" --config "$T/broker.json" --port-file "$T/port" > "$T/nopin" 2>&1; rc=$?
[ $rc != 0 ] && grep -q "cannot write $T/receipts2.key.head.tmp .*make that directory writable for the broker" "$T/nopin" \
    && ok "no place to pin a head: the broker refuses to start, naming the path" || fail "unpinnable at start: rc $rc, $(cat "$T/nopin")"
rm -rf "$T/receipts2.key.head.tmp"
start

# The CLI keeps the last head it verified from each broker
# ($XDG_STATE_HOME/shardnet/heads/, 0600), and every later head must extend
# it: a broker whose database was cut back, with its own pin removed (the
# broker then starts, and signs a smaller head), is refused by the CLI;
# grown again on the cut log, it is a fork. (r1 holds the receipt altered
# above: verify fails on that too, so the lines are what is checked.)
# The head is kept per URL: the broker keeps this port from here on.
KEYS=(--key "$T/receipts.pub" --key "$T/receipts2.pub")
shard verify r1 "${KEYS[@]}" > "$T/v1.out" 2>&1
shard verify r1 "${KEYS[@]}" > "$T/v2.out" 2>&1
kept_file=$(ls "$T"/state/shardnet/heads/http___127.0.0.1_"$P"-*.json 2>/dev/null)
kept_size() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["tree_size"])' "$kept_file" 2>/dev/null; }
size=$(get /v1/log/head | $PY -c 'import json,sys; print(json.load(sys.stdin)["tree_size"])')
[ "$(wc -w <<<"$kept_file")" = 1 ] && [ "$(stat -c %a "$kept_file")" = 600 ] && [ "$(kept_size)" = "$size" ] \
    && ! grep -q "^log head: extends" "$T/v1.out" && grep -q "^log head: extends the head of size $size " "$T/v2.out" \
    && ok "the CLI keeps the head of size $size it verified ($(basename "$kept_file"), 0600), and the next one extends it" \
    || fail "kept head: file '$kept_file', size $(kept_size), served $size: $(cat "$T/v1.out" "$T/v2.out")"
kill -TERM $PID; wait $PID 2>/dev/null; PID=""
sed -i "s|\"listen\": \"127.0.0.1:0\"|\"listen\": \"127.0.0.1:$P\"|" "$T/broker.json"
cut_log() {  # N: the newest N receipts and every log node over them go
    $PY - "$T/broker.db" "$1" <<'PY'
import sqlite3, sys
db, n = sqlite3.connect(sys.argv[1]), int(sys.argv[2])
size = db.execute("SELECT MAX(idx) + 1 FROM log_nodes WHERE level = 0").fetchone()[0]
db.execute("DELETE FROM log_nodes WHERE (idx + 1) * (1 << level) > ?", (size - n,))
db.execute("DELETE FROM receipts WHERE log_index >= ?", (size - n,))
db.commit()
PY
}
cut_log 2
rm -f "$T/receipts2.key.head"   # what the broker keeps for itself: gone with the database's tail
start
rc=0; out=$(shard verify r1 "${KEYS[@]}" 2>&1) || rc=$?
[ $rc = 1 ] && grep -q "log rolled back: its log head of size $((size - 2)) (root [0-9a-f]\{64\}) is smaller than the head of size $size (root [0-9a-f]\{64\}) this CLI verified" <<<"$out" \
    && [ "$(kept_size)" = "$size" ] \
    && ok "a broker rolled back (receipts cut, its pin gone): the CLI refuses its head: $(grep -o 'log rolled back: its log head of size [0-9]*' <<<"$out"), kept $size" \
    || fail "rollback not refused by the CLI (rc $rc, kept $(kept_size)): $out"
# Grown past the kept size on the cut log: a head the kept one is no prefix of.
for i in 1 2 3; do
    p_=rank-0/after-cut-$i.pt
    curl -sf -o /dev/null -H "Authorization: Bearer admin-t" "http://127.0.0.1:$P/v1/runs/r1/checkpoints/after-cut-$i/commit" --data-binary \
        "{\"attempt\":1,\"rank\":0,\"world_size\":1,\"files\":[{\"path\":\"$p_\",\"sha256\":\"$(hash "$p_")\",\"bytes\":10}]}" || fail "seal after-cut-$i"
done
rc=0; out=$(shard verify r1 "${KEYS[@]}" 2>&1) || rc=$?
[ $rc = 1 ] && grep -q "log forked: its log head of size $((size + 1)) (root [0-9a-f]\{64\}) does not extend the head of size $size .*(the consistency proof fails)" <<<"$out" \
    && [ "$(kept_size)" = "$size" ] && ok "the cut log grown to $((size + 1)): a fork, refused: $(grep -o 'log forked: [^(]*' <<<"$out")" \
    || fail "fork not refused by the CLI (rc $rc, kept $(kept_size)): $out"
# --forget-head: said, and the new head kept; from there on it must extend that one.
out=$(shard verify r1 "${KEYS[@]}" --forget-head 2>&1)
if grep -q "the log head kept for broker solo .* is forgotten" <<<"$out" && ! grep -q "rolled back\|forked" <<<"$out" && [ "$(kept_size)" = "$((size + 1))" ]; then
    out=$(shard verify r1 "${KEYS[@]}" 2>&1)
    grep -q "^log head: extends the head of size $((size + 1)) " <<<"$out" \
        && ok "--forget-head: said, the new head of size $((size + 1)) kept, and the next verify holds to it" || fail "after --forget-head: $out"
else
    fail "--forget-head (kept $(kept_size)): $out"
fi

[ $fails = 0 ] && echo "all receipt checks passed" || { echo "$fails receipt check(s) failed"; tail -20 "$T/log"; }
exit $((fails > 0))
