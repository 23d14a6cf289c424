"""A rank's manifest, NAME/rank-R.manifest: one "SHA256 BYTES PATH" line per
file (lowercase hex SHA-256, size in bytes, a path relative to the checkpoint
directory), the format the agent sends to the broker (spank/heartbeat.cpp,
commit_json)."""
import hashlib
import os
import re
import threading
from dataclasses import dataclass

from .errors import ManifestError

_LINE = re.compile(r"([0-9a-f]{64}) ([0-9]+) (\S{1,256})")


@dataclass(frozen=True)
class Entry:
    sha256: str
    bytes: int
    path: str


def manifest_name(rank):
    return f"rank-{rank}.manifest"


def _check_path(path):
    if path.startswith("/") or ".." in path or any(ord(c) < 32 or ord(c) == 127 for c in path) or " " in path:
        raise ManifestError(f"manifest path {path!r}: expected a relative path without '..', spaces or control characters")


def format_manifest(entries):
    if not entries:
        raise ManifestError("a manifest lists at least one file")
    for e in entries:
        _check_path(e.path)
    return "".join(f"{e.sha256} {e.bytes} {e.path}\n" for e in entries)


def parse_manifest(text, where="manifest"):
    entries = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        m = _LINE.fullmatch(line)
        if not m:
            raise ManifestError(f"{where} line {n}: expected 'SHA256 BYTES PATH', got {line[:80]!r}")
        _check_path(m.group(3))
        entries.append(Entry(m.group(1), int(m.group(2)), m.group(3)))
    if not entries:
        raise ManifestError(f"{where} lists no files")
    return entries


def read_manifest(ckpt_path, rank):
    path = os.path.join(ckpt_path, manifest_name(rank))
    try:
        with open(path) as f:
            text = f.read(1 << 20)
    except FileNotFoundError:
        raise ManifestError(f"{path} is missing") from None
    except OSError as e:
        raise ManifestError(f"{path}: {e.strerror}") from None
    return parse_manifest(text, path)


def digest(path, fsync=False):
    """(sha256 hex, bytes) of the file at path, read once; with fsync, its
    data is on disk when this returns (the write-back runs while it hashes)."""
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        flusher = None
        if fsync:
            flusher = threading.Thread(target=_fsync, args=(f.fileno(), errors := []), name="shardnet-fsync")
            flusher.start()
        try:
            for chunk in iter(lambda: f.read(8 << 20), b""):
                h.update(chunk)
                size += len(chunk)
        finally:
            if flusher:
                flusher.join()
        if fsync and errors:
            raise errors[0]
    return h.hexdigest(), size


def _fsync(fd, errors):
    try:
        os.fsync(fd)
    except OSError as e:
        errors.append(e)
