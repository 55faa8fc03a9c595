"""The twin's cameras as a LeRobot camera type, `twin`.

Registered in LeRobot's camera config registry (`@CameraConfig.register_subclass("twin")`), so
`make_cameras_from_configs` builds it like any camera (`TwinCameraConfig` -> `TwinCamera`,
found by LeRobot's device-class lookup in this module). `index_or_path` is the shared frame
file the twin process renders into (`frames.py`); frames rendered smaller than the profile's
width x height are scaled up (bilinear), so the policy sees the profile's shape.

Semantics are OpenCVCamera's: `read()` waits for a new frame, `async_read(timeout_ms)` raises
`TimeoutError` when none arrives in time, `read_latest(max_age_ms)` raises `TimeoutError` when
the newest frame is older than that (a frozen camera); a disconnected camera raises
`ConnectionError` on every read.

Imports LeRobot (and so torch): import this module only from the LeRobot adapters.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from lerobot.cameras.camera import Camera
from lerobot.cameras.configs import CameraConfig
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from orchestrator.rigs.twin.shared_frames import DISCONNECTED, FrameReader

POLL_S = 0.001


@CameraConfig.register_subclass("twin")
@dataclass
class TwinCameraConfig(CameraConfig):
    """A camera of the twin: `index_or_path` is its frame file; fps, width, height as OpenCV's."""

    index_or_path: str | Path = ""

    def __post_init__(self) -> None:
        self.index_or_path = Path(self.index_or_path)
        if not self.fps or not self.width or not self.height:
            raise ValueError("a twin camera needs fps, width and height")


class TwinCamera(Camera):
    """Reads the twin's rendered frames (see the module docstring)."""

    def __init__(self, config: TwinCameraConfig):
        super().__init__(config)
        self.config = config
        self.path = Path(config.index_or_path)
        self._reader: FrameReader | None = None
        self._last_seq = 0

    def __str__(self) -> str:
        return f"TwinCamera({self.path.stem})"

    @property
    def is_connected(self) -> bool:
        return self._reader is not None   # as OpenCVCamera: an unplugged camera fails its reads

    @property
    def frames_delivered(self) -> int:
        """Frames the twin has rendered for this camera (the preflight's frame-rate counter)."""
        return self._reader.header()[1] // 2 if self._reader is not None else 0

    @staticmethod
    def find_cameras() -> list[dict[str, Any]]:
        return []

    def connect(self, warmup: bool = True) -> None:
        if self._reader is not None:
            raise DeviceAlreadyConnectedError(f"{self} already connected")
        if not self.path.is_file():
            raise ConnectionError(f"{self}: no twin camera at {self.path} (is the twin running?)")
        self._reader = FrameReader(self.path)
        if warmup:
            deadline = time.monotonic() + 10.0
            while self._reader.header()[1] < 2:
                if time.monotonic() > deadline:
                    self.disconnect()
                    raise ConnectionError(f"{self} delivered no frame within 10 s")
                time.sleep(0.01)

    def _grab(self) -> tuple[int, float, np.ndarray | None]:
        if self._reader is None:
            raise DeviceNotConnectedError(f"{self} is not connected.")
        seq, stamp, frame, state = self._reader.latest()
        if state == DISCONNECTED:
            raise ConnectionError(f"{self}: camera disconnected (device gone)")
        return seq, stamp, frame

    def _shape(self, frame: np.ndarray) -> np.ndarray:
        if frame.shape[0] != self.height or frame.shape[1] != self.width:
            frame = cv2.resize(frame, (self.width, self.height), interpolation=cv2.INTER_LINEAR)
        return frame

    def read(self) -> np.ndarray:
        return self.async_read(timeout_ms=10000)

    def async_read(self, timeout_ms: float = 200) -> np.ndarray:
        deadline = time.monotonic() + timeout_ms / 1000.0
        while True:
            seq, _, frame = self._grab()
            if frame is not None and seq != self._last_seq:
                self._last_seq = seq
                return self._shape(frame)
            if time.monotonic() > deadline:
                raise TimeoutError(f"Timed out waiting for frame from camera {self} after {timeout_ms} ms.")
            time.sleep(POLL_S)

    def read_latest(self, max_age_ms: int = 500) -> np.ndarray:
        seq, stamp, frame = self._grab()
        if frame is None:
            raise RuntimeError(f"{self} has not captured any frames yet.")
        age_ms = (time.monotonic() - stamp) * 1e3
        if age_ms > max_age_ms:
            raise TimeoutError(f"{self} latest frame is too old: {age_ms:.1f} ms (max allowed: {max_age_ms} ms).")
        self._last_seq = seq
        return self._shape(frame)

    def disconnect(self) -> None:
        if self._reader is None:
            raise DeviceNotConnectedError(f"{self} not connected.")
        self._reader.close()
        self._reader = None
