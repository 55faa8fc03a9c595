"""The twin's cameras as a LeRobot camera type, `twin`.

Registered in LeRobot's camera config registry (`@CameraConfig.register_subclass("twin")`), so
`make_cameras_from_configs` builds it like any camera (`TwinCameraConfig` -> `TwinCamera`,
found by LeRobot's device-class lookup in this module). `index_or_path` is the shared frame
file the twin process renders into (`shared_frames.py`); frames rendered smaller than the profile's
width x height are scaled up (bilinear), so the policy sees the profile's shape.

The read thread and LeRobot's reads are `ThreadedCamera`'s (`rigs/so101/threaded_camera.py`, the
shape of LeRobot's OpenCVCamera): the thread takes each new frame off the "device" (the shared
frame file) and keeps the latest with its `latest_timestamp`; `read_latest(max_age_ms)` peeks at
it (`TimeoutError` when it is older: a frozen camera), `async_read(timeout_ms)` waits for a newer
one. A frame reaches the thread `latency_ms` after the twin rendered it (the exposure-to-array
latency of a USB camera: 50-150 ms; default `DEFAULT_LATENCY_MS`); its render time is its
`latest_exposure`. A grab fails when the device is gone or no frame comes within
`READ_TIMEOUT_S`; after more than ten failures in a row the thread ends, as LeRobot's does, and
every later read raises `RuntimeError` ("read thread is not running").

Imports LeRobot (and so torch): import this module only from the LeRobot adapters.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from lerobot.cameras.configs import CameraConfig
from lerobot.utils.errors import DeviceNotConnectedError

from orchestrator.rigs.so101.threaded_camera import ThreadedCamera
from orchestrator.rigs.twin.shared_frames import DISCONNECTED, FrameReader

POLL_S = 0.001
POLL_FRACTION = 0.25          # the read thread looks for a new frame 4 times a frame period
DEFAULT_LATENCY_MS = 80.0
READ_TIMEOUT_S = 2.0          # a real V4L2 read blocks until the driver gives up


@CameraConfig.register_subclass("twin")
@dataclass
class TwinCameraConfig(CameraConfig):
    """A camera of the twin: `index_or_path` is its frame file; fps, width, height as OpenCV's;
    `latency_ms` the delay from a frame's render to its arrival."""

    index_or_path: str | Path = ""
    latency_ms: float = DEFAULT_LATENCY_MS

    def __post_init__(self) -> None:
        self.index_or_path = Path(self.index_or_path)
        if not self.fps or not self.width or not self.height:
            raise ValueError("a twin camera needs fps, width and height")


class TwinCamera(ThreadedCamera):
    """Reads the twin's rendered frames (see the module docstring)."""

    warmup_s = 10.0
    join_s = READ_TIMEOUT_S + 1    # a grab gives up after READ_TIMEOUT_S

    def __init__(self, config: TwinCameraConfig):
        super().__init__(config)
        self.path = Path(config.index_or_path)
        self.latency_s = float(config.latency_ms) / 1000.0
        self._reader: FrameReader | None = None
        self._last_seq = 0
        self._pending: deque[tuple[float, np.ndarray]] = deque()

    def __str__(self) -> str:
        return f"TwinCamera({self.path.stem})"

    @property
    def is_connected(self) -> bool:
        return self._reader is not None   # as OpenCVCamera: an unplugged camera fails its reads

    @property
    def frames_delivered(self) -> int:
        """Frames the twin has rendered for this camera (the preflight's frame-rate counter)."""
        return self._reader.header()[1] // 2 if self._reader is not None else 0

    def _open(self) -> None:
        if not self.path.is_file():
            raise ConnectionError(f"{self}: no twin camera at {self.path} (is the twin running?)")
        self._reader = FrameReader(self.path)

    def _close(self) -> None:
        self._pending.clear()
        if self._reader is not None:
            self._reader.close()
        self._reader = None

    def _grab(self) -> tuple[np.ndarray, float]:
        """The next frame and its render time, `latency_ms` after it was rendered. Each new frame
        is copied off the device as it appears and held back until its time (a delay line: the
        device keeps only its newest frame). ConnectionError: the device is gone; TimeoutError:
        no frame within READ_TIMEOUT_S."""
        deadline = time.monotonic() + READ_TIMEOUT_S
        stop, reader = self.stop_event, self._reader
        if stop is None or reader is None:   # disconnected before this read thread got here
            raise DeviceNotConnectedError(f"{self} is stopping")
        while not stop.is_set():
            state, seq, _ = reader.header()
            if state == DISCONNECTED:
                self._pending.clear()
                raise ConnectionError(f"{self}: camera disconnected (device gone)")
            if seq and seq % 2 == 0 and seq != self._last_seq:
                got, stamp, frame, _ = reader.latest()
                if frame is not None:
                    self._last_seq = got
                    self._pending.append((stamp, frame))
                    deadline = time.monotonic() + READ_TIMEOUT_S
            if self._pending and self._pending[0][0] + self.latency_s <= time.monotonic():
                stamp, frame = self._pending.popleft()
                return self._shape(frame), stamp
            now = time.monotonic()
            if not self._pending and now > deadline:
                raise TimeoutError(f"{self}: no frame from the device in {READ_TIMEOUT_S} s")
            # Wake a few times a frame period, not every millisecond: the control loop shares
            # the interpreter with this thread.
            nap = POLL_FRACTION / self.fps
            if self._pending:
                nap = min(nap, self._pending[0][0] + self.latency_s - now)
            time.sleep(max(POLL_S, nap))
        raise DeviceNotConnectedError(f"{self} is stopping")

    def _shape(self, frame: np.ndarray) -> np.ndarray:
        if frame.shape[0] != self.height or frame.shape[1] != self.width:
            frame = cv2.resize(frame, (self.width, self.height), interpolation=cv2.INTER_LINEAR)
        return frame
