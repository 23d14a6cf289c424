"""The pre-limit signal (plugstack prelimit=SIG@SECONDS, SIGUSR1 in the
shipped configuration; the plugin names it in SHARDNET_PRELIMIT_SIGNAL)
raises a flag; the next checkpoint boundary saves."""
import logging
import os
import signal
import threading

# Signals whose purpose is to end the program: never turned into a flag,
# or scancel and Slurm's own time limit would no longer stop the trainer.
_ENDING = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGKILL, signal.SIGSTOP}

_pending = threading.Event()


def _handler(signum, frame):
    _pending.set()


def emergency_pending():
    """True between a pre-limit signal and the next save()."""
    return _pending.is_set()


def clear():
    _pending.clear()


def configured_signal(environ=None):
    """The site's pre-limit signal from SHARDNET_PRELIMIT_SIGNAL (a number),
    SIGUSR1 when it is unset, empty or not one the library may watch."""
    v = (os.environ if environ is None else environ).get("SHARDNET_PRELIMIT_SIGNAL", "")
    if not v:
        return signal.SIGUSR1
    try:
        sig = signal.Signals(int(v))
    except ValueError:
        logging.getLogger("shardnet").warning("shardnet: SHARDNET_PRELIMIT_SIGNAL=%r is not a signal; watching SIGUSR1", v)
        return signal.SIGUSR1
    if sig in _ENDING:
        logging.getLogger("shardnet").warning("shardnet: the pre-limit signal %s ends the program; not watched "
                                              "(use USR1 or USR2 in plugstack prelimit=)", sig.name)
        return signal.SIGUSR1
    return sig


def watch_prelimit(signum=None, only_if_default=False):
    """Makes signum raise the emergency flag (instead of, by default, killing
    the process). With only_if_default, a handler the program installed is
    kept. False when it could not be installed (not the main thread).
    signum: the site's (configured_signal()) unless given."""
    if signum is None:
        signum = configured_signal()
    try:
        if only_if_default and signal.getsignal(signum) is not signal.SIG_DFL:
            return False
        signal.signal(signum, _handler)
        return True
    except ValueError:  # signal.signal outside the main thread
        return False
