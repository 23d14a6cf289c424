"""Per-rank checkpoint shards: save() writes them atomically, load() resumes
from SHARDNET_RESUME_FROM after verifying them against the manifest, all
ranks falling back together to the previous sealed checkpoint.

Layout (shardnet(8)): SHARDNET_CKPT_DIR/NAME/rank-R.pt, the shard (torch.save
of {"shardnet": 1, "step", "state", "rng"}), and NAME/rank-R.manifest, its
"SHA256 BYTES rank-R.pt" line. NAME/SEALED is the agent's, once the broker
sealed NAME. torch.distributed.checkpoint is not in Debian's torch 1.13 (and
only partial in the releases that have it): every rank writes its own
state with torch.save, which is what a data-parallel trainer holds anyway.
"""
import hashlib
import inspect
import io
import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field

from . import agreement, atomic, prelimit, rng, sealed
from .env import contract
from .errors import CheckpointError, ManifestError
from .manifest import Entry, digest, format_manifest, manifest_name, read_manifest
from .progress_file import committed, last_committed, progress

FORMAT = 1
SEALED = "SEALED"
_NAME = re.compile(r"checkpoint-[A-Za-z0-9._-]{1,117}")
log = logging.getLogger("shardnet")


def checkpoint_name(step):
    """The default name of step's checkpoint. Names sort as the agent and
    --shardnet-resume=latest compare them, as strings: keep one width per run."""
    return f"checkpoint-{step:08d}"


def shard_name(rank):
    return f"rank-{rank}.pt"


@dataclass
class Checkpoint:
    """What load() resumed from."""
    step: int
    state: dict
    name: str
    path: str
    rejected: list = field(default_factory=list)  # (name, why) of the newer ones that failed

    @property
    def fell_back(self):
        return bool(self.rejected)


_pending = {"thread": None, "error": None}  # the save whose second half runs


def _serialise(payload, path):
    import torch
    torch.save(payload, path)


def _finish(tmp, shard, mpath, name, step, rank, began=None):
    """The second half of a save: fsync and hash the shard (one read of the
    page cache), rename it, write the manifest likewise, then the commit line."""
    try:
        sha, size = digest(tmp, fsync=True)
        atomic.commit(tmp, shard)
        atomic.write_text(mpath, format_manifest([Entry(sha, size, shard_name(rank))]))
    except OSError as e:
        _discard(tmp)
        raise CheckpointError(f"saving checkpoint {name} of rank {rank} in {os.path.dirname(shard)}: {e}") from e
    committed(name, step, None if began is None else time.monotonic() - began)


def _finish_in_background(*args):
    try:
        _finish(*args)
    except BaseException as e:  # raised by the next save() or wait()
        log.error("shardnet: %s", e)
        _pending["error"] = e


def _discard(tmp):
    try:
        os.unlink(tmp)
    except OSError:
        pass


def wait():
    """Waits for the last save() to be durable, in its manifest and in the
    progress line; raises the CheckpointError that kept it from that.
    Returns the name of the last committed checkpoint ("" if none)."""
    t, _pending["thread"] = _pending["thread"], None
    if t is not None:
        t.join()
    err, _pending["error"] = _pending["error"], None
    if err is not None:
        raise err
    return last_committed()


