"""Each camera frame's age and whether it repeats the previous step's frame (every rig whose
cameras keep LeRobot's `latest_timestamp`: OpenCVCamera, the twin's camera).

Definitions (one control step's observation): `age_ms` = the time from when the camera's read
thread received the frame (`camera.latest_timestamp`, `time.perf_counter()`) to when the
observation was taken; `repeated` = the frame is the one the previous step got (the same
`latest_timestamp`: no new frame arrived in between). The exposure-to-array latency of a USB
camera (50-150 ms) happens before the read thread receives the frame and is not in `age_ms`:
no rig can measure it without a clock in view.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any


def frame_facts(cameras: Mapping[str, Any], observed_at: float,
                previous: dict[str, float]) -> dict[str, tuple[float, bool]]:
    """{camera: (age_ms, repeated)} for the cameras that keep a `latest_timestamp`; updates
    `previous` (camera -> the stamp seen last step)."""
    out = {}
    for name, camera in cameras.items():
        stamp = getattr(camera, "latest_timestamp", None)
        if not isinstance(stamp, float):
            continue
        out[name] = (max(0.0, (observed_at - stamp) * 1000.0), previous.get(name) == stamp)
        previous[name] = stamp
    return out


# How long a camera has, once an episode's loop has ended, to deliver a frame newer than the one
# it last delivered: LeRobot's own limit on a frame's age in `read_latest` (500 ms, what the
# episode's steps accepted), so a camera the steps found alive is not called frozen here.
LIVE_AT_END_S = 0.5
# Frames it must deliver in that time: two, since the one its read thread was already waiting
# for when it stopped may still come (at 15-30 fps, two take at most 133 ms).
FRESH_AT_END = 2


def stale_at_end(cameras: Mapping[str, Any], wait_s: float = LIVE_AT_END_S) -> tuple[str, float] | None:
    """(camera, age_ms) of the first camera that delivered fewer than `FRESH_AT_END` new frames in
    the `wait_s` after an episode's loop ended, None when every camera keeping a
    `latest_timestamp` did.

    Why: a step takes a frame up to 500 ms old (LeRobot's `read_latest`), so a camera that stopped
    in the episode's last half second ends it without a read error, and its video holds a frozen
    picture over the very end a judge labels (the cube held, or dropped). Read-only: it polls the
    read thread's `latest_timestamp` (`time.perf_counter()`), nothing is consumed."""
    now = time.perf_counter
    seen = {name: cam.latest_timestamp for name, cam in cameras.items()
            if isinstance(getattr(cam, "latest_timestamp", None), float)}
    deadline = now() + wait_s
    fresh = {name: 0 for name in seen}
    while True:
        for name, stamp in seen.items():
            latest = cameras[name].latest_timestamp
            if latest != stamp:
                fresh[name] += 1
                seen[name] = latest
        waiting = [name for name, count in fresh.items() if count < FRESH_AT_END]
        if not waiting:
            return None
        if now() >= deadline:
            last = seen[waiting[0]]
            return waiting[0], (now() - last) * 1000.0 if isinstance(last, float) else wait_s * 1000.0
        time.sleep(0.005)
