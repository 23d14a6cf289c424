#!/usr/bin/python3
"""Writes, into a stopped broker's database, the rest of a run killed on
beta and resumed on alpha: what the broker itself writes when Slurm is
there (the FAULT of broker/service_faults.cpp, the applied PLACEMENT and
RECOVERING of broker/recovery/requeue.cpp, the ATTEMPT of
broker/service_heartbeats.cpp, the RECOVERED of check_recovered), with the
same evidence keys, each event after the last one there. A standalone
broker has no Slurm to submit attempt 2 with, so the test writes what it
would have. Usage: seed_recovery.py DB RUN"""
import json
import sqlite3
import sys

db, run = sys.argv[1], sys.argv[2]
con = sqlite3.connect(db)
last = con.execute("SELECT max(time) FROM events WHERE run = ?", (run,)).fetchone()[0]
seen = con.execute("SELECT max(last_seen) FROM workers WHERE run = ? AND attempt = 1", (run,)).fetchone()[0] or last
step = con.execute("SELECT max(last_step) FROM workers WHERE run = ? AND attempt = 1", (run,)).fetchone()[0]
seal = con.execute("SELECT name FROM checkpoints WHERE run = ? ORDER BY sealed_at DESC LIMIT 1", (run,)).fetchone()[0]
decision = f"west:{run}/attempt-2"
t_fault = max(last, seen) + 3.0   # three missed 1 s heartbeats
fault = {"confirmed": True, "slurm_job_state": "NODE_FAIL", "slurm_node_state": "down*", "slurmd_answers": False,
         "node": "b1", "attempt": 1, "last_seen": seen, "interval": 1, "silent_for": t_fault - seen, "last_step": step, "job": 101}
place = {"decision": decision, "from_cluster": "beta", "excluded": "b1", "old_job": 101, "requires": {"nodes": 2},
         "resume": seal, "rejected": [{"cluster": "beta", "reason": "1 idle node without b1, 2 needed"}],
         "target": "alpha", "nodes": ["a1", "a2"], "fabric": "ethernet", "new_job": 202}
events = [
    (t_fault, "FAULT", "worker b1 silent for 3 heartbeats; Slurm job 101 NODE_FAIL", fault),
    (t_fault + 0.6, "PLACEMENT", f"alpha a1,a2: job 202, attempt 2; beta rejected: {place['rejected'][0]['reason']}", place),
    (t_fault + 0.7, "RECOVERING", f"attempt 2 submitted with --shardnet-resume={seal}", place),
    (t_fault + 2.2, "ATTEMPT", "attempt 2 heartbeats; older attempts fenced", {"attempt": 2}),
    (t_fault + 2.9, "RECOVERED", "attempt 2 heartbeats from all 2 node(s)", {"attempt": 2, "nodes": 2}),
    # Then an admin's scontrol requeue of job 202 (broker/detector/slurm_end.cpp), and Slurm starting it again.
    (t_fault + 3.5, "REQUEUED", "Slurm requeued job 202 itself (PENDING, BeginTime; restart 1): not a failure; attempt 2 goes on when Slurm "
                                "starts it again", {"attempt": 2, "job": 202, "slurm_job_state": "PENDING", "restarts": 1}),
    (t_fault + 5.0, "RESUMED", "Slurm started job 202 again after its own requeue, on a1,a2; attempt 2 goes on",
     {"attempt": 2, "job": 202, "cluster": "alpha", "nodes": "a1,a2", "slurm_requeues": 1}),
]
with con:
    for t, kind, cause, ev in events:
        con.execute("INSERT INTO events (run, time, kind, cause, evidence) VALUES (?,?,?,?,?)", (run, t, kind, cause, json.dumps(ev)))
    con.execute("INSERT OR REPLACE INTO attempts (run, attempt, cluster, job, world) VALUES (?,1,'beta',101,2), (?,2,'alpha',202,2)", (run, run))
    con.execute("UPDATE runs SET state = 'RUNNING', attempt = 2, updated = ? WHERE id = ?", (t_fault + 2.9, run))
    # The recovery's phases as broker/policy/policy.cpp times them once
    # attempt 2 steps (one sample of R): detect, place, start, first step.
    con.execute("INSERT OR REPLACE INTO recoveries (run, attempt, tier, detect, place, start, restore, at) VALUES (?,2,'other_cluster',?,?,?,?,?)",
                (run, t_fault - seen, 0.6, 2.3, 1.0, t_fault + 3.9))
print(f"{t_fault + 2.9:.3f}")