def save(step, state, name=None, ckpt_dir=None, save_rng=True, durable=None):
    """Saves this rank's shard of checkpoint name (default checkpoint_name(step))
    of state: a dict of state_dicts, tensors and plain values (numbers,
    strings, lists, dicts; anything else loads only with allow_pickle); the RNG states
    are added. Atomic: the shard is serialised under a temporary name; then
    fsync, rename, the manifest likewise (temporary name, fsync, rename), and
    the progress line "STEP committed NAME". A save killed part-way leaves no
    manifest for its checkpoint: load() never takes it, the agent never
    commits it.
    The state is serialised before save returns (the model may change at
    once); the second half (fsync, hash, manifest, commit line) runs in a
    background thread unless durable, which is the default for an
    emergency save (a pre-limit signal arrived). The next save, or wait(),
    waits for it and raises its error. Returns the name."""
    c = contract()
    name = name or checkpoint_name(step)
    if not _NAME.fullmatch(name):
        raise CheckpointError(f"checkpoint name {name!r}: expected 'checkpoint-' and 1-117 of [A-Za-z0-9._-]")
    if durable is None:
        durable = prelimit.emergency_pending()
    wait()
    root = ckpt_dir or c.ckpt_dir
    path = os.path.join(root, name)
    prelimit.clear()  # this save is the emergency one, if one was due
    began = time.monotonic()
    progress(step, checkpointing=True)
    shard, mpath = os.path.join(path, shard_name(c.rank)), os.path.join(path, manifest_name(c.rank))
    tmp = atomic.temporary_name(shard)
    payload = {"shardnet": FORMAT, "step": step, "state": state, "rng": rng.capture() if save_rng else {}}
    try:
        if not os.path.isdir(path):
            os.makedirs(path, exist_ok=True)
            atomic.fsync_dir(root)
        try:  # a rewrite: never the new shard beside the old manifest
            os.unlink(mpath)
        except FileNotFoundError:
            pass
        # What a killed save of this rank left here goes; the temporary
        # name has the pid, so a crash's leftovers would otherwise stay.
        atomic.remove_stale(path, {shard_name(c.rank), manifest_name(c.rank)})
        _serialise(payload, tmp)
    except BaseException as e:
        _discard(tmp)
        if isinstance(e, OSError):
            raise CheckpointError(f"saving checkpoint {name} of rank {c.rank} in {path}: {e}") from e
        raise
    finally:
        progress(step)
    args = (tmp, shard, mpath, name, step, c.rank, began)
    if durable:
        _finish(*args)
    else:
        _pending["thread"] = threading.Thread(target=_finish_in_background, args=args, name="shardnet-save")
        _pending["thread"].start()
    return name


# Opcodes that push a string a STACK_GLOBAL may name, and those that only
# memoise what is on the stack (they may come between).
_STRINGS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING", "STRING"}
_MEMO = {"MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"}


def _unsafe_globals(data):
    """What in a torch.save archive's pickle would construct anything but
    tensors and plain values: the classes and functions it names that torch's
    own weights-only loader does not allow, read with the standard library's
    pickletools (nothing is unpickled). "" when there are none.
    torch.load(weights_only=True) itself cannot be used here: torch 1.13's
    weights-only loader cannot read a float (pickle opcode BINFLOAT), which
    every optimizer state holds, and it ignores a restricted pickle_module."""
    import pickletools
    import zipfile
    from torch._weights_only_unpickler import _get_allowed_globals
    allowed = set(_get_allowed_globals())
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
        pkl = [n for n in z.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pkl) != 1:
            return "not one data.pkl in the archive"
        stream = z.read(pkl[0])
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        return f"not a torch.save archive ({e})"
    bad, recent = set(), []
    try:
        for op, arg, _ in pickletools.genops(stream):
            name = op.name
            if name in ("GLOBAL", "INST"):
                module, _, attr = str(arg).partition(" ")
                if f"{module}.{attr}" not in allowed:
                    bad.add(f"{module}.{attr}")
            elif name == "STACK_GLOBAL":
                if len(recent) < 2:
                    bad.add("a class named by computed strings")
                elif f"{recent[-2]}.{recent[-1]}" not in allowed:
                    bad.add(f"{recent[-2]}.{recent[-1]}")
            elif name.startswith("EXT"):
                bad.add("a class from the extension registry")
            if name in _STRINGS:
                recent.append(str(arg))
            elif name not in _MEMO:
                recent = []
    except Exception as e:  # a stream pickletools cannot read is not one torch wrote
        return f"its pickle does not parse ({e})"
    return ", ".join(sorted(bad))


