#!/usr/bin/python3
"""A real PyTorch training job on ShardNet, through its Python library.

torch.distributed on gloo across the ranks of a (multi-node) Slurm job; a
small MLP on a data set it generates itself (nothing is downloaded). The
shardnet library (python/shardnet, doc/python-library.md) does the ShardNet
side: the step goes to SHARDNET_PROGRESS; every SHARDNET_CKPT_EVERY steps,
or at the next step after the pre-limit signal (SIGUSR1), each rank saves
its shard (model, optimizer, data position; the RNG states of torch, numpy
and Python are added) atomically with a manifest of SHA-256 hashes, which
the heartbeat agent commits to the broker; the broker seals the checkpoint
once every rank did. On start it resumes from SHARDNET_RESUME_FROM after
verifying the hashes, all ranks falling back together to the previous
sealed checkpoint when a shard is corrupt.

Run: srun train.py [--steps N] [--step-seconds S]
Writes losses.tsv (step, loss) and, at the end, final.sha256 (a hash of the
parameters' bytes) into SHARDNET_CKPT_DIR/../RUN.out/ for comparison.
"""
import argparse, datetime, hashlib, os, random, subprocess, time, zlib

import numpy as np
import torch
import torch.distributed as dist

import shardnet

env = os.environ
SN = shardnet.contract()
RANK, WORLD = SN.rank, SN.world_size

def log(*a):
    print(f"[rank {RANK} attempt {env.get('SHARDNET_ATTEMPT', '?')}]", *a, flush=True)

def master_addr():
    if env.get("MASTER_ADDR"):
        return env["MASTER_ADDR"]
    first = subprocess.run(["scontrol", "show", "hostnames", env["SLURM_JOB_NODELIST"]],
                           capture_output=True, text=True, check=True).stdout.split()[0]
    node = subprocess.run(["scontrol", "-o", "show", "node", first], capture_output=True, text=True, check=True).stdout
    return next(f.split("=", 1)[1] for f in node.split() if f.startswith("NodeAddr="))

def data(step, n=64, d=32):
    """Batch `step` of this rank: generated, not downloaded, same on every attempt."""
    g = torch.Generator().manual_seed(1_000_003 * step + RANK)
    x = torch.randn(n, d, generator=g)
    w = torch.linspace(-1, 1, d)
    y = (x @ w).unsqueeze(1) + 0.1 * torch.randn(n, 1, generator=g)
    return x, y

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--step-seconds", type=float, default=0.05)
    a = ap.parse_args()
    torch.manual_seed(0); np.random.seed(0); random.seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    job = int(env.get("SLURM_JOB_ID", "0"))
    # Clusters number their jobs alike: the port depends on both.
    os.environ.setdefault("MASTER_PORT", str(20000 + (zlib.crc32(env.get("SLURM_CLUSTER_NAME", "").encode()) % 20 * 1000 + job) % 20000))
    os.environ["MASTER_ADDR"] = master_addr()
    if os.environ["MASTER_ADDR"].startswith("127."):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    # The store of a handful of ranks needs no libuv, and Debian 13's
    # python3-torch has none (torch >= 2.4 asks for it by default).
    os.environ.setdefault("USE_LIBUV", "0")
    dist.init_process_group("gloo", rank=RANK, world_size=WORLD, timeout=datetime.timedelta(seconds=60))
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = 0
    ckpt = shardnet.load()  # verified on every rank; restores the RNG states
    if ckpt is not None:
        for name, why in ckpt.rejected:
            log(f"checkpoint {name} failed verification: {why}")
        if ckpt.fell_back:
            log(f"fell back to {ckpt.name}: {ckpt.rejected[0][0]} failed verification")
        model.load_state_dict(ckpt.state["model"]); opt.load_state_dict(ckpt.state["optimizer"])
        start = ckpt.state["data_position"]
        log(f"resumed from {ckpt.name} at step {start}")
    out_dir = SN.ckpt_dir + ".out"
    os.makedirs(out_dir, exist_ok=True)
    losses = open(os.path.join(out_dir, f"losses-rank{RANK}.tsv"), "a")
    step_times, ckpt_times = [], []
    interval = shardnet.checkpoint_interval()
    for step in range(start + 1, a.steps + 1):
        t0 = time.perf_counter()
        x, y = data(step)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():  # average gradients over the ranks (fixed order: deterministic)
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= WORLD
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        if RANK == 0:
            losses.write(f"{step}\t{(total / WORLD).item():.9e}\n"); losses.flush()
        shardnet.progress(step)
        step_times.append(time.perf_counter() - t0)
        due = shardnet.should_checkpoint(step)
        if shardnet.checkpoint_interval() != interval:  # --shardnet-ckpt-every=auto: the broker's policy changed it
            log(f"checkpoint interval now {shardnet.checkpoint_interval()} steps (was {interval}; broker policy "
                f"v{shardnet.policy.policy_version()}) at step {step}")
            interval = shardnet.checkpoint_interval()
        if due:
            emergency = shardnet.emergency_pending()
            t1 = time.perf_counter()
            # Six digits: the names this example always had (names compare as strings).
            name = shardnet.save(step, {"model": model.state_dict(), "optimizer": opt.state_dict(), "data_position": step},
                                 name=f"checkpoint-{step:06d}")
            if emergency:
                log(f"pre-limit signal: emergency checkpoint {name}")
            else:
                ckpt_times.append(time.perf_counter() - t1)
        time.sleep(a.step_seconds)
    shardnet.wait()  # the last checkpoint is durable and committed, or its error is raised here
    if RANK == 0:
        h = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
        with open(os.path.join(out_dir, "final.sha256"), "w") as f:
            f.write(h + "\n")
        log(f"done at step {a.steps}: parameters sha256 {h}")
        if ckpt_times and step_times:
            mean_step = sum(step_times) / len(step_times) * 1e3
            mean_ckpt = sum(ckpt_times) / len(ckpt_times) * 1e3
            log(f"checkpoint overhead: {len(ckpt_times)} checkpoints, {mean_ckpt:.2f} ms each to write and hash "
                f"against {mean_step:.2f} ms per step of compute (sleep excluded): {mean_ckpt / mean_step:.2f} steps' worth; "
                f"the commit to the broker is the agent's, off the training path")
    dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
