"""The progress file the heartbeat agent reads (shardnet(8), SHARDNET_PROGRESS):
"STEP", "STEP checkpointing" while a checkpoint is written, and " committed
NAME took SECONDS" after the last checkpoint whose shards and manifest this
rank finished, with how long it took from "checkpointing" (the agent commits
it to the broker, whose checkpoint policy uses the time). The commit may come from save()'s
background thread: it repeats the newest step, never an older one."""
import threading

from . import atomic, environment
from .env import contract

_lock = threading.Lock()
_state = {"step": None, "checkpointing": False, "committed": "", "took": None}


def last_committed():
    """The newest checkpoint this process finished ("" before the first)."""
    return _state["committed"]


def _reset():
    with _lock:
        _state.update(step=None, checkpointing=False, committed="", took=None)
        environment._written["path"] = None


def format_progress(step, checkpointing=False, committed="", took=None):
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"progress: the step must be a whole number >= 0, not {step!r}")
    line = str(step)
    if checkpointing:
        line += " checkpointing"
    if committed:
        line += f" committed {committed}"
        if took is not None:
            line += f" took {max(took, 0.0):.6f}"
    return line + "\n"


def _write():
    line = format_progress(_state["step"], _state["checkpointing"], _state["committed"], _state["took"])
    path = contract().progress
    if path:
        # What this rank runs with, before its first progress line (the
        # agent takes a rank with progress and no report as reporting none).
        try:
            environment.report()
        except OSError:
            pass
        # Not fsync'd: the file is node-local and only read while we live.
        atomic.write_text(path, line, fsync=False)
    return line


def progress(step, checkpointing=False):
    """Reports step to the agent, atomically (temporary file and rename),
    with the last committed checkpoint. A no-op without SHARDNET_PROGRESS.
    Returns the line."""
    format_progress(step)  # the error names the caller's bad step
    with _lock:
        _state.update(step=step, checkpointing=checkpointing)
        return _write()


def committed(name, step, took=None):
    """Checkpoint name (of step) is complete on this rank, took seconds after
    its save began: the next line says so."""
    with _lock:
        _state["committed"] = name
        _state["took"] = took
        if _state["step"] is None or _state["step"] < step:
            _state["step"] = step
        return _write()
