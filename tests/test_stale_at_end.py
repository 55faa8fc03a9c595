"""A camera that stops in an episode's last half second: the steps take a frame up to 500 ms old
(LeRobot's `read_latest`), so no read fails; `frame_age.stale_at_end` finds it after the loop
(`LeRobotRig.end_episode` then fails the episode as a frozen camera). Cameras here are stand-ins
whose read thread is a Python thread stamping `latest_timestamp` as LeRobot's cameras do."""

from __future__ import annotations

import threading
import time

from orchestrator.rigs.frame_age import LIVE_AT_END_S, stale_at_end


class Stamping:
    """A read thread at `fps` that stamps `latest_timestamp` (perf_counter) until `freeze()`."""

    def __init__(self, fps: float):
        self.latest_timestamp: float | None = time.perf_counter()
        self._stop = threading.Event()
        self._frozen = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(1 / fps,), daemon=True)
        self._thread.start()

    def _run(self, period: float) -> None:
        while not self._stop.wait(period):
            if not self._frozen.is_set():
                self.latest_timestamp = time.perf_counter()

    def freeze(self) -> None:
        self._frozen.set()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def test_a_camera_that_stopped_is_named_with_its_age_and_live_ones_pass():
    front, wrist = Stamping(30), Stamping(15)
    try:
        t0 = time.perf_counter()
        assert stale_at_end({"front": front, "wrist": wrist}) is None   # control: both deliver
        assert time.perf_counter() - t0 < LIVE_AT_END_S                  # a new frame ends the wait
        wrist.freeze()
        frozen_at = wrist.latest_timestamp
        assert frozen_at is not None
        found = stale_at_end({"front": front, "wrist": wrist})
        assert found is not None and found[0] == "wrist"
        assert found[1] >= LIVE_AT_END_S * 1000 - 1                     # waited the whole half second
    finally:
        front.close()
        wrist.close()


def test_cameras_without_a_read_thread_stamp_are_not_waited_for():
    class NoStamp:
        latest_timestamp = None

    t0 = time.perf_counter()
    assert stale_at_end({"still": NoStamp()}) is None and stale_at_end({}) is None
    assert time.perf_counter() - t0 < LIVE_AT_END_S
