"""The progress file the heartbeat agent reads (shardnet(8), SHARDNET_PROGRESS):
"STEP", "STEP checkpointing" while a checkpoint is written, and " committed
NAME" after the last checkpoint whose shards and manifest this rank finished
(the agent commits it to the broker)."""
from . import atomic
from .env import contract

_last_committed = [""]


def last_committed():
    """The newest checkpoint this process finished ("" before the first)."""
    return _last_committed[0]


def format_progress(step, checkpointing=False, committed=""):
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"progress: the step must be a whole number >= 0, not {step!r}")
    line = str(step)
    if checkpointing:
        line += " checkpointing"
    if committed:
        line += f" committed {committed}"
    return line + "\n"


def progress(step, checkpointing=False, committed=None):
    """Reports step to the agent, atomically (temporary file and rename).
    committed names a checkpoint this rank just finished (save() passes it);
    by default the last one is repeated. A no-op without SHARDNET_PROGRESS."""
    if committed:
        _last_committed[0] = committed
    line = format_progress(step, checkpointing, _last_committed[0])
    path = contract().progress
    if path:
        # Not fsync'd: the file is node-local and only read while we live.
        atomic.write_text(path, line, fsync=False)
    return line
