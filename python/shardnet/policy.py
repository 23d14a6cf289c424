"""When to checkpoint: at the pre-limit signal's next step boundary, else
every SHARDNET_CKPT_EVERY steps ("auto": DEFAULT_INTERVAL until the broker
computes the interval)."""
from . import prelimit
from .env import contract

DEFAULT_INTERVAL = 10


def checkpoint_interval(value=None):
    """The interval in steps for value (default SHARDNET_CKPT_EVERY)."""
    v = contract().ckpt_every if value is None else str(value)
    if v in ("", "auto"):
        return DEFAULT_INTERVAL
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"SHARDNET_CKPT_EVERY={v!r}: expected a number of steps (1 or more) or 'auto'")
    return n


def should_checkpoint(step, every=None):
    """True when step is a checkpoint boundary: a pre-limit signal arrived
    since the last save (the emergency checkpoint), or step is a multiple of
    the interval (every, default SHARDNET_CKPT_EVERY)."""
    if prelimit.emergency_pending():
        return True
    return step > 0 and step % checkpoint_interval(every) == 0
