"""Waiting for a condition, never for a guessed span of wall clock."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], timeout_s: float, what: str, poll_s: float = 0.01) -> None:
    """Return once `condition()` is true, polled every `poll_s`; fail naming `what` when it is
    still false after `timeout_s` (a deadline for a broken run, not a bound on the time taken)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} in {timeout_s} s"
        time.sleep(poll_s)
