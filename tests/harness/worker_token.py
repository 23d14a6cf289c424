#!/usr/bin/python3
"""Derives a ShardNet worker token (common/worker_token.hpp) from a site key
file, as slurmstepd does: what a job's agent holds, for tests that replay or
alter one.

usage: worker_token.py KEY_FILE RUN ATTEMPT WORLD UID JOB CLUSTER
"""
import hashlib
import hmac
import sys

key_file, run, attempt, world, uid, job, cluster = sys.argv[1:8]
key = open(key_file, "rb").read().rstrip(b"\r\n ")
msg = b"shardnet-worker-v2\0" + run.encode() + b"".join(b"\0" + str(int(n)).encode() for n in (attempt, world, uid, job)) \
    + b"\0" + cluster.encode()
mac = hmac.new(key, msg, hashlib.sha256).hexdigest()
print("snw2.%d.%d.%d.%d.%s.%s.%s" % (int(attempt), int(world), int(uid), int(job), cluster, mac, run))
