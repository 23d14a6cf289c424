"""All ranks decide together: a flag is true for everyone only if it is true
on every rank (an all_reduce MIN when a torch.distributed process group is
initialised; this rank's own flag otherwise). The question (a name) is
compared too: ranks that ask about different checkpoints are an error."""
import zlib


def all_ranks(flag, about=""):
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return bool(flag)
    if not (dist.is_available() and dist.is_initialized()):
        return bool(flag)
    key = zlib.crc32(about.encode())
    t = torch.tensor([1 if flag else 0, key, -key], dtype=torch.int64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    lo, hi = int(t[1]), -int(t[2])
    if lo != hi:
        from .errors import CheckpointError
        raise CheckpointError(f"the ranks disagree on the checkpoint to try ({about!r} here): "
                              "their checkpoint directories or SEALED markers differ")
    return bool(t[0])
