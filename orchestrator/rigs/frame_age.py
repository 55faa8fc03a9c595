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
