"""Ctrl-C and SIGTERM held back while the arm is being made safe.

After the first Ctrl-C the runner holds (or releases) the arm, discards the episode, records the
abort and turns torque off: serial transactions and a store write. A second Ctrl-C (an impatient
operator) or a SIGTERM landing inside one of them would raise `KeyboardInterrupt` in the middle of
a packet and skip the rest (the abort not recorded, torque left on). `deferred_interrupts()`
replaces the SIGINT and SIGTERM handlers for the length of its block with one that only counts
the signals (and says once that the arm is being made safe), then restores the handlers. It does
nothing off the main thread (under the operator console the console owns the signals and only
sets a flag).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger(__name__)


class Deferred:
    """What arrived while deferred: `count` signals."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, signum, frame) -> None:  # noqa: ARG002 - a signal handler
        self.count += 1
        if self.count == 1:
            logger.warning("interrupt received while the arm is being made safe: it is finished first")


@contextmanager
def deferred_interrupts() -> Iterator[Deferred]:
    deferred = Deferred()
    if threading.current_thread() is not threading.main_thread():
        yield deferred
        return
    saved = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            saved[sig] = signal.signal(sig, deferred)
        except (ValueError, OSError):
            pass
    try:
        yield deferred
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
