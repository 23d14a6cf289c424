#!/usr/bin/python3
"""A real PyTorch training job that honours the ShardNet env contract only.

torch.distributed on gloo across the ranks of a (multi-node) Slurm job; a
small MLP on a data set it generates itself (nothing is downloaded). It
reads rank, world size, checkpoint directory, resume path and interval from
SHARDNET_*, writes its step to SHARDNET_PROGRESS, and every
SHARDNET_CKPT_EVERY steps saves per-rank shards (model, optimizer, RNG
states of torch, numpy and Python, data position) with a manifest of their
SHA-256 hashes; the heartbeat agent commits them to the broker, which seals
the checkpoint once every rank did. On start it resumes from
SHARDNET_RESUME_FROM after verifying the hashes, falling back to the
previous sealed checkpoint when one is corrupt. SIGUSR1 (the plugin's
pre-limit signal) writes an emergency checkpoint at the next step.

Run: srun train.py [--steps N] [--step-seconds S]
Writes losses.tsv (step, loss) and, at the end, final.sha256 (a hash of the
parameters' bytes) into SHARDNET_CKPT_DIR/../RUN.out/ for comparison.
"""
import argparse, hashlib, io, os, random, signal, subprocess, sys, time, zlib

import numpy as np
import torch
import torch.distributed as dist

env = os.environ
RANK, WORLD = int(env.get("SHARDNET_RANK", "0")), int(env.get("SHARDNET_WORLD_SIZE", "1"))
CKPT_DIR, RESUME = env.get("SHARDNET_CKPT_DIR", "."), env.get("SHARDNET_RESUME_FROM", "")
EVERY = env.get("SHARDNET_CKPT_EVERY", "auto")
EVERY = 10 if EVERY in ("", "auto") else max(1, int(EVERY))
PROGRESS = env.get("SHARDNET_PROGRESS", "")

def log(*a):
    print(f"[rank {RANK} attempt {env.get('SHARDNET_ATTEMPT', '?')}]", *a, flush=True)

LAST_CKPT = [""]

def progress(text):
    """The step, with the last finished checkpoint (the agent commits it)."""
    if LAST_CKPT[0] and "committed" not in text:
        text += f" committed {LAST_CKPT[0]}"
    if PROGRESS:
        with open(PROGRESS + ".tmp", "w") as f:
            f.write(text + "\n")
        os.replace(PROGRESS + ".tmp", PROGRESS)

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

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

def save(step, model, opt, name=None):
    name = name or f"checkpoint-{step:06d}"
    d = os.path.join(CKPT_DIR, name)
    os.makedirs(d, exist_ok=True)
    shard = f"rank-{RANK}.pt"
    state = {"step": step, "model": model.state_dict(), "optimizer": opt.state_dict(),
             "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()},
             "data_position": step}
    buf = io.BytesIO()
    torch.save(state, buf)
    with open(os.path.join(d, shard + ".tmp"), "wb") as f:
        f.write(buf.getvalue())
        f.flush()
        os.fsync(f.fileno())
    os.replace(os.path.join(d, shard + ".tmp"), os.path.join(d, shard))
    with open(os.path.join(d, f"rank-{RANK}.manifest"), "w") as f:
        f.write(f"{sha256(os.path.join(d, shard))} {os.path.getsize(os.path.join(d, shard))} {shard}\n")
    LAST_CKPT[0] = name
    progress(f"{step} committed {name}")
    return name

def verified(path):
    """This rank's shard of a checkpoint, if its hash matches its manifest."""
    try:
        with open(os.path.join(path, f"rank-{RANK}.manifest")) as f:
            want, size, shard = f.read().split()
        if sha256(os.path.join(path, shard)) != want:
            return None
        return torch.load(os.path.join(path, shard))
    except (OSError, ValueError, RuntimeError, EOFError):
        return None

def resume_state():
    """SHARDNET_RESUME_FROM, else the sealed checkpoints before it, newest
    first: the newest one whose shards verify on every rank (all ranks must
    resume from the same step)."""
    if not RESUME:
        return None, None
    root = os.path.dirname(RESUME)
    older = sorted((n for n in os.listdir(root) if n.startswith("checkpoint-") and n < os.path.basename(RESUME)
                    and os.path.exists(os.path.join(root, n, "SEALED"))), reverse=True)
    for c in [RESUME] + [os.path.join(root, n) for n in older]:
        st = verified(c)
        ok = torch.tensor([1 if st is not None else 0])
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        if ok.item():
            if c != RESUME:
                log(f"fell back to {os.path.basename(c)}: {os.path.basename(RESUME)} failed verification")
            return st, c
        log(f"checkpoint {os.path.basename(c)} failed verification" + ("" if st is None else " on another rank"))
    return None, None

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
    dist.init_process_group("gloo", rank=RANK, world_size=WORLD, timeout=__import__("datetime").timedelta(seconds=60))
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = 0
    state, path = resume_state()
    if state is not None:
        model.load_state_dict(state["model"]); opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"]["torch"]); np.random.set_state(state["rng"]["numpy"]); random.setstate(state["rng"]["python"])
        start = state["data_position"]
        log(f"resumed from {os.path.basename(path)} at step {start}")
    out_dir = CKPT_DIR + ".out"
    os.makedirs(out_dir, exist_ok=True)
    emergency = []
    signal.signal(signal.SIGUSR1, lambda *_: emergency.append(1))
    losses = open(os.path.join(out_dir, f"losses-rank{RANK}.tsv"), "a")
    step_times, ckpt_times = [], []
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
        progress(str(step))
        step_times.append(time.perf_counter() - t0)
        if step % EVERY == 0:
            t1 = time.perf_counter()
            save(step, model, opt)
            ckpt_times.append(time.perf_counter() - t1)
        if emergency:
            name = save(step, model, opt, f"checkpoint-{step:06d}")
            log(f"pre-limit signal: emergency checkpoint {name}")
            emergency.clear()
        time.sleep(a.step_seconds)
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