def _torch_load(torch, data, map_location, allow_pickle):
    """torch.load of a shard whose digests matched. Allowed pickles load as
    pickles (weights_only=False: since torch 2.6 not the default). Otherwise
    _unsafe_globals let only tensors and plain values through, and from
    torch 2 on, whose weights-only loader reads floats, that loader is asked
    too; torch 1.13's cannot read an optimizer's state."""
    kwargs = {}
    if "weights_only" in inspect.signature(torch.load).parameters:
        major = torch.__version__.split(".", 1)[0]
        kwargs["weights_only"] = not allow_pickle and major.isdigit() and int(major) >= 2
    return torch.load(io.BytesIO(data), map_location=map_location, **kwargs)


def _allow_pickle(allow_pickle):
    if allow_pickle is not None:
        return bool(allow_pickle)
    return os.environ.get("SHARDNET_ALLOW_PICKLE", "") == "1"


def _sealed_by_broker(path, rank, run):
    """{path: (sha256, bytes)} the broker sealed for rank's files of the
    checkpoint at path, or None (with a warning) when it cannot be asked and
    that is allowed (sealed.py says when)."""
    name = os.path.basename(path)
    try:
        return sealed.files(run, name, rank)
    except sealed.Unavailable as e:
        if sealed.required():
            raise CheckpointError(f"checkpoint {name}: the broker's sealed digests could not be had ({e}), "
                                  "and SHARDNET_REQUIRE_SEALED=1 refuses a shard the broker has not vouched for") from None
        log.warning("shardnet: rank %d: checkpoint %s: the broker's sealed digests could not be had (%s); "
                    "checked against its manifest only (set SHARDNET_REQUIRE_SEALED=1 to refuse instead)", rank, name, e)
        return None


def _read_verified(path, rank, map_location, allow_pickle=False, run=""):
    """This rank's payload of the checkpoint at path; CheckpointError saying why not.
    Every file is checked against the digest the broker sealed (the manifest
    beside the shard is whoever wrote the directory's word), and against the
    manifest. Unless allow_pickle, a shard must hold only tensors and plain
    values (state_dicts, numbers, strings, lists, dicts): a pickle that would
    construct anything else (run code) is refused before it is unpickled,
    whoever rewrote the manifest beside it."""
    import torch
    entries = read_manifest(path, rank)
    want = shard_name(rank)
    if not any(e.path == want for e in entries):
        raise ManifestError(f"{os.path.join(path, manifest_name(rank))} does not list {want}")
    by_broker = _sealed_by_broker(path, rank, run)
    if by_broker is not None:
        if want not in by_broker:
            raise CheckpointError(f"{os.path.join(path, want)}: not among the files the broker sealed for rank {rank} "
                                  f"({', '.join(sorted(by_broker))[:300]})")
        listed = {e.path for e in entries}
        for p in sorted(set(by_broker) - listed):
            raise CheckpointError(f"{os.path.join(path, manifest_name(rank))} does not list {p}, which the broker sealed")
    data = None
    for e in entries:
        fp = os.path.join(path, e.path)
        try:
            with open(fp, "rb") as f:
                blob = f.read()
        except OSError as err:
            raise CheckpointError(f"{fp}: {err.strerror}") from None
        got = hashlib.sha256(blob).hexdigest()
        if by_broker is not None:
            if e.path not in by_broker:
                raise CheckpointError(f"{fp}: listed in its manifest, but not among the files the broker sealed")
            sealed_sha, sealed_bytes = by_broker[e.path]
            if got != sealed_sha or len(blob) != sealed_bytes:
                raise CheckpointError(f"{fp}: sha256 {got} ({len(blob)} bytes), the broker sealed sha256 {sealed_sha} "
                                      f"({sealed_bytes} bytes): refused")
        if len(blob) != e.bytes:
            raise CheckpointError(f"{fp} is {len(blob)} bytes, its manifest says {e.bytes}")
        if got != e.sha256:
            raise CheckpointError(f"{fp}: sha256 {got[:16]}..., its manifest says {e.sha256[:16]}...")
        if e.path == want:
            data = blob
    try:
        if not allow_pickle:
            unsafe = _unsafe_globals(data)
            if unsafe:
                raise CheckpointError(f"{os.path.join(path, want)}: refused: it holds more than tensors and plain values, and "
                                      f"unpickling it could run code (it names {unsafe[:300]}); a checkpoint you trust loads "
                                      "with load(allow_pickle=True) or SHARDNET_ALLOW_PICKLE=1")
        payload = _torch_load(torch, data, map_location, allow_pickle)
    except CheckpointError:
        raise
    except Exception as err:  # hashes matched: written by something else
        raise CheckpointError(f"{os.path.join(path, want)}: not loadable by torch.load: {err}") from None
    if not isinstance(payload, dict) or payload.get("shardnet") != FORMAT:
        raise CheckpointError(f"{os.path.join(path, want)} is not a shardnet checkpoint (format {FORMAT})")
    return payload


