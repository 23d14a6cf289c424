#!/usr/bin/python3
"""Save overhead of shardnet.save against a bare torch.save of the same
state (~MB megabytes of float32 parameters in a model's state_dict): the
median of ROUNDS rounds, each round timing, in turn,
  bare        torch.save(state, path)                 (page cache only)
  bare+fsync  torch.save into a file, then fsync      (the same durability)
  shardnet    shardnet.save(step, state): the time the trainer waits (RNG
              states, serialisation to a temporary name); its second half
              (fsync, hash, rename, manifest, progress line) runs in a thread
  durable     shardnet.save(step, state, durable=True): all of it, as an
              emergency save does
Prints one line per variant and the ratios; exits 1 when shardnet / bare is
over TARGET (default 1.10). Usage: pylib_save.py DIR [MB] [ROUNDS]"""
import os
import shutil
import statistics
import sys
import time

import torch

import shardnet

TARGET = float(os.environ.get("TARGET", "1.10"))


def state(mb):
    n = 2048
    layers = max(1, round(mb * (1 << 20) / (4 * (n * n + n))))
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(n, n) for _ in range(layers)])
    return {"model": model.state_dict(), "data_position": 1234, "note": "bench"}


def bare(path, st):
    torch.save(st, path)


def bare_fsync(path, st):
    with open(path, "wb") as f:
        torch.save(st, f)
        f.flush()
        os.fsync(f.fileno())


def main():
    root = os.path.abspath(sys.argv[1])
    mb = float(sys.argv[2]) if len(sys.argv) > 2 else 100
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    os.makedirs(root, exist_ok=True)
    for k in [k for k in os.environ if k.startswith("SHARDNET_")]:
        del os.environ[k]
    os.environ.update(SHARDNET_CKPT_DIR=os.path.join(root, "ck"), SHARDNET_PROGRESS=os.path.join(root, "progress"))
    st = state(mb)
    size = sum(t.numel() * t.element_size() for t in st["model"].values()) / (1 << 20)
    times = {"bare": [], "bare+fsync": [], "shardnet": [], "durable": []}
    runs = {"bare": lambda i: bare(os.path.join(root, f"bare-{i}.pt"), st),
            "bare+fsync": lambda i: bare_fsync(os.path.join(root, f"fsync-{i}.pt"), st),
            "shardnet": lambda i: shardnet.save(2 * i + 1, st),
            "durable": lambda i: shardnet.save(2 * i + 2, st, durable=True)}
    for i in range(rounds + 1):  # round 0 warms up (allocator, page cache, imports)
        for name, run in runs.items():
            shardnet.wait()  # the previous save's second half is not this one's time
            os.sync()
            t = time.perf_counter()
            run(i)
            dt = time.perf_counter() - t
            if i:
                times[name].append(dt)
        shardnet.wait()
        for n in os.listdir(root):  # keep the disk use flat
            p = os.path.join(root, n)
            if n.endswith(".pt"):
                os.unlink(p)
        shutil.rmtree(os.path.join(root, "ck"), ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"state: {size:.1f} MiB of parameters; median of {rounds} rounds; torch {torch.__version__}; {root}")
    for k, v in times.items():
        print(f"  {k:<11} median {med[k] * 1e3:8.1f} ms   runs " + " ".join(f"{x * 1e3:.1f}" for x in v))
    r_bare = med["shardnet"] / med["bare"]
    print(f"  ratio shardnet / bare torch.save            {r_bare:.3f}   (target <= {TARGET:.2f})")
    print(f"  ratio durable / bare torch.save             {med['durable'] / med['bare']:.3f}")
    print(f"  ratio durable / torch.save + fsync          {med['durable'] / med['bare+fsync']:.3f}")
    return 0 if r_bare <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
