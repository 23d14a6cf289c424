"""The task environment: SHARDNET_* (shardnet(8)), with torchrun's RANK and
WORLD_SIZE as fallbacks, read when asked (never cached: tests and launchers
may change it)."""
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Contract:
    rank: int
    world_size: int
    ckpt_dir: str       # where checkpoint-* directories go ("." without ShardNet)
    resume_from: str    # a checkpoint directory, or "" for a fresh start
    ckpt_every: str     # "auto" or a number of steps, as given
    progress: str       # the progress file, or "" (no agent: progress is a no-op)
    attempt: str
    run: str
    ckpt_policy: str = ""   # the broker's interval for ckpt_every "auto" (a file the agent writes), or ""


def _int(env, names, default):
    for n in names:
        v = env.get(n, "")
        if v != "":
            try:
                return int(v)
            except ValueError:
                raise ValueError(f"{n}={v!r} is not an integer") from None
    return default


def contract(env=None):
    """The SHARDNET_* contract of this task, from env (default os.environ)."""
    env = os.environ if env is None else env
    c = Contract(rank=_int(env, ("SHARDNET_RANK", "RANK"), 0),
                 world_size=_int(env, ("SHARDNET_WORLD_SIZE", "WORLD_SIZE"), 1),
                 ckpt_dir=env.get("SHARDNET_CKPT_DIR", "") or ".",
                 resume_from=env.get("SHARDNET_RESUME_FROM", ""),
                 ckpt_every=env.get("SHARDNET_CKPT_EVERY", "") or "auto",
                 progress=env.get("SHARDNET_PROGRESS", ""),
                 attempt=env.get("SHARDNET_ATTEMPT", ""),
                 run=env.get("SHARDNET_RUN", ""),
                 ckpt_policy=env.get("SHARDNET_CKPT_POLICY", ""))
    if not 0 <= c.rank < c.world_size:
        raise ValueError(f"rank {c.rank} is not within the world size {c.world_size} (SHARDNET_RANK/RANK, SHARDNET_WORLD_SIZE/WORLD_SIZE)")
    return c
