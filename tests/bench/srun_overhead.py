#!/usr/bin/python3
"""Interleaved timing of `srun -N1 true` under plugstack configurations.

Rounds run every configuration once, in turn, so that drift on a busy
machine hits all of them alike; prints medians and ratios to the first.
  srun_overhead.py SLURM_CONF PLUGSTACK RUNS NAME=LINE|none:ARGS ...
"""
import os
import statistics
import subprocess
import sys
import time

conf, plugstack, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
cases = []
for spec in sys.argv[4:]:
    name, rest = spec.split("=", 1)
    line, args = rest.split("::", 1)
    cases.append((name, line, args.split()))
env = dict(os.environ, SLURM_CONF=conf)
times = {name: [] for name, _, _ in cases}
for rnd in range(runs + 3):
    for name, line, args in cases:
        with open(plugstack, "w") as f:
            f.write("" if line == "none" else line + "\n")
        t = time.perf_counter()
        subprocess.run(["srun", "-N1", *args, "true"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if rnd >= 3:  # warm-up rounds
            times[name].append(time.perf_counter() - t)
base = statistics.median(times[cases[0][0]])
for name, _, _ in cases:
    m = statistics.median(times[name])
    print(f"{name}\t{m * 1000:.2f}\t{m / base:.3f}")
