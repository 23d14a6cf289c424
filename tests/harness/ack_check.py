#!/usr/bin/python3
"""Every acknowledgement in an ack_proxy.py log is still in the broker's
database: a commit answered 2xx has its row (or its checkpoint is sealed),
a commit answered sealed=true has its checkpoint, and a checkpoint every rank
of a world was told 2xx for is sealed. Prints one line of counts; exit 1
with the missing records named.
Usage: ack_check.py LOG DATABASE [LABEL]
"""
import json, sqlite3, sys

log, dbpath = sys.argv[1], sys.argv[2]
label = sys.argv[3] if len(sys.argv) > 3 else ""
# The log first, then the database: an answer is logged after its broker
# wrote it, so every ack read here is in the database read after. (The
# other order lost the acks a running broker gave between the two reads.)
with open(log) as f:
    lines = f.readlines()
db = sqlite3.connect("file:%s?mode=ro" % dbpath, uri=True, timeout=30)
rows = set(db.execute("SELECT run, attempt, name, rank FROM commits"))
sealed = set(db.execute("SELECT run, name FROM checkpoints"))
# A name a peer's decision carried sealed: a commit of it is answered with
# that seal (already_sealed), nothing written (broker/seals/held_seal.hpp).
if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'carried_seals'").fetchone():
    sealed |= set(db.execute("SELECT run, name FROM carried_seals"))
acked, told_sealed, refused, unanswered, heartbeats = 0, 0, 0, 0, 0
missing = []
ranks = {}  # (run, attempt, name) -> (world, {ranks acked})
for line in lines:
    try:
        r = json.loads(line)
    except ValueError:
        continue  # a line cut short by a kill of the proxy's writer: not an answer anyone saw
    if r["path"].startswith("/v1/heartbeats"):
        heartbeats += 200 <= r["status"] < 300
    if not r["path"].endswith("/commit"):
        continue
    if r["status"] == 0:
        unanswered += 1
        continue
    if not 200 <= r["status"] < 300:
        refused += 1
        continue
    acked += 1
    run = r["path"].split("/")[3]
    name = r["path"].split("/")[5]
    q = r.get("req") or {}
    attempt, rank, world = q.get("attempt"), q.get("rank"), q.get("world_size")
    if (run, attempt, name, rank) not in rows and (run, name) not in sealed:
        missing.append("commit %s attempt %s %s rank %s (answered %s)" % (run, attempt, name, rank, r["status"]))
    if (r.get("resp") or {}).get("sealed"):
        told_sealed += 1
        if (run, name) not in sealed:
            missing.append("seal of %s %s (told sealed=true)" % (run, name))
    k = (run, attempt, name)
    w = (r.get("resp") or {}).get("of") or world
    ranks.setdefault(k, (w, set()))[1].add(rank)
complete = 0
for (run, attempt, name), (world, got) in ranks.items():
    if world and len(got) >= world:
        complete += 1
        if (run, name) not in sealed:
            missing.append("seal of %s %s (all %d ranks of attempt %s answered 2xx)" % (run, name, world, attempt))
print("%sacked commits %d (sealed answers %d, checkpoints every rank acked %d), refused %d, unanswered %d, "
      "acked heartbeats %d; lost %d" % (label + ": " if label else "", acked, told_sealed, complete, refused, unanswered,
                                        heartbeats, len(missing)))
for m in missing[:20]:
    print("  LOST:", m)
sys.exit(1 if missing else 0)
