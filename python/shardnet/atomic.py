"""Durable, atomic file replacement: a temporary name beside the target,
fsync, rename, fsync of the directory."""
import os


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temporary_name(path):
    return f"{path}.tmp.{os.getpid()}"


def commit(tmp, path, fsync=True):
    """Renames the finished temporary file tmp over path (and makes the rename durable)."""
    os.replace(tmp, path)
    if fsync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def write_text(path, text, fsync=True):
    """Replaces path with text: readers see the old content or the new, never a part."""
    tmp = temporary_name(path)
    with open(tmp, "w") as f:
        f.write(text)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    commit(tmp, path, fsync)


def remove_stale(directory, names):
    """Removes the temporary files of names (NAME.tmp.PID) in directory that
    no save of this process is writing: what a save killed part-way (an
    earlier attempt's, or this node's before a crash) left behind. Only the
    caller's own names are touched: other ranks may be saving beside them.
    Returns how many were removed."""
    mine = f".tmp.{os.getpid()}"
    removed = 0
    try:
        entries = os.listdir(directory)
    except OSError:
        return 0
    for entry in entries:
        base, sep, pid = entry.rpartition(".tmp.")
        if not sep or base not in names or not pid.isdigit() or entry.endswith(mine):
            continue
        try:
            os.unlink(os.path.join(directory, entry))
            removed += 1
        except OSError:
            pass
    return removed
