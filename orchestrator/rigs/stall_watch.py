"""The process's own stalls, measured, so that a busy computer is not reported as a hardware fault.

scservo_sdk waits for a servo's reply by polling the serial port and, each time a poll finds the
reply incomplete, comparing the time since the request with its packet timeout
(`PortHandler.setPacketTimeout`: the packet's wire time plus twice `LATENCY_TIMER`, 16 ms, plus
2 ms: about `SDK_TIMEOUT_S` for a ping or a short read). A process that loses the CPU between the
poll and the comparison for longer than that gives up on a reply that came on time: LeRobot then
reports a missing motor or "There is no status packet!", which reads as a cable. Seen on the twin
under CPU starvation, with every PING answered within 0.7 ms on the wire.

`StallWatch` (a context manager) runs a thread that wakes every `TICK_S` on the monotonic clock
and keeps the longest gap between two wakes (`longest_s`): while the process stands still (no
CPU, a SIGSTOP, the machine swapping) no thread runs, so the gap after it is the stall. A read
that failed while `late()` is true (a gap beyond the SDK's timeout) is reported as "this computer
answered late (busy CPU)" (`device_fault.DeviceFault.late`). The thread holds the GIL for
microseconds a wake; it runs only around connect steps and `doctor`'s reads, never in an episode.
"""

from __future__ import annotations

import threading
import time

SDK_TIMEOUT_S = 0.034   # scservo_sdk's packet timeout for a short packet (see above)
TICK_S = 0.005          # how often the watcher wakes; Python switches threads every 5 ms


class StallWatch:
    """The longest time this process stood still while the `with` block ran (see the module
    docstring); `late(limit_s)` is that stall when it exceeds `limit_s`, else None."""

    def __init__(self, tick_s: float = TICK_S):
        self.tick_s = tick_s
        self.longest_s = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stall-watch", daemon=True)

    def _watch(self) -> None:
        last = time.monotonic()
        while not self._done.wait(self.tick_s):
            now = time.monotonic()
            self.longest_s = max(self.longest_s, now - last - self.tick_s)
            last = now
        self.longest_s = max(self.longest_s, time.monotonic() - last - self.tick_s)

    def __enter__(self) -> StallWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    def late(self, limit_s: float = SDK_TIMEOUT_S) -> float | None:
        """The longest stall so far when it is longer than `limit_s`; None otherwise."""
        return self.longest_s if self.longest_s > limit_s else None
