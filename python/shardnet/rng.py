"""The random number generators a resumed run must continue bitwise: torch
(CPU, and CUDA where it is initialised), numpy's global generator if numpy
is importable, Python's random."""
import random


def capture():
    states = {"python": random.getstate()}
    try:
        import numpy
        states["numpy"] = numpy.random.get_state()
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
        numpy.random.set_state(states["numpy"])
    import torch
    if "torch" in states:
        torch.set_rng_state(states["torch"])
    if "torch_cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["torch_cuda"])
