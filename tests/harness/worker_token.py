#!/usr/bin/python3
"""Derives a ShardNet worker token (common/worker_token.hpp) from a site key
file, as slurmstepd does: what a job's agent holds, for tests that replay or
alter one.

usage: worker_token.py [--reader] KEY_FILE RUN ATTEMPT WORLD UID JOB CLUSTER
(--reader: the tasks' reader token for the same claim, which only reads.)
"""
import hashlib
import hmac
import sys

args = sys.argv[1:]
reader = args[:1] == ["--reader"]
key_file, run, attempt, world, uid, job, cluster = args[reader:reader + 7]
key = open(key_file, "rb").read().rstrip(b"\r\n ")
msg = (b"shardnet-reader-v2\0" if reader else b"shardnet-worker-v2\0") + run.encode() + b"".join(b"\0" + str(int(n)).encode() for n in (attempt, world, uid, job)) \
    + b"\0" + cluster.encode()
mac = hmac.new(key, msg, hashlib.sha256).hexdigest()
print(("snr2" if reader else "snw2") + ".%d.%d.%d.%d.%s.%s.%s" % (int(attempt), int(world), int(uid), int(job), cluster, mac, run))
