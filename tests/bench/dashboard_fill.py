#!/usr/bin/python3
"""Fills a stopped broker's database (its schema made by a first start) for
tests/bench/dashboard-render.sh: RUNS runs of the account OWNER, one of
them (run-big) with BIG events, the others sharing the rest of EVENTS:
seals, faults and recoveries across clusters alpha and beta, with the
evidence the broker writes (see tests/web/seed_recovery.py). Written
straight into SQLite: through the API a standalone broker (no Slurm)
cannot make FAULTs and recoveries, and 20,000 events would take minutes.
Usage: dashboard_fill.py DB RUNS EVENTS BIG OWNER"""
import json
import pwd
import sqlite3
import sys
import time

db, runs, total, big, owner = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
con = sqlite3.connect(db)
if not con.execute("SELECT name FROM sqlite_master WHERE name = 'attempts'").fetchone():
    sys.exit(f"{db}: no broker schema (start the broker on it once first)")
uid = pwd.getpwnam(owner).pw_uid
now = time.time()


def history(run, n, t):
    """n events of a run from time t: 3 seals, then a fault and its recovery, again and again."""
    out, attempts, checkpoints, attempt, seal, parent = [], [(1, "beta")], [], 1, 0, None
    cluster = "beta"
    out.append((t, "PENDING", f"run created by {owner}", {}))
    while len(out) < n:
        t += 5
        kind = len(out) % 8
        if kind in (1, 2, 3):
            seal += 100
            name = f"ckpt-{seal}"
            out.append((t, "SEALED", f"{name} committed by all 8 ranks", {"checkpoint": name, "attempt": attempt, "ranks": 8, "parent": parent}))
            checkpoints.append((run, name, attempt, 8, parent or "", t))
            parent = name
        elif kind == 4:
            out.append((t, "FAULT", "worker n1 silent for 3 heartbeats", {"node": "n1", "attempt": attempt, "last_seen": t - 3,
                                                                          "interval": 1, "silent_for": 3, "last_step": seal + 40}))
        elif kind == 5:
            other = "alpha" if cluster == "beta" else "beta"
            ev = {"decision": f"west:{run}/attempt-{attempt + 1}", "from_cluster": cluster, "target": other, "nodes": ["n2"],
                  "rejected": [{"cluster": cluster, "reason": "no idle node"}], "new_job": 1000 + attempt, "resume": parent}
            out.append((t, "PLACEMENT", f"{other} n2: job {1000 + attempt}, attempt {attempt + 1}", ev))
            out.append((t + 0.2, "RECOVERING", f"attempt {attempt + 1} submitted", ev))
            attempt, cluster = attempt + 1, other
            attempts.append((attempt, cluster))
        elif kind == 7:
            out.append((t, "ATTEMPT", f"attempt {attempt} heartbeats; older attempts fenced", {"attempt": attempt}))
            out.append((t + 1, "RECOVERED", f"attempt {attempt} heartbeats from all 1 node(s)", {"attempt": attempt, "nodes": 1}))
        else:
            out.append((t, "PROGRESS", "a note", {"attempt": attempt}))
    return out[:n], attempts[: attempt], checkpoints, attempt


rest = total - big
with con:
    for i in range(runs):
        run = "run-big" if i == 0 else f"run-{i:04d}"
        n = big if i == 0 else rest // (runs - 1) + (1 if i <= rest % (runs - 1) else 0)
        start = now - 5 * n - 60
        events, attempts, checkpoints, attempt = history(run, n, start)
        con.execute("INSERT INTO runs (id, owner, state, attempt, manifest, world_size, created, updated, owner_uid) VALUES (?,?,?,?,?,?,?,?,?)",
                    (run, owner, "RUNNING", attempt, "{}", 8, start, events[-1][0], uid))
        con.executemany("INSERT INTO events (run, time, kind, cause, evidence) VALUES (?,?,?,?,?)",
                        [(run, t, k, c, json.dumps(e)) for t, k, c, e in events])
        con.executemany("INSERT INTO attempts (run, attempt, cluster, job, world) VALUES (?,?,?,?,8)",
                        [(run, a, c, 1000 + a) for a, c in attempts])
        con.executemany("INSERT INTO checkpoints (run, name, attempt, ranks, parent, sealed_at) VALUES (?,?,?,?,?,?)", checkpoints)
print(con.execute("SELECT count(*) FROM runs").fetchone()[0], "runs,", con.execute("SELECT count(*) FROM events").fetchone()[0], "events")
