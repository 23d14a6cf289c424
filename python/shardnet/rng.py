"""The random number generators a resumed run must continue bitwise: torch
(CPU, and CUDA where it is initialised), numpy's global generator if numpy
is importable, Python's random."""
import random


def capture():
    states = {"python": random.getstate()}
    try:
        import numpy
        # As plain values (a list, not an array): a checkpoint then loads
        # with torch.load(weights_only=True), which runs no code.
        kind, keys, pos, has_gauss, cached = numpy.random.get_state()
        states["numpy"] = (kind, [int(k) for k in keys], int(pos), int(has_gauss), float(cached))
    except ImportError:
        pass
    import torch
    states["torch"] = torch.get_rng_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["torch_cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore(states):
    if "python" in states:
        random.setstate(states["python"])
    if "numpy" in states:
        import numpy
        kind, keys, pos, has_gauss, cached = states["numpy"]
        numpy.random.set_state((kind, numpy.asarray(keys, dtype=numpy.uint32), pos, has_gauss, cached))
    import torch
    if "torch" in states:
        torch.set_rng_state(states["torch"])
    if "torch_cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["torch_cuda"])
