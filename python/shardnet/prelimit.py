"""The pre-limit signal (plugstack prelimit=SIG@SECONDS, SIGUSR1 in the
shipped configuration) raises a flag; the next checkpoint boundary saves."""
import signal
import threading

_pending = threading.Event()


def _handler(signum, frame):
    _pending.set()


def emergency_pending():
    """True between a pre-limit signal and the next save()."""
    return _pending.is_set()


def clear():
    _pending.clear()


def watch_prelimit(signum=signal.SIGUSR1, only_if_default=False):
    """Makes signum raise the emergency flag (instead of, by default, killing
    the process). With only_if_default, a handler the program installed is
    kept. False when it could not be installed (not the main thread)."""
    try:
        if only_if_default and signal.getsignal(signum) is not signal.SIG_DFL:
            return False
        signal.signal(signum, _handler)
        return True
    except ValueError:  # signal.signal outside the main thread
        return False
