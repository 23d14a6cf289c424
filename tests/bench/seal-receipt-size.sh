#!/bin/bash
# A seal of FILES files (default 100,000; RANKS ranks of FILES/RANKS files
# each, default 100) on a real broker that signs receipts: the seal
# receipt's size, the broker's peak and final RSS, how long the sealing
# commit took, and (where the broker serves it) how long one rank's list
# with proofs and the whole list by pages take. Given a second build (the
# previous version's), both side by side:
#   tests/bench/seal-receipt-size.sh build [BEFORE_BUILD]
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
FILES=${FILES:-100000}
RANKS=${RANKS:-100}
measure() {  # BUILD -> one JSON line of figures
    local build=$1 T PID
    T=$(mktemp -d)
    openssl genpkey -algorithm ed25519 -out "$T/receipts.key" 2>/dev/null && chmod 600 "$T/receipts.key"
    cat > "$T/broker.json" <<CONF
{"listen": "127.0.0.1:0", "plain_http": true, "database": "$T/broker.db", "broker_name": "bench",
 "receipts": {"key_file": "$T/receipts.key"},
 "limits": {"body_bytes": 67108864, "rate_per_token": 100000000, "rate_burst": 100000000},
 "tokens": [{"name": "ops", "scope": "admin", "sha256": "$(printf admin-t | sha256sum | cut -d' ' -f1)"}]}
CONF
    "$build/broker/shardnet-broker" --config "$T/broker.json" --port-file "$T/port" 2> "$T/log" &
    PID=$!
    for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
    /usr/bin/python3 - "$(cat "$T/port")" "$PID" "$FILES" "$RANKS" <<'PY' || { kill $PID; rm -rf "$T"; exit 1; }
import hashlib, http.client, json, sys, time
port, pid, files, ranks = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def status(key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
def call(method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request(method, path, json.dumps(body) if body is not None else None, {"Authorization": "Bearer admin-t"})
    r = c.getresponse()
    data = r.read()
    assert r.status in (200, 204), (path, r.status, data[:300])
    return data
call("POST", "/v1/heartbeats", {"run": "big", "attempt": 1, "node": "n1", "step": "batch", "cluster": "c1", "job": 7, "interval": 60,
                                "state": "running", "ranks": []})
rss0 = status("VmRSS")
per = files // ranks
for r in range(ranks):
    fs = [{"path": f"rank-{r}/part-{i:06d}.pt", "sha256": hashlib.sha256(f"{r}/{i}".encode()).hexdigest(), "bytes": 1 << 20}
          for i in range(per)]
    t0 = time.monotonic()
    ans = json.loads(call("POST", "/v1/runs/big/checkpoints/checkpoint-00000100/commit",
                          {"attempt": 1, "rank": r, "world_size": ranks, "files": fs}))
    seal_s = time.monotonic() - t0
assert ans["sealed"], ans
out = {"files": per * ranks, "seal_s": seal_s, "rss_before": rss0, "rss_after": status("VmRSS"), "rss_peak": status("VmHWM")}
recs = json.loads(call("GET", "/v1/runs/big/receipts"))["receipts"]
out["receipt_bytes"] = max(len(json.dumps(x["envelope"], separators=(",", ":"))) for x in recs if x["kind"] == "checkpoint-sealed")
t0 = time.monotonic()
try:
    rank0 = json.loads(call("GET", "/v1/runs/big/checkpoints/checkpoint-00000100/files?rank=0"))
    out["rank_list_s"] = time.monotonic() - t0
    if rank0.get("list"):
        t0, frm, n = time.monotonic(), 0, 0
        while frm is not None:
            page = json.loads(call("GET", f"/v1/runs/big/checkpoints/checkpoint-00000100/files?from={frm}"))
            n += len(page["files"])
            frm = page["next_from"]
        out["whole_list_s"], out["whole_list_files"] = time.monotonic() - t0, n
        # Asked again, as each rank's load() and each verify does: a broker
        # that keeps the seal's list does not build it again.
        t0 = time.monotonic()
        json.loads(call("GET", "/v1/runs/big/checkpoints/checkpoint-00000100/files?rank=0"))
        out["rank_list_again_s"] = time.monotonic() - t0
        t0 = time.monotonic()
        for r in range(1, 11):
            json.loads(call("GET", f"/v1/runs/big/checkpoints/checkpoint-00000100/files?rank={r}"))
        out["rank_lists_10_s"] = time.monotonic() - t0
        out["rss_peak_after_lists"] = status("VmHWM")
        out["rss_after_lists"] = status("VmRSS")
except AssertionError:
    pass
print(json.dumps(out))
PY
    kill $PID; wait $PID 2>/dev/null || true
    rm -rf "$T"
}
after=$(measure "$(cd "$1" && pwd)")
before=""
[ -n "${2:-}" ] && before=$(measure "$(cd "$2" && pwd)")
/usr/bin/python3 - "$after" "$before" <<'PY'
import json, sys
a = json.loads(sys.argv[1]); b = json.loads(sys.argv[2]) if sys.argv[2] else {}
mib = lambda x: "%.1f MiB" % (x / 2**20) if x is not None else "-"
rows = [("files sealed", lambda v: "%d" % v["files"]),
        ("seal receipt (envelope bytes)", lambda v: "{:,}".format(v["receipt_bytes"])),
        ("broker RSS before the commits", lambda v: mib(v["rss_before"])),
        ("broker RSS after the seal", lambda v: mib(v["rss_after"])),
        ("broker peak RSS through the seal", lambda v: mib(v["rss_peak"])),
        ("the sealing commit", lambda v: "%.2f s" % v["seal_s"]),
        ("GET files?rank=0 (with proofs)", lambda v: "%.2f s" % v["rank_list_s"] if "rank_list_s" in v else "-"),
        ("GET files, whole list by pages", lambda v: "%.2f s (%d files)" % (v["whole_list_s"], v["whole_list_files"]) if "whole_list_s" in v else "-"),
        ("GET files?rank=0 again", lambda v: "%.3f s" % v["rank_list_again_s"] if "rank_list_again_s" in v else "-"),
        ("GET files?rank=1..10 (10 requests)", lambda v: "%.3f s" % v["rank_lists_10_s"] if "rank_lists_10_s" in v else "-"),
        ("broker peak RSS after the lists", lambda v: mib(v.get("rss_peak_after_lists"))),
        ("broker RSS after the lists", lambda v: mib(v.get("rss_after_lists")))]
print("%-36s %24s %24s" % ("", "before" if b else "", "this build"))
for name, f in rows:
    print("%-36s %24s %24s" % (name, f(b) if b else "", f(a)))
PY
