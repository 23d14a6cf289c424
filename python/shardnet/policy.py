"""When to checkpoint: at the pre-limit signal's next step boundary, else
every SHARDNET_CKPT_EVERY steps. With "auto" the broker computes the
interval from what it measures (doc/checkpoint-policy.md) and the heartbeat
agent writes it to SHARDNET_CKPT_POLICY; until it does, DEFAULT_INTERVAL.

All ranks must checkpoint at the same steps (a checkpoint is sealed when
every rank committed it), but the policy file reaches each node when its
own agent heartbeats. So a new interval is taken only at a checkpoint
boundary of the old one, where every rank is at the same step, and the
ranks agree on it: the newest version any rank has wins (one all_reduce
per checkpoint when torch.distributed is initialised, and only with the
agent's policy file: a job without a broker runs no collective here)."""
import os

from . import prelimit
from .env import contract

DEFAULT_INTERVAL = 10

# The interval in force for "auto", and the policy version it came from.
_auto = {"every": DEFAULT_INTERVAL, "version": 0}


def _reset():
    _auto.update(every=DEFAULT_INTERVAL, version=0)


def read_policy_file(path):
    """(version, every_steps) from the agent's policy file ("every_steps=N
    version=V seconds=S"), or None when there is none or it cannot be read."""
    try:
        with open(path, encoding="ascii") as f:
            text = f.read(256)
    except (OSError, UnicodeDecodeError):
        return None
    fields = dict(kv.split("=", 1) for kv in text.split() if "=" in kv)
    try:
        version, every = int(fields["version"]), int(fields["every_steps"])
    except (KeyError, ValueError):
        return None
    # What the broker hands out (agent: version < 2^22, steps < 2^31): the
    # pair then packs into one int64 for the ranks' agreement.
    if not (1 <= version < 1 << 22 and 1 <= every < 1 << 31):
        return None
    return version, every


def _agree(version, every):
    """The newest (version, every) of any rank: all_reduce MAX of the pair
    packed in one int64 (version high, steps low)."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return version, every
    if not (dist.is_available() and dist.is_initialized()):
        return version, every
    t = torch.tensor([(version << 31) | every], dtype=torch.int64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    packed = int(t[0])
    return packed >> 31, packed & ((1 << 31) - 1)


def _take_policy():
    """At a checkpoint boundary: the ranks' newest policy becomes the interval."""
    path = contract().ckpt_policy
    version, every = _agree(*((path and read_policy_file(path)) or (0, 0)))
    if version > _auto["version"]:
        _auto.update(version=version, every=every)


def checkpoint_interval(value=None):
    """The interval in steps for value (default SHARDNET_CKPT_EVERY): the
    number given, or for "auto" the broker's interval in force here."""
    v = contract().ckpt_every if value is None else str(value)
    if v in ("", "auto"):
        return _auto["every"]
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"SHARDNET_CKPT_EVERY={v!r}: expected a number of steps (1 or more) or 'auto'")
    return n


def policy_version():
    """The version of the broker's policy in force for "auto" (0: none yet)."""
    return _auto["version"]


def should_checkpoint(step, every=None):
    """True when step is a checkpoint boundary: a pre-limit signal arrived
    since the last save (the emergency checkpoint), or step is a multiple of
    the interval (every, default SHARDNET_CKPT_EVERY). With "auto" and the
    broker's policy file (SHARDNET_CKPT_POLICY), call it on every rank at
    every step: the ranks agree on a new interval at a boundary of the old
    one (a collective, run at that step whether or not a pre-limit signal
    is pending on some rank). Without the file nothing is collective."""
    n = checkpoint_interval(every)
    due = step > 0 and step % n == 0
    c = contract()
    if due and every is None and c.ckpt_every in ("", "auto") and c.ckpt_policy:
        _take_policy()
    return prelimit.emergency_pending() or due
