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
