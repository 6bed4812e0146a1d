"""How a rank tells the launcher's supervisor it is alive and how far it got
(launch/progress.h; the wire and the supervision rules are in docs/progress.md).

    import railyard.progress as progress
    for step in range(start, steps):
        train_one_step()
        progress.step(step)

Outside the launcher (RAILYARD_PROGRESS unset) both calls do nothing, so the same script
runs anywhere. They never block: when the supervisor's queue is full or it is gone the event
is dropped and they return False, which a training loop may ignore. The reporter is created
on first use from RAILYARD_PROGRESS and RAILYARD_RANK (else torchrun's RANK); a rank that
cannot be read raises ValueError then.
"""

import os
import threading

from railyard import _core

__all__ = ["Listener", "Reporter", "heartbeat", "reporter", "step"]

Reporter = _core.ProgressReporter
_reporter = None
_lock = threading.Lock()


def reporter():
    """The process's reporter, from the environment (created on first use). Its heartbeat()
    and step(n) raise UnavailableError when the event was dropped."""
    global _reporter
    with _lock:
        if _reporter is None:
            _reporter = _core.ProgressReporter.from_environment()
        return _reporter


def heartbeat():
    """Reports that this rank is alive. True when sent (or there is no supervisor), False
    when the event was dropped."""
    try:
        reporter().heartbeat()
        return True
    except _core.UnavailableError:
        return False


def step(n):
    """Reports that this rank finished step ``n`` (also a heartbeat). True when sent (or
    there is no supervisor), False when the event was dropped."""
    try:
        reporter().step(n)
        return True
    except _core.UnavailableError:
        return False


class Listener:
    """The supervisor's end: binds the datagram socket at ``path`` and keeps, per rank of
    ``world_size``, whether it was heard, its last step and its recent step durations."""

    def __init__(self, path, world_size):
        self._core = _core.ProgressListener.bind(os.fspath(path), world_size)

    def poll(self, timeout):
        """Waits up to ``timeout`` seconds for a datagram, then drains what is queued; returns
        the number of valid events applied (0 at the timeout)."""
        return self._core.poll(timeout)

    path = property(lambda self: self._core.path)
    ranks = property(lambda self: self._core.ranks)
    received = property(lambda self: self._core.received)
    malformed = property(lambda self: self._core.malformed)
    last_malformed = property(lambda self: self._core.last_malformed)

    def close(self):
        """Closes the socket and removes its file (also when the Listener is collected)."""
        self._core = None
