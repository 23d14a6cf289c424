#!/bin/bash
# The broker as a real process: bad input over the wire, slowloris, TLS,
# SIGHUP with a bad and a good config, SIGTERM drain (bounded by
# limits.drain_seconds), and kill -9 during a burst of checkpoint commits
# (every acknowledged one must be there after);
# then a hostile peer: answers of the wrong shape, type or size, or too slow.
# Run by `make check` with BROKER and HARNESS set.
set -uo pipefail
BROKER=${BROKER:?}; HARNESS=${HARNESS:?}; DOC=${DOC:?}
T=$(mktemp -d); PID=""; MNT=""
# A tmpfs mounted for the full-disk test goes with the broker that used it.
unmount() { [ -n "$MNT" ] && { umount "$MNT" 2>/dev/null || umount -l "$MNT"; }; }
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null && wait $PID 2>/dev/null; unmount; rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
hash() { printf %s "$1" | sha256sum | cut -d' ' -f1; }

write_config() {  # EXTRA-JSON
    cat > "$T/broker.json" <<CONF
{"listen": "127.0.0.1:0", "plain_http": true, "database": "$T/broker.db",
 "limits": {"body_bytes": 65536, "read_timeout_ms": 1000, "sse_keepalive_ms": 300},
 "detector": {"misses": 3, "summary_seconds": 1},
 "tokens": [{"name": "ops", "scope": "admin", "sha256": "$(hash admin-t)"},
            {"name": "agents", "scope": "worker", "sha256": "$(hash worker-t)"}$1]}
CONF
}
start() {
    rm -f "$T/port"
    "$BROKER" --config "$T/broker.json" --port-file "$T/port" 2>> "$T/log" &
    PID=$!
    for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
    P=$(cat "$T/port")
}
req() {  # METHOD PATH TOKEN [BODY] -> "status body"
    curl -s -o "$T/body" -w '%{http_code}' -X "$1" ${3:+-H "Authorization: Bearer $3"} ${4:+--data-binary "$4"} \
        "http://127.0.0.1:$P$2"
    echo " $(cat "$T/body")"
}
expect() {  # WHAT STATUS [TEXT] -- METHOD PATH TOKEN [BODY]
    local what=$1 status=$2 text=$3; shift 4
    local out; out=$(req "$@")
    [ "${out%% *}" = "$status" ] && grep -q -- "$text" <<<"$out" && ok "$what: $status" || fail "$what: got $out"
}

write_config ""
"$BROKER" --print-config > "$T/template.json" && "$BROKER" --config "$T/template.json" --check-config >/dev/null \
    && ok "--print-config template passes --check-config" || fail "template"
echo '{"listen": "127.0.0.1:0", "plain_http": true, "limitz": {}}' > "$T/bad.json"
"$BROKER" --config "$T/bad.json" 2> "$T/err"; [ $? = 2 ] && grep -q "limitz: unknown key" "$T/err" \
    && ok "unknown config key refused: $(cat "$T/err")" || fail "bad config: $(cat "$T/err")"

start
HB='{"run":"r1","attempt":1,"node":"n1","interval":1,"state":"running","ranks":[{"rank":0,"step":1}]}'
expect "heartbeat" 204 "" -- POST /v1/heartbeats admin-t "$HB"
expect "no token" 401 no_token -- POST /v1/heartbeats "" "$HB"
expect "a shared worker token reports for no run" 403 "per-job worker token" -- POST /v1/heartbeats worker-t "$HB"
expect "unknown token" 401 bad_token -- POST /v1/heartbeats wrong "$HB"
expect "malformed JSON" 400 bad_json -- POST /v1/heartbeats admin-t '{"run":'
expect "wrong type names the field" 400 '"field":"attempt"' -- POST /v1/heartbeats admin-t '{"run":"r1","attempt":[],"node":"n1","ranks":[]}'
expect "attempt 2 starts" 204 "" -- POST /v1/heartbeats admin-t "${HB/\"attempt\":1/\"attempt\":2}"
expect "attempt 1 is now stale" 409 stale_attempt -- POST /v1/heartbeats admin-t "$HB"
expect "unknown route" 404 no_route -- GET /v1/nope admin-t
expect "a known resource, another method" 405 method_not_allowed -- DELETE /v1/runs/r1 admin-t
curl -s -D "$T/h405" -o /dev/null -X PUT -H "Authorization: Bearer admin-t" "http://127.0.0.1:$P/v1/runs"
grep -qi '^Allow: GET, HEAD, POST' "$T/h405" && ok "405 says what the resource takes: $(grep -i '^Allow' "$T/h405" | tr -d '\r')" \
    || fail "405 without Allow: $(cat "$T/h405")"