def previous_sealed(resume):
    """The sealed checkpoints named before resume's, beside it, newest first."""
    root, base = os.path.split(resume.rstrip("/"))
    try:
        names = os.listdir(root or ".")
    except OSError:
        return []
    out = []
    for n in names:
        p = os.path.join(root, n)
        if n.startswith("checkpoint-") and n < base and not os.path.islink(p) and os.path.isdir(p) \
                and os.path.isfile(os.path.join(p, SEALED)) and not os.path.islink(os.path.join(p, SEALED)):
            out.append(p)
    return sorted(out, reverse=True)


def load(resume_from=None, restore_rng=True, map_location=None, allow_pickle=None):
    """Resumes from resume_from (default SHARDNET_RESUME_FROM; a checkpoint
    directory, or a name in SHARDNET_CKPT_DIR): this rank's shard is
    verified against the digests the broker sealed (sealed.py; the manifest
    beside it alone when the broker cannot be asked, with a warning) and its
    manifest; when it fails on any rank, every rank moves on together to the
    previous sealed checkpoint. Restores the
    RNG states saved with it. None on a fresh start (nothing to resume from);
    CheckpointError when no candidate verifies on every rank.
    Shards hold tensors and plain values only (the classes torch's own
    weights-only loader allows), so a shard swapped for a pickle that runs
    code is refused before it is unpickled (and the previous sealed
    checkpoint taken). allow_pickle=True (or
    SHARDNET_ALLOW_PICKLE=1) loads any pickle: only for checkpoints you trust."""
    allow = _allow_pickle(allow_pickle)
    c = contract()
    resume = c.resume_from if resume_from is None else resume_from
    if not resume:
        return None
    resume = resume.rstrip("/")
    if os.sep not in resume:  # a name, as --shardnet-resume takes it
        resume = os.path.join(c.ckpt_dir, resume)
    rejected = []
    for path in [resume] + previous_sealed(resume):
        name = os.path.basename(path)
        try:
            payload, why = _read_verified(path, c.rank, map_location, allow, c.run), ""
        except CheckpointError as e:
            payload, why = None, str(e)
        if agreement.all_ranks(payload is not None, name):
            if restore_rng:
                rng.restore(payload["rng"])
            return Checkpoint(step=payload["step"], state=payload["state"], name=name, path=path, rejected=rejected)
        why = why or "failed verification on another rank"
        log.warning("shardnet: rank %d: checkpoint %s rejected: %s", c.rank, name, why)
        rejected.append((name, why))
    raise CheckpointError(f"rank {c.rank}: no checkpoint verifies on every rank: "
                          + "; ".join(f"{n}: {w}" for n, w in rejected))
