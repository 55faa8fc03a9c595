"""Waiting on the twin's own clock: a span of its physics, not of the test's wall clock."""

from __future__ import annotations

import time


def wait_physics(twin, seconds: float) -> None:
    """Return once the twin's physics has run `seconds` more (its `state` answer's `sim_s`, the
    physics steps times their length), polled every 10 ms. A loaded machine that slows the twin
    slows the wait with it, so what the servos did in that span does not depend on the load (a
    wall-clock sleep gave a starved twin less of its own time). The deadline (10 s + 20 x the
    span of wall clock) only ends a wait on a twin that has stopped."""
    start = twin.request("state")["sim_s"]
    deadline = time.monotonic() + 10.0 + 20 * seconds
    while (now := twin.request("state")["sim_s"]) < start + seconds:
        assert time.monotonic() < deadline, f"the twin's physics ran {now - start:.2f} of {seconds} s"
        time.sleep(0.01)