head_out=$(curl -s -I -m 3 "http://127.0.0.1:$P/v1/health" | tr -d '\r')
get_len=$(curl -s "http://127.0.0.1:$P/v1/health" | wc -c)
grep -q "^HTTP/1.1 200" <<<"$head_out" && grep -qi "^Content-Length: $get_len\$" <<<"$head_out" \
    && [ "$(/usr/bin/python3 -c 'import socket,sys
s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.sendall(b"HEAD /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
d=b""
while (c:=s.recv(4096)): d+=c
print(len(d.split(b"\r\n\r\n",1)[1]))' "$P")" = 0 ] \
    && ok "HEAD: the GET's status and Content-Length ($get_len), no body" || fail "HEAD: $head_out"
expect "descriptor of the wrong shape" 400 '"field":"accelerators"' -- POST /v1/nodes worker-t '{"schema":"shardnet.node/1","host":"h1","hash":"x","accelerators":[1]}'
expect "node list after it" 200 '"nodes":\[\]' -- GET /v1/nodes admin-t
head -c 100000 /dev/zero | tr '\0' 'x' > "$T/big"
expect "oversized body" 413 body_too_large -- POST /v1/heartbeats admin-t "@$T/big"
# Slowloris: headers trickled in one byte at a time are cut off at the read deadline.
/usr/bin/python3 - "$P" <<'PY' && ok "slowloris connection closed by the read deadline" || fail "slowloris kept open"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
start = time.time()
try:
    for ch in b"POST /v1/heartbeats HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
        s.send(bytes([ch])); time.sleep(0.1)
        if time.time() - start > 5: sys.exit(1)
    sys.exit(1)
except (BrokenPipeError, ConnectionResetError):
    sys.exit(0 if time.time() - start < 3 else 1)
PY
# HTTP framing on the wire: pipelined requests answered in order, a chunked
# body, a body trickled in small pieces, and requests cut short.
/usr/bin/python3 - "$P" "${HB/\"attempt\":1/\"attempt\":2}" <<'PY' && ok "framing: pipelined, chunked, trickled; cut short: 400 at EOF, closed at the deadline; a Transfer-Encoding other than one final chunked, or no or two Hosts: 400/501 and closed, the smuggled request never runs" || fail "framing"
import socket, sys, time
port, body = int(sys.argv[1]), sys.argv[2].encode()
def talk(data, shut=False, pieces=0):
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(5)
    if pieces:
        for i in range(0, len(data), pieces): s.sendall(data[i:i + pieces]); time.sleep(0.001)
    else:
        s.sendall(data)
    if shut: s.shutdown(socket.SHUT_WR)
    out, start = b"", time.time()
    while b"\r\n\r\n" not in out or out.count(b"HTTP/1.1 ") < data.count(b"HTTP/1.1\r\n"):
        d = s.recv(65536)
        if not d: break
        out += d
    return [l.decode() for l in out.split(b"\r\n") if l.startswith(b"HTTP/")], time.time() - start
hb = b"POST /v1/heartbeats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-t\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
got, _ = talk(hb * 3)
assert got == ["HTTP/1.1 204 No Content"] * 3, got
chunked = b"POST /v1/heartbeats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-t\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
got, _ = talk(chunked)
assert got == ["HTTP/1.1 204 No Content"], got
got, _ = talk(hb, pieces=7)
assert got == ["HTTP/1.1 204 No Content"], got
cut = b"POST /v1/heartbeats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-t\r\nContent-Length: 100\r\n\r\n{\"run\""
got, _ = talk(cut, shut=True)
assert got == ["HTTP/1.1 400 Bad Request"], got
got, took = talk(cut)  # no answer to half a request: closed at the 1 s read deadline
assert got == [] and 0.8 < took < 3, (got, took)
# Framing the broker must not guess at (RFC 9112): a Transfer-Encoding that
# is not a final, single chunked, or a request without exactly one Host, is
# refused and the connection closed, so the request after it on the same
# connection (what a proxy would have read as the body) never runs.
health = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
def framed(te):
    return (b"POST /v1/heartbeats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-t\r\nTransfer-Encoding: " + te +
            b"\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
for te, want in [(b"xchunked", 400), (b"identity", 400), (b"chunked, identity", 400), (b"gzip", 400),
                 (b"gzip, chunked", 501), (b"chunked, chunked", 400)]:
    got, _ = talk(framed(te) + health, shut=True)
    assert len(got) == 1 and got[0].startswith("HTTP/1.1 %d" % want), (te, got)
s2 = b"POST /v1/heartbeats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-t\r\nTransfer-Encoding: chunked\r\n" \
     b"Transfer-Encoding: identity\r\n\r\n0\r\n\r\n"
got, _ = talk(s2 + health, shut=True)
assert len(got) == 1 and got[0].startswith("HTTP/1.1 400"), ("two TE fields", got)
for req in [b"GET /v1/health HTTP/1.1\r\n\r\n", b"GET /v1/health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"]:
    got, _ = talk(req + health, shut=True)
    assert len(got) == 1 and got[0].startswith("HTTP/1.1 400"), (req, got)
got, _ = talk(b"GET /v1/health HTTP/1.0\r\n\r\n", shut=True)   # HTTP/1.0 has no Host rule
assert len(got) == 1 and " 200 " in got[0], got
PY
# Expect: 100-continue: a 100 before the body when the broker will read it,
# the final answer at once (no 100) when it will not.
/usr/bin/python3 - "$P" "${HB/\"attempt\":1/\"attempt\":2}" <<'PY' && ok "Expect: 100-continue: 100 then 204; over body_bytes 413 without a 100; HTTP/1.0 gets none" || fail "Expect: 100-continue"
import socket, sys
port, body = int(sys.argv[1]), sys.argv[2].encode()
def head(n, extra=b"", version=b"1.1"):
    return (b"POST /v1/heartbeats HTTP/" + version + b"\r\nHost: x\r\nAuthorization: Bearer admin-t\r\nExpect: 100-continue\r\n" + extra +
            b"Content-Length: %d\r\n\r\n" % n)
s = socket.create_connection(("127.0.0.1", port)); s.settimeout(5)
s.sendall(head(len(body)))
got = s.recv(4096)
assert got == b"HTTP/1.1 100 Continue\r\n\r\n", got   # before any of the body was sent
s.sendall(body)
got = s.recv(4096)
assert got.startswith(b"HTTP/1.1 204"), got
s = socket.create_connection(("127.0.0.1", port)); s.settimeout(5)
s.sendall(head(2 << 20))
got = s.recv(4096)
assert got.startswith(b"HTTP/1.1 413") and b"100 Continue" not in got, got
s = socket.create_connection(("127.0.0.1", port)); s.settimeout(5)
s.sendall(head(len(body), version=b"1.0") + body)
got = s.recv(4096)
assert got.startswith(b"HTTP/1.0 204") or got.startswith(b"HTTP/1.1 204"), got
assert b"100 Continue" not in got, got
PY
python3 -c "import sys; print(sys.argv[1][:-1] + ',\"pad\":\"' + 'x' * 3000 + '\"}')" "${HB/\"attempt\":1/\"attempt\":2}" > "$T/hb3k"
secs=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' -H "Expect: 100-continue" -H "Authorization: Bearer admin-t" \
    --data-binary "@$T/hb3k" "http://127.0.0.1:$P/v1/heartbeats")
[ "${secs%% *}" = 204 ] && ok "curl with Expect and a 3 KB heartbeat: 204 in ${secs#* } s (a client waiting for no 100 takes 1 s)" || fail "curl Expect: $secs"
# A refusal with input left unread is a lingering close: the answer arrives
# (no RST overtaking it) for 2 MB uploads to a 64 KB limit, with a length or
# chunked, and for a bad request with 1 MB pipelined after it.
/usr/bin/python3 - "$P" <<'PY' && ok "lingering close: 30 x 413 for 2 MB uploads (length and chunked), 30 x 400 for a bad request with 1 MB after it" || fail "lingering close"
import socket, sys, threading
port = int(sys.argv[1])
big = b"x" * (2 << 20)
def answer(data):
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(10)
    def send():
        try: s.sendall(data)
        except OSError: pass
    t = threading.Thread(target=send); t.start()
    got = b""
    try:
        while chunk := s.recv(65536): got += chunk
    except OSError as e:
        got += b" [%s]" % str(e).encode()
    t.join(); s.close()
    return got.split(b"\r\n", 1)[0]
auth = b"Host: x\r\nAuthorization: Bearer admin-t\r\n"
cases = [(b"POST /v1/heartbeats HTTP/1.1\r\n" + auth + b"Content-Length: %d\r\n\r\n" % len(big) + big, b"HTTP/1.1 413"),
         (b"POST /v1/heartbeats HTTP/1.1\r\n" + auth + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % len(big) + big + b"\r\n0\r\n\r\n", b"HTTP/1.1 413"),
         (b"POST /v1/heartbeats HTTP/1.1\r\n" + auth + b"Transfer-Encoding: gzip\r\n\r\n" + b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n" * 28000, b"HTTP/1.1 400")]
for data, want in cases:
    for i in range(30):
        got = answer(data)
        assert got.startswith(want), (want, i, got)
PY
expect "still serving after all that" 200 '"ok":true' -- GET /v1/health ""
expect "metrics" 200 shardnet_heartbeats_total -- GET /metrics ""

# Every route of doc/broker-openapi.json answers (with anything but no_route),
# with a status the document lists for it: with an admin, a static worker, an
# unknown and no token, and as HEAD for a GET. Another method on a documented
# path is 405 with the document's methods in Allow; a route it does not list
# is 404 no_route.
/usr/bin/python3 - "$P" "$DOC" <<'PY' && ok "the routes in doc/broker-openapi.json are served, no others, with the statuses it lists" || fail "API document and routes disagree"
import http.client, json, sys
port, doc = int(sys.argv[1]), json.load(open(sys.argv[2]))
METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]
def call(method, path, token="admin-t"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request(method.upper(), path, "{}", {"Authorization": "Bearer " + token} if token else {})
    r = c.getresponse(); return r.status, r.read().decode(), r.getheader("Allow")
for path, item in doc["paths"].items():
    target = path.replace("{id}", "r1").replace("{name}", "ck-doc").replace("{host}", "h1")
    ops = [m for m in METHODS if m in item]
    for method in ops:
        listed = item[method]["responses"]
        for token in ["admin-t", "worker-t", "wrong", ""]:
            for asked in [method] + (["head"] if method == "get" else []):
                status, body, _ = call(asked, target, token)
                assert "no_route" not in body, (asked, path, token, status, body)
                assert str(status) in listed, ("status not in the document", asked, path, token, status, body)
    allow = ", ".join(m.upper() for m in ["get", "head", "post"] if m in ops or (m == "head" and "get" in ops))
    for other in [m for m in ["get", "post", "put", "delete", "patch"] if m not in ops]:
        status, body, got = call(other, target)
        assert status == 405 and "method_not_allowed" in body and got == allow, (other, path, status, body, got, allow)
assert "MethodNotAllowed" in doc["components"]["responses"] and "NoRoute" in doc["components"]["responses"]
status, body, _ = call("get", "/v1/secrets")
assert status == 404 and "no_route" in body
PY

# Live events (SSE): the backlog, then each new event as it is committed.
curl -s -N -H "Authorization: Bearer admin-t" "http://127.0.0.1:$P/v1/runs/r1/events?follow=1" > "$T/sse" &
SSE=$!
sleep 0.5
req POST /v1/runs/r1/checkpoints/ck-sse/commit admin-t '{"attempt":2,"rank":0,"world_size":1,"files":[{"path":"s","sha256":"00","bytes":1}]}' >/dev/null
sleep 0.5
kill $SSE 2>/dev/null; wait $SSE 2>/dev/null
grep -q '^event: RUNNING' "$T/sse" && grep -q '^event: ATTEMPT' "$T/sse" && grep -q '^event: SEALED' "$T/sse" \
    && grep -q '^data: {"id":[0-9]*,"run":"r1"' "$T/sse" && ok "SSE: backlog and a live SEALED event" || fail "SSE stream: $(cat "$T/sse")"
grep -q '^: keep-alive$' "$T/sse" && ok "SSE: keep-alive comment on an idle stream" || fail "SSE: no keep-alive in $(cat "$T/sse")"
expect "following an unknown run" 404 no_run -- GET "/v1/runs/nope/events?follow=1" admin-t
expect "following without a token" 401 no_token -- GET "/v1/runs/r1/events?follow=1" ""
expect "serving after the stream closed" 200 '"ok":true' -- GET /v1/health ""

# SIGHUP: a bad config is refused and the old one keeps working; a good one takes.
cp "$T/broker.json" "$T/good.json"
echo '{"listen": 5}' > "$T/broker.json"
kill -HUP $PID; sleep 0.3
grep -q "config reload refused" "$T/log" && ok "bad reload refused" || fail "bad reload not refused"
expect "old token still valid after a bad reload" 200 '"runs"' -- GET /v1/runs admin-t
cp "$T/good.json" "$T/broker.json"; write_config ', {"name": "new", "scope": "admin", "sha256": "'"$(hash new-t)"'"}'
kill -HUP $PID; sleep 0.3
expect "new token valid after a good reload" 200 '"runs"' -- GET /v1/runs new-t

# SIGTERM drains and exits 0.
kill -TERM $PID; wait $PID; rc=$?
[ $rc = 0 ] && grep -q '"msg":"stopped"' "$T/log" && ok "SIGTERM: drained, exit 0" || fail "SIGTERM exit $rc"
PID=""

# Checkpoint commits from 8 clients until the broker goes; the acknowledged
# names (PREFIX-client-i) go to FILE. Their answers come from the store's thread.
commit_burst() {  # FILE PREFIX
    /usr/bin/python3 - "$P" "$1" "$2" <<'PY'
import http.client, json, sys, threading
port, out, prefix = int(sys.argv[1]), sys.argv[2], sys.argv[3]
acked, lock = [], threading.Lock()
def worker(w):
    for i in range(100000):
        name = "%s-%d-%d" % (prefix, w, i)
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("POST", "/v1/runs/r1/checkpoints/%s/commit" % name,
                      json.dumps({"attempt": 2, "rank": 0, "world_size": 1,
                                  "files": [{"path": "s", "sha256": "00", "bytes": 1}]}),
                      {"Authorization": "Bearer admin-t"})
            r = c.getresponse(); r.read()
            if r.status == 200:
                with lock: acked.append(name)
        except Exception:
            return
ts = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
open(out, "w").write("\n".join(acked))
PY
}
# Every acknowledged commit is sealed, and the database is intact.
all_acked_sealed() {  # FILE
    /usr/bin/python3 - "$T/broker.db" "$1" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
sealed = {r[0] for r in db.execute("SELECT name FROM checkpoints WHERE run = 'r1'")}
acked = [l for l in open(sys.argv[2]).read().split("\n") if l]
assert len(acked) > 50, "too few commits acknowledged to mean anything: %d" % len(acked)
missing = [a for a in acked if a not in sealed]
assert not missing, missing[:5]
PY
}

# kill -9 during a burst of commits: every acknowledged commit survives.
start
commit_burst "$T/acked" ck &
CLIENT=$!
sleep 1.5
kill -9 $PID; wait $CLIENT; PID=""
n=$(wc -l < "$T/acked")
all_acked_sealed "$T/acked" && ok "kill -9 mid-burst: all $n acknowledged commits sealed after restart, integrity ok" \
    || fail "lost acknowledged commits"
start
expect "restarted broker serves the run" 200 '"id":"r1"' -- GET /v1/runs/r1 admin-t

# Another process holds the database (BEGIN EXCLUSIVE) past store_busy_ms
# while a run is created, one cancelled, a checkpoint committed and a new
# run's first heartbeat arrives: each is answered 503 store_busy with
# Retry-After (a client or agent tries again) within its deadline,
# memory and database agree (nothing of them kept), also after a restart,
# and the broker serves normally once the lock is gone.
kill -TERM $PID; wait $PID 2>/dev/null; PID=""
cp "$T/broker.json" "$T/broker.json.main"
sed -i 's/"sse_keepalive_ms": 300}/"sse_keepalive_ms": 300, "store_busy_ms": 300, "read_timeout_ms": 5000}/; s/"read_timeout_ms": 1000, //' "$T/broker.json"
start
expect "a run to cancel" 201 "" -- POST /v1/runs admin-t '{"id":"lk-cancel"}'
expect "a run to commit to" 204 "" -- POST /v1/heartbeats admin-t '{"run":"lk-commit","attempt":1,"node":"n1","ranks":[]}'
/usr/bin/python3 -c 'import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
c.execute("BEGIN EXCLUSIVE"); open(sys.argv[2], "w").close(); time.sleep(4); c.execute("ROLLBACK")' "$T/broker.db" "$T/locked" &
LOCKER=$!
for _ in $(seq 100); do [ -e "$T/locked" ] && break; sleep 0.05; done
locked_req() {  # NAME METHOD PATH BODY: status and seconds into $T/lk-NAME
    curl -s -o "$T/lk-$1.body" -D "$T/lk-$1.hdr" -m 5 -w '%{http_code} %{time_total}' -X "$2" -H "Authorization: Bearer admin-t" --data-binary "$4" \
        "http://127.0.0.1:$P$3" > "$T/lk-$1"
}
LK=()
locked_req create POST /v1/runs '{"id":"lk-new"}' & LK+=($!)
locked_req cancel POST /v1/runs/lk-cancel/cancel '' & LK+=($!)
locked_req commit POST /v1/runs/lk-commit/checkpoints/c1/commit '{"attempt":1,"rank":0,"world_size":1,"files":[{"path":"a","sha256":"00","bytes":1}]}' & LK+=($!)
locked_req first POST /v1/heartbeats '{"run":"lk-first","attempt":1,"node":"n1","ranks":[]}' & LK+=($!)
locked_req node POST /v1/nodes '{"schema":"shardnet.node/1","host":"lk-node","hash":"h"}' & LK+=($!)
wait "${LK[@]}"
for r in create cancel commit first node; do
    read -r code secs < "$T/lk-$r"
    [ "$code" = 503 ] && grep -q '"code":"store_busy"' "$T/lk-$r.body" && grep -q 'locked by another process' "$T/lk-$r.body" \
        && grep -qi '^Retry-After: 1' "$T/lk-$r.hdr" && ok "locked database, $r: 503 in ${secs}s ($(cut -c1-80 "$T/lk-$r.body"))" \
        || fail "locked database, $r: $code in ${secs}s $(cat "$T/lk-$r.body")"
done
wait $LOCKER
refusals() {  # CAUSE: the metrics' count of store refusals of that cause
    req GET /metrics "" | grep -o "shardnet_store_refusals_total{cause=\"$1\"} [0-9]*" | awk '{print $2}'
}
n=$(refusals busy)
[ "${n:-0}" -ge 5 ] && ok "locked database: /metrics counts the refusals (store_refusals_total{cause=busy} $n)" \
    || fail "locked database: store_refusals_total{cause=busy} is '${n:-}', expected >= 5"
agree() {  # WHEN
    local a b c d
    a=$(req GET /v1/runs/lk-new admin-t); b=$(req GET /v1/runs/lk-cancel admin-t)
    c=$(req GET /v1/runs/lk-commit/checkpoints admin-t); d=$(req GET /v1/runs/lk-first admin-t)
    [ "${a%% *}" = 404 ] && grep -q '"state":"PENDING"' <<<"$b" && grep -q '"checkpoints":\[\]' <<<"$c" && [ "${d%% *}" = 404 ] \
        && ok "$1: nothing of the refused requests is kept (lk-new 404, lk-cancel PENDING, no checkpoint, lk-first 404)" \
        || fail "$1: lk-new $a; lk-cancel $b; checkpoints $c; lk-first $d"
}
agree "lock gone"
kill -9 $PID; wait $PID 2>/dev/null; PID=""
start
agree "after a restart"
expect "serves normally once the lock is gone: create" 201 "" -- POST /v1/runs admin-t '{"id":"lk-new"}'
expect "serves normally: cancel" 200 CANCELLED -- POST /v1/runs/lk-cancel/cancel admin-t ''
expect "serves normally: commit" 200 '"sealed":true' -- POST /v1/runs/lk-commit/checkpoints/c1/commit admin-t '{"attempt":1,"rank":0,"world_size":1,"files":[{"path":"a","sha256":"00","bytes":1}]}'
expect "serves normally: first heartbeat" 204 "" -- POST /v1/heartbeats admin-t '{"run":"lk-first","attempt":1,"node":"n1","ranks":[]}'
expect "serves normally: node descriptor" 200 lk-node -- POST /v1/nodes admin-t '{"schema":"shardnet.node/1","host":"lk-node","hash":"h"}'
kill -TERM $PID; wait $PID 2>/dev/null; PID=""

# The database on a full filesystem (an 8 MB tmpfs as its folder, filled with
# a ballast file): a create, a cancel, a commit, a new run's first heartbeat
# and a node descriptor are each answered 503 store_full naming the cause and
# the database, with Retry-After, within their deadline; what was
# acknowledged before is served, also by a broker restarted (kill -9) while
# the disk is still full; once the ballast is gone the same writes succeed,
# and after kill -9 and a restart every acknowledged record is there and
# PRAGMA integrity_check says ok.
MNT="$T/full"; mkdir -p "$MNT"
if ! mount -t tmpfs -o size=8m shardnet-t-broker "$MNT"; then
    MNT=""; fail "full disk: mount -t tmpfs failed (this test runs as root)"
else
    sed "s#\"database\": \"$T/broker.db\"#\"database\": \"$MNT/broker.db\"#" "$T/broker.json.main" > "$T/broker.json"
    grep -q "$MNT/broker.db" "$T/broker.json" || fail "full disk: config not pointed at $MNT"
    start
    expect "full disk: before, a run" 201 "" -- POST /v1/runs admin-t '{"id":"fl-kept"}'
    expect "full disk: before, a run to cancel" 201 "" -- POST /v1/runs admin-t '{"id":"fl-cancel"}'
    expect "full disk: before, a first heartbeat" 204 "" -- POST /v1/heartbeats admin-t '{"run":"fl-hb","attempt":1,"node":"n1","ranks":[]}'
    expect "full disk: before, a sealed commit" 200 '"sealed":true' -- POST /v1/runs/fl-hb/checkpoints/c0/commit admin-t '{"attempt":1,"rank":0,"world_size":1,"files":[{"path":"a","sha256":"00","bytes":1}]}'
    dd if=/dev/zero of="$MNT/ballast" bs=64k 2>/dev/null
    avail=$(df --output=avail -k "$MNT" | tail -1 | tr -d ' ')
    [ "$avail" = 0 ] && ok "full disk: $MNT filled ($(du -k "$MNT/ballast" | cut -f1) KB ballast, 0 KB free)" || fail "full disk: $avail KB still free"
    full_req() {  # NAME METHOD PATH BODY: status and seconds into $T/fl-NAME, headers into .hdr
        curl -s -o "$T/fl-$1.body" -D "$T/fl-$1.hdr" -m 10 -w '%{http_code} %{time_total}' -X "$2" \
            -H "Authorization: Bearer admin-t" --data-binary "$4" "http://127.0.0.1:$P$3" > "$T/fl-$1"
    }
    full_writes() {  # WHEN
        full_req create POST /v1/runs '{"id":"fl-new"}'
        full_req cancel POST /v1/runs/fl-cancel/cancel ''
        full_req commit POST /v1/runs/fl-hb/checkpoints/c1/commit '{"attempt":1,"rank":0,"world_size":1,"files":[{"path":"a","sha256":"00","bytes":1}]}'
        full_req first POST /v1/heartbeats '{"run":"fl-first","attempt":1,"node":"n1","ranks":[]}'
        full_req node POST /v1/nodes '{"schema":"shardnet.node/1","host":"fl-node","hash":"h"}'
        for r in create cancel commit first node; do
            read -r code secs < "$T/fl-$r"
            [ "$code" = 503 ] && grep -q '"code":"store_full"' "$T/fl-$r.body" \
                && grep -q "database disk is full: $MNT/broker.db" "$T/fl-$r.body" && grep -qi '^Retry-After: [1-9]' "$T/fl-$r.hdr" \
                && ok "full disk, $1, $r: 503 in ${secs}s ($(cut -c1-90 "$T/fl-$r.body"))" \
                || fail "full disk, $1, $r: $code in ${secs}s $(cat "$T/fl-$r.body") $(grep -i retry-after "$T/fl-$r.hdr")"
        done
    }
    full_served() {  # WHEN: what was acknowledged is served, nothing refused is
        local a b c d e
        a=$(req GET /v1/runs/fl-kept admin-t); b=$(req GET /v1/runs/fl-cancel admin-t)
        c=$(req GET /v1/runs/fl-hb/checkpoints admin-t); d=$(req GET /v1/runs/fl-new admin-t); e=$(req GET /v1/runs/fl-first admin-t)
        [ "${a%% *}" = 200 ] && grep -q '"state":"PENDING"' <<<"$b" && grep -q '"name":"c0"' <<<"$c" && ! grep -q '"name":"c1"' <<<"$c" \
            && [ "${d%% *}" = 404 ] && [ "${e%% *}" = 404 ] \
            && ok "full disk, $1: the acknowledged runs and seal served, nothing of the refused writes kept" \
            || fail "full disk, $1: fl-kept $a; fl-cancel $b; checkpoints $c; fl-new $d; fl-first $e"
    }
    full_writes "full"
    n=$(refusals full)
    [ "${n:-0}" -ge 5 ] && ok "full disk: /metrics counts the refusals (store_refusals_total{cause=full} $n)" \
        || fail "full disk: store_refusals_total{cause=full} is '${n:-}', expected >= 5"
    grep '"msg":"commit of c1 not written: the store refused it"' "$T/log" | grep -q "database disk is full: $MNT/broker.db" \
        && ok "full disk: the broker's log says what was not written and why" || fail "full disk: no warning on the log: $(tail -2 "$T/log")"
    expect "full disk: still serving" 200 '"ok":true' -- GET /v1/health ""
    full_served "full"
    kill -9 $PID; wait $PID 2>/dev/null; PID=""
    start
    [ -n "$P" ] && kill -0 $PID 2>/dev/null && ok "full disk: a broker restarted (kill -9) on the full disk starts" \
        || fail "full disk: no broker after a restart on the full disk: $(tail -3 "$T/log")"
    full_served "restarted while full"
    full_writes "restarted while full"
    rm -f "$MNT/ballast"
    expect "room again: create" 201 "" -- POST /v1/runs admin-t '{"id":"fl-new"}'
    expect "room again: cancel" 200 CANCELLED -- POST /v1/runs/fl-cancel/cancel admin-t ''
    expect "room again: commit" 200 '"sealed":true' -- POST /v1/runs/fl-hb/checkpoints/c1/commit admin-t '{"attempt":1,"rank":0,"world_size":1,"files":[{"path":"a","sha256":"00","bytes":1}]}'
    expect "room again: first heartbeat" 204 "" -- POST /v1/heartbeats admin-t '{"run":"fl-first","attempt":1,"node":"n1","ranks":[]}'
    expect "room again: node descriptor" 200 fl-node -- POST /v1/nodes admin-t '{"schema":"shardnet.node/1","host":"fl-node","hash":"h"}'
    # The WAL past a checkpoint (it rewinds at ~1000 pages, 4 MB) when the disk
    # fills: commits reuse the WAL's space until the next checkpoint cannot
    # grow the database, then each is 503; with room again the checkpoint
    # runs, the WAL stays under journal_size_limit and every commit is there.
    /usr/bin/python3 - "$P" "$MNT" "$T/fl-acked" "$T/fl-wal" <<'PY' && ok "full disk after a checkpoint: $(cat "$T/fl-wal")" || fail "full disk after a checkpoint: $(cat "$T/fl-wal" 2>/dev/null)"
import http.client, json, os, sys
port, mnt, out, figures = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
size = lambda f: os.path.getsize(os.path.join(mnt, f))
def commit(name):
    c.request("POST", "/v1/runs/fl-hb/checkpoints/%s/commit" % name, json.dumps({"attempt": 1, "rank": 0, "world_size": 1,
              "files": [{"path": "a", "sha256": "00", "bytes": 1}]}), {"Authorization": "Bearer admin-t"})
    r = c.getresponse(); return r.status, r.read().decode()
acked, refused = [], 0
for i in range(700):
    status, body = commit("w%d" % i); assert status == 200, (i, status, body); acked.append("w%d" % i)
db0, wal0 = size("broker.db"), size("broker.db-wal")
assert wal0 > 3 << 20, "no checkpoint yet: WAL %d bytes" % wal0
with open(os.path.join(mnt, "ballast"), "wb", buffering=0) as f:
    try:
        while True: f.write(b"\0" * 65536)
    except OSError: pass
for i in range(5000):
    status, body = commit("x%d" % i)
    if status == 200: acked.append("x%d" % i); assert not refused, "acknowledged after a 503: " + body
    else: assert status == 503 and "database disk is full" in body, (status, body); refused += 1
    if refused >= 20: break
assert refused == 20, "the disk never filled: %d acknowledged" % (len(acked) - 700)
full_acked = len(acked) - 700
os.remove(os.path.join(mnt, "ballast"))
for i in range(400):
    status, body = commit("y%d" % i); assert status == 200, (i, status, body); acked.append("y%d" % i)
db1, wal1 = size("broker.db"), size("broker.db-wal")
assert db1 > db0, "no checkpoint once there was room: database %d -> %d bytes" % (db0, db1)
assert wal1 <= 8 << 20, wal1
open(out, "w").write("\n".join(acked))
open(figures, "w").write("%d acknowledged on the full disk (the WAL's space), then 503; with room again the database %d -> %d KB, WAL %d -> %d KB"
                                             % (full_acked, db0 // 1024, db1 // 1024, wal0 // 1024, wal1 // 1024))
PY
    kill -9 $PID; wait $PID 2>/dev/null; PID=""
    /usr/bin/python3 - "$MNT/broker.db" "$T/fl-acked" <<'PY' && ok "full disk: after kill -9 every acknowledged record is there, integrity ok" || fail "full disk: records lost or database damaged"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
check = db.execute("PRAGMA integrity_check").fetchone()[0]
assert check == "ok", check
runs = dict(db.execute("SELECT id, state FROM runs WHERE id LIKE 'fl-%'"))
assert set(runs) == {"fl-kept", "fl-cancel", "fl-hb", "fl-new", "fl-first"} and runs["fl-cancel"] == "CANCELLED", runs
sealed = sorted(r[0] for r in db.execute("SELECT name FROM checkpoints WHERE run = 'fl-hb'"))
assert sealed[:2] == ["c0", "c1"], sealed
assert db.execute("SELECT count(*) FROM nodes WHERE host = 'fl-node'").fetchone()[0] == 1
acked = open(sys.argv[2]).read().split()
missing = set(acked) - {r[0] for r in db.execute("SELECT name FROM checkpoints WHERE run = 'fl-hb'")}
assert len(acked) > 1000 and not missing, (len(acked), sorted(missing)[:5])
PY
    start
    expect "full disk: restarted once more, serves" 200 '"state":"CANCELLED"' -- GET /v1/runs/fl-cancel admin-t
    kill -TERM $PID; wait $PID 2>/dev/null; PID=""
    umount "$MNT" && MNT="" || fail "full disk: umount $MNT"
fi
cp "$T/broker.json.main" "$T/broker.json"
start
# Answers larger than the socket takes at once: pipelined requests for the
# checkpoint list (4 MB of answers in all) from a client with a small
# receive window that reads late. What did not fit is sent when it can, in order.
/usr/bin/python3 - "$P" <<'PY' && ok "large answers to a slow reader arrive whole and in order" || fail "large answers to a slow reader"
import json, socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", int(sys.argv[1])))
req = b"GET /v1/runs/r1/checkpoints HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer admin-t\r\n"
one = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
one.sendall(req + b"Connection: close\r\n\r\n")
size = 0
while chunk := one.recv(1 << 20):
    size += len(chunk)
n = max(8, (4 << 20) // size + 1)  # more than the socket buffers on both ends hold
s.sendall((req + b"\r\n") * (n - 1) + req + b"Connection: close\r\n\r\n")
time.sleep(0.5)
parts = []
while chunk := s.recv(1 << 20):
    parts.append(chunk)
data = b"".join(parts)
answers = []
while data:
    head, data = data.split(b"\r\n\r\n", 1)
    length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    answers.append(json.loads(data[:length]))
    data = data[length:]
assert len(answers) == n, len(answers)
assert all(len(a["checkpoints"]) > 50 for a in answers)
PY
# A run's seals come a page at a time (1000 at most); the CLI reads every
# page: `shard ckpt ls` lists all of r1's (thousands, from the commit
# bursts) and `ckpt verify` follows the lineage across pages.
n_db=$(/usr/bin/python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM checkpoints WHERE run = '"'r1'"'").fetchone()[0])' "$T/broker.db")
n_cli=$("${SHARD:?}" --broker "http://127.0.0.1:$P" --token admin-t ckpt ls r1 --json | /usr/bin/python3 -c 'import json, sys; print(len(json.load(sys.stdin)["checkpoints"]))')
verdict=$("$SHARD" --broker "http://127.0.0.1:$P" --token admin-t ckpt verify r1 | tail -1)
[ "$n_db" -gt 1000 ] && [ "$n_cli" = "$n_db" ] && [ "$verdict" = "$n_db checkpoint(s), lineage ok" ] \
    && ok "shard ckpt ls and verify read every page: $n_cli of $n_db seals; $verdict" \
    || fail "ckpt pages: the CLI listed $n_cli of $n_db seals; verify: $verdict"
# ... and a reader that stops reading altogether is still cut: no byte of
# its answers moved for read_timeout_ms (1 s here), so the connection goes,
# long before 8 MB of answers could have been written to it.
/usr/bin/python3 - "$P" <<'PY' > "$T/stalled" && ok "a stalled reader of large answers is cut: $(cat "$T/stalled")" || fail "stalled reader: $(cat "$T/stalled")"
import socket, sys, time
port = int(sys.argv[1])
req = b"GET /v1/runs/r1/checkpoints HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer admin-t\r\n"
one = socket.create_connection(("127.0.0.1", port))
one.sendall(req + b"Connection: close\r\n\r\n")
size = 0
while chunk := one.recv(1 << 20):
    size += len(chunk)
n = (8 << 20) // size + 1
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", port))
s.sendall((req + b"\r\n") * (n - 1) + req + b"Connection: close\r\n\r\n")
time.sleep(4)   # stalled: four idle limits
got = 0
try:
    s.settimeout(10)
    while chunk := s.recv(1 << 20):
        got += len(chunk)
except OSError as e:
    pass
assert got < n * size, "all %d bytes arrived to a reader that stalled" % got
print("%d of %d bytes reached it" % (got, n * size))
PY
# Event streams have their own budget: one token holds at most
# limits.sse_streams_per_token (8) of them, the next is answered 429 with
# Retry-After, heartbeats go on being answered while they are held, and a
# closed stream gives its place back.
/usr/bin/python3 - "$P" <<'PY' > "$T/streams" && ok "stream budget: $(cat "$T/streams")" || fail "stream budget: $(cat "$T/streams")"
import socket, sys, time
port = int(sys.argv[1])
def open_stream():
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /v1/runs/r1/events?follow=1 HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer admin-t\r\n\r\n")
    s.settimeout(5)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk: break
        head += chunk
    return s, head
streams = [open_stream() for _ in range(12)]
codes = [h.split(b" ")[1].decode() for _, h in streams]
assert codes == ["200"] * 8 + ["429"] * 4, codes
assert all(b"Retry-After: 5" in h and b"too_many_streams" in h for _, h in streams[8:]), streams[8][1]
hb = b'{"run":"sb-hb","attempt":1,"node":"n1","ranks":[]}'
c = socket.create_connection(("127.0.0.1", port))
c.sendall(b"POST /v1/heartbeats HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer admin-t\r\nContent-Length: %d\r\n\r\n" % len(hb) + hb)
assert c.recv(4096).startswith(b"HTTP/1.1 204"), "heartbeat refused while streams are held"
for s, _ in streams: s.close()
time.sleep(0.5)
s, head = open_stream()
assert head.startswith(b"HTTP/1.1 200"), head
print("8 streams of one token, the 9th to 12th 429 with Retry-After; a heartbeat answered meanwhile; places given back on close")
PY
# SIGTERM mid-burst: answers still on their way from the store's thread are
# sent or dropped, never sent into a context that is gone.
commit_burst "$T/acked2" term &
CLIENT=$!
sleep 1
kill -TERM $PID; wait $PID; rc=$?; wait $CLIENT; PID=""
n=$(wc -l < "$T/acked2")
[ $rc = 0 ] && grep -q '"msg":"stopped"' "$T/log" && all_acked_sealed "$T/acked2" \
    && ok "SIGTERM mid-burst: exit 0, all $n acknowledged commits sealed" || fail "SIGTERM mid-burst: exit $rc"

# TLS: plain HTTP only when the config says so.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/key.pem" -out "$T/cert.pem" -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 2>/dev/null
sed -i "s|\"plain_http\": true|\"tls\": {\"cert\": \"$T/cert.pem\", \"key\": \"$T/key.pem\"}|" "$T/broker.json"
start
out=$(curl -s --cacert "$T/cert.pem" -H "Authorization: Bearer admin-t" "https://127.0.0.1:$P/v1/runs")
grep -q '"runs"' <<<"$out" && ok "TLS: https with the broker's certificate" || fail "TLS: $out"
curl -s -m 2 "http://127.0.0.1:$P/v1/health" | grep -q '"ok"' && fail "plain HTTP answered on a TLS port" || ok "TLS port refuses plain HTTP"
# ... and says so, and lets the socket go at once (not at read_timeout_ms).
t0=$(date +%s.%N)
/usr/bin/python3 -c 'import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
s.settimeout(5); s.recv(100); s.recv(100)' "$P" 2>/dev/null || true
held=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')
grep -q '"what":"TLS handshake"' "$T/log" && awk -v h="$held" 'BEGIN{exit !(h < 0.9)}' \
    && ok "a failed handshake is logged ($(grep -o '"reason":"[^"]*"' "$T/log" | tail -1)) and its socket closed after ${held}s" \
    || fail "failed handshake: held ${held}s, log: $(grep -c 'TLS handshake' "$T/log") lines"
# The same edges over TLS: an error answer to an upload the broker will not
# read reaches the client every time (lingering close after close_notify),
# and 12 of them in a row lose none.
/usr/bin/python3 - "$P" "$T/cert.pem" <<'PY' > "$T/tls-413" && ok "TLS: $(cat "$T/tls-413")" || fail "TLS 413: $(cat "$T/tls-413")"
import socket, ssl, sys
port, ca = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)
got = 0
for i in range(12):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1")
    body = b"x" * (2 << 20)
    s.sendall(b"POST /v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-t\r\nContent-Length: %d\r\n\r\n" % len(body))
    try:
        s.sendall(body)
    except OSError:
        pass   # the broker stopped reading: the answer must still come
    data = b""
    try:
        while True:
            d = s.recv(65536)
            if not d: break
            data += d
    except (OSError, ssl.SSLError):
        pass
    if data.startswith(b"HTTP/1.1 413"): got += 1
    else: print("upload %d: %r" % (i, data[:80]))
    s.close()
print("2 MB uploads over TLS: %d of 12 got their 413" % got)
sys.exit(0 if got == 12 else 1)
PY
kill -TERM $PID; wait $PID; PID=""
# Slowloris over TLS at the connection cap: 400 connections that trickle a
# ClientHello (or, handshaken, a header) against max_connections 200; health
# probes over TLS are answered, every one.
sed -i 's/"sse_keepalive_ms": 300}/"sse_keepalive_ms": 300, "max_connections": 200}/; s/"read_timeout_ms": 1000/"read_timeout_ms": 10000/' "$T/broker.json"
start
/usr/bin/python3 "$(dirname "$0")/slowloris.py" "$P" --tls "$T/cert.pem" > "$T/tls-loris" \
    && ok "TLS slowloris x400 at max_connections 200: $(cat "$T/tls-loris")" || fail "TLS slowloris: $(cat "$T/tls-loris")"
kill -TERM $PID; wait $PID; PID=""

# A hostile peer (tests/harness/hostile_peer.py) as this broker's only peer:
# its answers are untrusted input. Capacity: in every mode the peer is
# unknown, with a reason naming what was wrong, and the broker serves on.
HP=""
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null && wait $PID 2>/dev/null; [ -n "$HP" ] && kill $HP 2>/dev/null; unmount; rm -rf "$T"' EXIT
printf '%s\n' "$(hash peer-secret)" > "$T/peer.token"; chmod 600 "$T/peer.token"
echo ok > "$T/hp.mode"
/usr/bin/python3 "$HARNESS/hostile_peer.py" --port-file "$T/hp.port" --mode-file "$T/hp.mode" --log "$T/hp.log" --slow-seconds 7 &
HP=$!
for _ in $(seq 100); do [ -s "$T/hp.port" ] && break; sleep 0.05; done
cat > "$T/broker.json" <<CONF
{"listen": "127.0.0.1:0", "plain_http": true, "database": "$T/hostile.db", "broker_name": "home",
 "limits": {"body_bytes": 65536, "read_timeout_ms": 5000},
 "tokens": [{"name": "ops", "scope": "admin", "sha256": "$(hash admin-t)"}],
 "peers": [{"name": "hostile", "url": "http://127.0.0.1:$(cat "$T/hp.port")", "token_file": "$T/peer.token"}]}
CONF
start
capacity_is() {  # MODE PEER-STATUS REASON-TEXT
    echo "$1" > "$T/hp.mode"
    local t0=$SECONDS out; out=$(req GET /v1/capacity admin-t)
    /usr/bin/python3 - "$out" "$2" "$3" <<'PY' && kill -0 $PID 2>/dev/null && [ $((SECONDS - t0)) -le 4 ] \
        && ok "capacity, peer answers $1: 200, peer $2${3:+ ($3)}" || fail "capacity, peer answers $1: $out"
import json, sys
status, _, body = sys.argv[1].partition(" ")
assert status == "200", status
v = json.loads(body)
peer = v["peers"][0]
assert peer["name"] == "hostile" and peer["status"] == sys.argv[2], peer
assert sys.argv[3] in peer.get("reason", ""), peer
rows = [r for r in v["clusters"] if r["broker"] == "hostile"]
assert (len(rows) == 1) == (sys.argv[2] == "ok"), rows   # an unknown peer offers nothing
PY
}
capacity_is ok ok ""
capacity_is clusters-number unknown "clusters: expected an array"
capacity_is clusters-mixed unknown "clusters[0]: expected an object"
capacity_is job-string unknown "clusters: missing"
capacity_is message-number unknown "HTTP 409"
capacity_is not-json unknown "body: not JSON"
capacity_is huge unknown "larger than 1048576 bytes"
# A caller's own local=0 (or anything else) never reaches a peer: it is asked
# for its own clusters, with the known filters only.
echo ok > "$T/hp.mode"
expect "capacity with a caller's local=0" 200 '"status":"ok"' -- GET "/v1/capacity?local=0&class=H100&x=y" admin-t
tail -1 "$T/hp.log" | grep -q '"query": "local=1&class=H100"' && ok "the peer was asked: $(tail -1 "$T/hp.log")" \
    || fail "the peer was asked: $(tail -1 "$T/hp.log")"
expect "capacity filter of the wrong form" 400 '"field":"class"' -- GET "/v1/capacity?class=a%26local%3D0" admin-t
capacity_is slow unknown "imeout"
echo ok > "$T/hp.mode"

# Decisions: one 'forwarding' decision per hostile mode, addressed to the
# peer, written straight into the database (as a crash after a requeue
# leaves them). Every one must end (failed, the run DEGRADED, a PLACEMENT
# event naming the field) and the broker must live through it, also when
# killed -9 half-way and started again on the same database.
kill -9 $PID; wait $PID 2>/dev/null; PID=""
DMODES="clusters-number message-number job-string rejected-mixed not-json huge"
seed_decisions() {  # MODE...
    /usr/bin/python3 - "$T/hostile.db" "$@" <<'PY'
import json, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
now = time.time()
for mode in sys.argv[2:]:
    run, did = "hp-" + mode, "home:hp-%s/attempt-2" % mode
    payload = {"id": did, "from_broker": "home", "run": run, "from_attempt": 1, "to_attempt": 2,
               "spec": {"user": "nobody", "nodes": 1, "tasks": 1, "cluster": "gone", "job": 5}, "script": "#!/bin/sh\ntrue\n",
               "owner": "ops", "resume": "latest", "manifest": "{}", "requires": {}, "local_rejected": ""}
    db.execute("INSERT INTO runs (id, owner, state, attempt, manifest, world_size, created, updated) "
               "VALUES (?, 'ops', 'RECOVERING', 1, '{}', 1, ?, ?)", (run, now, now))
    db.execute("INSERT INTO decisions (id, run, from_attempt, to_attempt, cluster, exclude, old_job, new_job, state, created, peer, payload) "
               "VALUES (?, ?, 1, 2, 'gone', '', 5, NULL, 'forwarding', ?, 'hostile', ?)", (did, run, now, json.dumps(payload)))
db.commit()
PY
}
# events_check MODE PYTHON-CONDITION-ON-EVENTS: true when it holds
events_check() {
    /usr/bin/python3 - "$(req GET "/v1/runs/hp-$1/events" admin-t)" "$2" <<'PY'
import json, sys
status, _, body = sys.argv[1].partition(" ")
events = json.loads(body)["events"] if status == "200" else []
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}
seed_decisions $DMODES
echo "decisions=by-run" > "$T/hp.mode"
start
for _ in $(seq 100); do  # the first bad answer of each
    all=1; for m in $DMODES; do events_check $m 'any(e["kind"] == "DELIVERY" for e in events)' || all=0; done
    [ $all = 1 ] && break; sleep 0.1
done
[ $all = 1 ] && ok "decisions: every bad answer recorded as a DELIVERY event, retried" || fail "no DELIVERY events: $(req GET /v1/runs/hp-huge/events admin-t)"
kill -9 $PID; wait $PID 2>/dev/null; PID=""
start
ended='any(e["kind"] == "PLACEMENT" and "the decision ends" in e["cause"] and e["evidence"]["peer"] == "hostile" for e in events)'
for _ in $(seq 150); do
    all=1; for m in $DMODES; do events_check $m "$ended" || all=0; done
    [ $all = 1 ] && break; sleep 0.1
done
kill -0 $PID 2>/dev/null && ok "decisions: broker up after 5 bad answers per mode and a kill -9 between" || fail "broker died: $(tail -5 "$T/log")"
decision_ended() {  # MODE FIELD
    events_check "$1" "$ended and any(e['evidence'].get('field') == '$2' and '$2' in e['cause'] for e in events if e['kind'] == 'PLACEMENT')" \
        && req GET "/v1/runs/hp-$1" admin-t | grep -q '"state":"DEGRADED"' \
        && ok "decision answered $1: ended, run DEGRADED, PLACEMENT event names $2" \
        || fail "decision answered $1: $(req GET "/v1/runs/hp-$1/events" admin-t)"
}
decision_ended clusters-number accepted
decision_ended message-number error.message
decision_ended job-string accepted
decision_ended rejected-mixed "rejected[0]"
decision_ended not-json body
decision_ended huge body
/usr/bin/python3 - "$T/hostile.db" <<'PY' && ok "decisions: all failed in the database, none left forwarding" || fail "decisions in the database"
import sqlite3, sys
rows = dict(sqlite3.connect(sys.argv[1]).execute("SELECT run, state FROM decisions"))
assert all(s == "failed" for s in rows.values()), rows
PY
# Started again, the broker sends none of them again.
kill -9 $PID; wait $PID 2>/dev/null; PID=""
sent=$(grep -c decisions "$T/hp.log")
start
sleep 1
[ "$(grep -c decisions "$T/hp.log")" = "$sent" ] && kill -0 $PID 2>/dev/null && expect "restarted after the bad peer" 200 '"ok":true' -- GET /v1/health "" \
    || fail "decisions sent again after a restart"
# A peer that answers too slowly has not answered: the decision is resent
# (backoff), the broker serves meanwhile, and it is not ended.
kill -9 $PID; wait $PID 2>/dev/null; PID=""
seed_decisions slow
start
sleep 6
expect "serving while a peer is slow" 200 '"ok":true' -- GET /v1/health ""
grep '"decision not delivered"' "$T/log" | grep -q '"peer":"hostile"' && \
    [ "$(/usr/bin/python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT state FROM decisions WHERE run = ?", ("hp-slow",)).fetchone()[0])' "$T/hostile.db")" = forwarding ] \
    && ok "a slow peer: decision not delivered (logged), still forwarding, to be resent" || fail "slow peer: $(tail -3 "$T/log")"
kill -TERM $PID; wait $PID; rc=$?; PID=""
[ $rc = 0 ] && ok "SIGTERM with a slow peer: exit 0" || fail "SIGTERM with a slow peer: exit $rc"
kill $HP 2>/dev/null; wait $HP 2>/dev/null; HP=""

# Out of file descriptors: the broker waits between accepts instead of
# spinning a core, says so, and serves again once connections go.
write_config ""
rm -f "$T/port"
(ulimit -n 48; exec "$BROKER" --config "$T/broker.json" --port-file "$T/port" 2>> "$T/log") &
PID=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
P=$(cat "$T/port")
/usr/bin/python3 - "$P" "$PID" <<'PY' && ok "out of descriptors: $(grep -c 'accept (waiting 100 ms)' "$T/log") accept waits logged, little CPU, serving again after" || fail "out of descriptors"
import socket, sys, time, urllib.request
port, pid = int(sys.argv[1]), sys.argv[2]
def cpu():
    f = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / 100.0   # utime + stime, in s
held = []
for _ in range(80):
    held.append(socket.create_connection(("127.0.0.1", port)))
time.sleep(0.3)
c0, t0 = cpu(), time.time()
time.sleep(2)
used = cpu() - c0
assert used < 0.5, "the broker used %.2f s of CPU in 2 s with no descriptors left" % used
for s in held: s.close()
time.sleep(0.5)
assert b'"ok"' in urllib.request.urlopen("http://127.0.0.1:%d/v1/health" % port, timeout=3).read()
print("cpu in 2 s while out of descriptors: %.2f s" % used)
PY
kill -TERM $PID; wait $PID; PID=""

# Slowloris at the connection cap: 400 connections trickling header bytes
# against max_connections 200. Each new connection sheds the one that has
# waited longest for a header, so /v1/health probes are answered, every one.
write_config ""
sed -i 's/"sse_keepalive_ms": 300}/"sse_keepalive_ms": 300, "max_connections": 200}/; s/"read_timeout_ms": 1000/"read_timeout_ms": 10000/' "$T/broker.json"
start
/usr/bin/python3 "$(dirname "$0")/slowloris.py" "$P" > "$T/loris" \
    && ok "slowloris x400 at max_connections 200: $(cat "$T/loris")" || fail "slowloris at the cap: $(cat "$T/loris")"
# The same with the header whole and the body trickled (no token needed:
# a request is authenticated once it is read): 220 connections that sent
# a POST's header and 1 byte of its 1000, against 200; each is shed as a
# slow header is, so /v1/health probes are answered, every one.
/usr/bin/python3 - "$P" <<'PY' > "$T/body-loris" && ok "body slowloris x220 at max_connections 200: $(cat "$T/body-loris")" || fail "body slowloris at the cap: $(cat "$T/body-loris")"
import socket, sys, urllib.request
port = int(sys.argv[1])
held = []
for _ in range(220):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/runs HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
    held.append(s)
def probe():
    try:
        return b'"ok"' in urllib.request.urlopen("http://127.0.0.1:%d/v1/health" % port, timeout=3).read()
    except OSError:
        return False
answered = sum(probe() for _ in range(20))
assert answered == 20, "%d of 20 probes answered" % answered
print("20 of 20 probes answered")
for s in held: s.close()
PY
# Readers that hold every connection with answers they never take (230
# connections, each with more of the dashboard's largest file asked for
# than the socket buffers hold, against 200): a new connection sheds the
# one whose reader has gone longest without taking 16 KiB, so /v1/health
# probes (an agent's heartbeat) are answered, every one.
/usr/bin/python3 - "$P" <<'PY' > "$T/slow-cap" && ok "slow readers x230 at max_connections 200: $(cat "$T/slow-cap")" || fail "slow readers at the cap: $(cat "$T/slow-cap")"
import socket, sys, time, urllib.request
port = int(sys.argv[1])
req = b"GET /ui/run.js HTTP/1.1\r\nHost: b\r\n\r\n"
one = socket.create_connection(("127.0.0.1", port))
one.sendall(req[:-2] + b"Connection: close\r\n\r\n")
size = 0
while chunk := one.recv(1 << 20):
    size += len(chunk)
depth = (4 << 20) // size + 1
held = []
def slow_readers(n):
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(req * depth)
        held.append(s)
slow_readers(230)
def probe(tries=1):
    # An agent that is refused sends its heartbeat again at the next beat.
    for _ in range(tries):
        try:
            return b'"ok"' in urllib.request.urlopen("http://127.0.0.1:%d/v1/health" % port, timeout=3).read()
        except OSError:
            time.sleep(0.5)
    return False
# (A request in flight is not shed, nor a reader until it has gone a
# quarter of read_timeout_ms (2.5 s) without taking 16 KiB: the first
# probes may come before every connection has stalled in a write.)
t0 = time.time()
while not probe():
    assert time.time() - t0 < 30, "no probe answered in 30 s"
    time.sleep(0.2)
answered = sum(probe(3) for _ in range(20))
assert answered == 20, "%d of 20 probes answered (3 tries each)" % answered
# The readers stalled, 40 more: those past the cap each shed the reader
# longest without progress (a connection waiting for its request goes first,
# and a free place is taken before either: there may have been some).
time.sleep(3)
slow_readers(40)
time.sleep(1)
print("20 of 20 probes answered; %d answers of %d bytes asked for on each connection" % (depth, size))
for s in held: s.close()
PY
kill -TERM $PID; wait $PID; PID=""
readers=$(grep '"msg":"draining"' "$T/log" | tail -1 | grep -o '"shed_waiting_for_reader":[0-9]*' | cut -d: -f2)
[ "${readers:-0}" -gt 0 ] && ok "slow readers shed for new connections: $readers (the drain's count)" || fail "no slow reader shed: $(grep '"msg":"draining"' "$T/log" | tail -1)"

# Slow SSE readers: 20 streams that never read follow a run of 12000
# events. The backlog comes a page at a time, so they hold little; a
# stream that takes nothing for four keep-alive periods (or falls more than
# limits.sse_buffer_bytes behind live events) is dropped with a log line
# naming the run and its last event id; the broker's RSS stays
# bounded; a reconnect with Last-Event-ID gets exactly the events after it.
write_config ""
sed -i 's/"sse_keepalive_ms": 300}/"sse_keepalive_ms": 300, "sse_buffer_bytes": 65536, "sse_streams_per_token": 32}/; s|broker.db|sse.db|' "$T/broker.json"
start; kill -TERM $PID; wait $PID; PID=""
/usr/bin/python3 - "$T/sse.db" <<'PY'
import json, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1]); now = time.time()
db.execute("INSERT INTO runs (id, owner, state, attempt, manifest, world_size, created, updated) VALUES ('sse-big', 'ops', 'RUNNING', 1, '{}', 1, ?, ?)", (now, now))
ev = json.dumps({"note": "x" * 150})
db.executemany("INSERT INTO events (run, time, kind, cause, evidence) VALUES ('sse-big', ?, 'NOTE', 'seeded', ?)", [(now, ev)] * 12000)
db.commit()
PY
start
/usr/bin/python3 - "$P" "$PID" "$T/sse.db" "$T/log" <<'PY' > "$T/sse-slow" && ok "slow SSE readers: $(cat "$T/sse-slow")" || fail "slow SSE readers: $(cat "$T/sse-slow")"
import http.client, json, re, socket, sqlite3, sys, time
port, pid, dbfile, logfile = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
def rss():
    return int(re.search(r"VmRSS:\s+(\d+)", open("/proc/%s/status" % pid).read()).group(1)) / 1024.0
def follow(extra=b""):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /v1/runs/sse-big/events?follow=1&after=0 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-t\r\n" + extra + b"\r\n")
    return s
def ids(data):
    return [int(m) for m in re.findall(rb"(?m)^id: (\d+)\n(?:.*\n)*?\n", data)]
def drops():
    return [json.loads(l) for l in open(logfile, errors="replace") if '"slow event stream dropped"' in l]
log0 = len(drops())
r0 = rss()
streams = [follow() for _ in range(20)]
time.sleep(2)
r1 = rss()
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
def post(path, body):
    c.request("POST", path, body, {"Authorization": "Bearer admin-t"}); r = c.getresponse(); r.read(); return r.status
assert post("/v1/heartbeats", '{"run":"sse-big","attempt":1,"node":"n1","ranks":[]}') == 204
for i in range(100):   # live events, while they stall on their backlog
    assert post("/v1/runs/sse-big/checkpoints/live-%d/commit" % i, '{"attempt":1,"rank":0,"world_size":1,"files":[{"path":"s","sha256":"00","bytes":1}]}') == 200
for _ in range(200):
    if len(drops()) - log0 >= 20: break
    time.sleep(0.1)
r2 = rss()
dropped = drops()[log0:]
assert len(dropped) == 20 and all(d["run"] == "sse-big" and d["last_event_id"] > 0 for d in dropped), dropped
db_ids = [r[0] for r in sqlite3.connect(dbfile).execute("SELECT id FROM events WHERE run = 'sse-big' ORDER BY id")]
lasts = []
for s in streams:   # each got a whole prefix of the run's events, then EOF
    s.settimeout(10); data = b""
    while chunk := s.recv(1 << 20): data += chunk
    got = ids(data)
    assert got == db_ids[:len(got)] and got, (len(got), got[:3])
    lasts.append(got[-1]); s.close()
time.sleep(1)
r3 = rss()
last = lasts[0]
s = follow(b"Last-Event-ID: %d\r\n" % last)
want = [i for i in db_ids if i > last]
s.settimeout(10); data = b""
while len(ids(data)) < len(want):
    chunk = s.recv(1 << 20)
    assert chunk, "stream ended"
    data += chunk
s.close()
assert ids(data) == want, (len(ids(data)), len(want))
assert r1 - r0 < 60 and r2 - r0 < 80, (r0, r1, r2)
print("20 streams dropped (logged, last ids %d..%d), resumed after %d: %d events, no gap or repeat; RSS %.1f MB -> %.1f held -> %.1f at the drops -> %.1f after"
      % (min(d["last_event_id"] for d in dropped), max(d["last_event_id"] for d in dropped), last, len(want), r0, r1, r2, r3))
PY
kill -TERM $PID; wait $PID; PID=""

# SIGTERM drains within limits.drain_seconds (2 s here), whatever holds it
# open: three event streams, a reader that never reads its large answers
# (read_timeout_ms would wait 60 s for it) and a write the database keeps
# waiting (another process holds it locked; store_busy_ms 60 s). The log
# says what was cut: the requests, the streams, the store's queue.
write_config ""
sed -i 's/"body_bytes": 65536, "read_timeout_ms": 1000,/"body_bytes": 1048576, "read_timeout_ms": 60000, "store_busy_ms": 60000, "drain_seconds": 2,/; s|broker.db|drain.db|' "$T/broker.json"
start
rm -f "$T/held"
/usr/bin/python3 - "$P" "$T/drain.db" "$T/held" <<'PY' > "$T/holder" 2>&1 &
import http.client, json, socket, sqlite3, sys, time
port, dbfile, held = int(sys.argv[1]), sys.argv[2], sys.argv[3]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
# A run whose PENDING event carries a 900 KB manifest: each events answer is that large.
c.request("POST", "/v1/runs", json.dumps({"id": "big", "manifest": {"note": "x" * 900000}}), {"Authorization": "Bearer admin-t"})
r = c.getresponse(); r.read(); assert r.status == 201, r.status
def conn(rcvbuf=None):
    s = socket.socket()
    if rcvbuf: s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    return s
streams = []
for _ in range(3):
    s = conn(); s.sendall(b"GET /v1/runs/big/events?follow=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-t\r\n\r\n")
    assert s.recv(4096).startswith(b"HTTP/1.1 200"); streams.append(s)
req = b"GET /v1/runs/big/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-t\r\n\r\n"
slow = conn(4096); slow.sendall(req * 12)   # 10 MB of answers it never reads
time.sleep(0.5)
db = sqlite3.connect(dbfile, timeout=10, isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
waits = conn(); body = b'{"id":"waits"}'
waits.sendall(b"POST /v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-t\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
time.sleep(0.5)
open(held, "w").write("held\n")
time.sleep(120)
PY
HOLDER=$!
for _ in $(seq 100); do [ -s "$T/held" ] && break; sleep 0.1; done
t0=$(date +%s%N)
kill -TERM $PID; wait $PID; rc=$?; PID=""
took=$(( ($(date +%s%N) - t0) / 1000000 ))   # ms
kill $HOLDER 2>/dev/null; wait $HOLDER 2>/dev/null
cut=$(grep '"closing connections"' "$T/log" | tail -1)
deadline=$(grep '"drain deadline passed: exiting now"' "$T/log" | tail -1)
[ -s "$T/held" ] && [ $rc = 0 ] && [ $took -lt 3500 ] \
    && grep -q '"requests_cut":2' <<<"$cut" && grep -q '"streams_cut":3' <<<"$cut" \
    && grep -q '"store_jobs_cut":[1-9]' <<<"$deadline" \
    && ok "SIGTERM with 3 streams, a reader that does not read and a locked database: exit 0 in $took ms (drain_seconds 2); cut: $(grep -o '"requests_cut":[0-9]*,"streams_cut":[0-9]*' <<<"$cut"), $(grep -o '"store_jobs_cut":[0-9]*' <<<"$deadline")" \
    || fail "bounded drain: rc $rc in $took ms; $(cat "$T/holder"); cut: $cut; deadline: $deadline"

echo "# broker: $fails failed"
[ $fails = 0 ]
