"""What this rank runs with, for the attempt's signed receipt
(doc/receipts.md, "attempt-started"): the Python, torch, CUDA, cuDNN and
NCCL versions torch was built with, the NVIDIA driver (from NVML, when the
node has one) and the container image's digest (SHARDNET_IMAGE_DIGEST, set
by a site's container wrapper). Written once per process, beside the
rank's progress file (SHARDNET_PROGRESS + ".env"), before its first progress
line; the agent forwards it. Nothing here is attested: it is this
program's word, signed as such."""
import ctypes
import json
import os
import platform
import re
import sys

from . import atomic
from .env import contract

_written = {"path": None}
_MAX = 128
_DIGEST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,127}$")


def _clean(v):
    """A value as the broker takes it: printable ASCII, at most 128 bytes."""
    if v is None:
        return None
    s = str(v)
    s = "".join(c for c in s if " " <= c <= "~")[:_MAX]
    return s or None


def _driver():
    """The NVIDIA driver's version from NVML, or None (no GPU, no driver)."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    try:
        if nvml.nvmlInit_v2() != 0:
            return None
        buf = ctypes.create_string_buffer(96)
        ok = nvml.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(len(buf))) == 0
        nvml.nvmlShutdown()
        return buf.value.decode("ascii", "replace") if ok else None
    except (AttributeError, OSError):
        return None


def collect():
    """This process's environment as a dict of version strings (None: not known)."""
    env = {"python": platform.python_version(), "torch": None, "cuda": None, "cudnn": None, "nccl": None,
           "driver": _driver(), "image_digest": None}
    torch = sys.modules.get("torch")   # never imported here: a trainer without torch stays without it
    if torch is not None:
        env["torch"] = getattr(torch, "__version__", None)
        env["cuda"] = getattr(getattr(torch, "version", None), "cuda", None)
        try:
            if torch.backends.cudnn.is_available():
                env["cudnn"] = torch.backends.cudnn.version()
        except (AttributeError, RuntimeError):
            pass
        try:
            if torch.cuda.is_available():
                v = torch.cuda.nccl.version()
                env["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else v
        except (AttributeError, RuntimeError):
            pass
    digest = os.environ.get("SHARDNET_IMAGE_DIGEST", "")
    if _DIGEST.match(digest):
        env["image_digest"] = digest
    return {k: _clean(v) for k, v in env.items()}


def report(force=False):
    """Writes the report for the agent (once per process, or again with
    force). A no-op without SHARDNET_PROGRESS; returns the path or None."""
    progress = contract().progress
    if not progress or (_written["path"] == progress and not force):
        return None
    path = progress + ".env"
    atomic.write_text(path, json.dumps(collect(), sort_keys=True) + "\n", fsync=False)
    _written["path"] = progress
    return path
