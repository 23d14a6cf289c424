"""ShardNet's trainer-side library: progress, atomic checkpoints, verified
resume and the pre-limit signal, over the SHARDNET_* task environment that
the shardnet.so SPANK plugin sets (shardnet(8), TASK ENVIRONMENT).

    import shardnet
    ckpt = shardnet.load()                    # None on a fresh start
    for step in range(start + 1, steps + 1):
        ...train...
        shardnet.progress(step)
        if shardnet.should_checkpoint(step):
            shardnet.save(step, {"model": model.state_dict(), "optimizer": opt.state_dict()})
    shardnet.wait()                           # the last save is durable and committed

Without SHARDNET_* (plain python, plain sbatch) progress is a no-op and saves
are still atomic. See doc/python-library.md.
"""
from .env import Contract, contract
from .errors import CheckpointError, ManifestError
from .progress_file import progress, last_committed
from .policy import DEFAULT_INTERVAL, checkpoint_interval, should_checkpoint
from .prelimit import emergency_pending, watch_prelimit
from .checkpoint import Checkpoint, checkpoint_name, load, save, wait

__all__ = ["Contract", "contract", "CheckpointError", "ManifestError", "progress", "last_committed",
           "DEFAULT_INTERVAL", "checkpoint_interval", "should_checkpoint", "emergency_pending", "watch_prelimit",
           "Checkpoint", "checkpoint_name", "load", "save", "wait"]

# The pre-limit signal's default action would kill the trainer: from import
# on it only raises a flag, unless the program already handles it.
watch_prelimit(only_if_default=True)
