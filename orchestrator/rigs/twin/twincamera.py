"""The twin's cameras as a LeRobot camera type, `twin`.

Registered in LeRobot's camera config registry (`@CameraConfig.register_subclass("twin")`), so
`make_cameras_from_configs` builds it like any camera (`TwinCameraConfig` -> `TwinCamera`,
found by LeRobot's device-class lookup in this module). `index_or_path` is the shared frame
file the twin process renders into (`frames.py`); frames rendered smaller than the profile's
width x height are scaled up (bilinear), so the policy sees the profile's shape.

Semantics are LeRobot's OpenCVCamera's: a background read thread takes each new frame off the
"device" (the shared frame file) and keeps the latest with its `latest_timestamp`
(`time.perf_counter()` when the thread got it); `read_latest(max_age_ms)` peeks at it without
consuming it (the same frame again until a new one arrives; `TimeoutError` when it is older than
`max_age_ms`, a frozen camera), `async_read(timeout_ms)` waits for a frame newer than the last
one it returned, `read()` for the next. A frame reaches the thread `latency_ms` after the
twin rendered it (the exposure-to-array latency of a USB camera: 50-150 ms; default
`DEFAULT_LATENCY_MS`). A read that fails (the device gone, or no frame within `READ_TIMEOUT_S`)
is retried; after more than `MAX_FAILURES` failures in a row the thread dies, as LeRobot's
does, and every later read raises `RuntimeError` ("read thread is not running").

Imports LeRobot (and so torch): import this module only from the LeRobot adapters.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
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

logger = logging.getLogger(__name__)

POLL_S = 0.001
POLL_FRACTION = 0.25          # the read thread looks for a new frame 4 times a frame period
DEFAULT_LATENCY_MS = 80.0
READ_TIMEOUT_S = 2.0          # a real V4L2 read blocks until the driver gives up
MAX_FAILURES = 10             # OpenCVCamera._read_loop: more than 10 failures in a row end it


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


class TwinCamera(Camera):
    """Reads the twin's rendered frames (see the module docstring)."""

    def __init__(self, config: TwinCameraConfig):
        super().__init__(config)
        self.config = config
        self.path = Path(config.index_or_path)
        self.latency_s = float(config.latency_ms) / 1000.0
        self._reader: FrameReader | None = None
        self._last_seq = 0
        self.latest_frame: np.ndarray | None = None
        self.latest_timestamp: float | None = None
        self.frame_lock = threading.Lock()
        self.new_frame_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.stop_event: threading.Event | None = None
        self._pending: deque[tuple[float, np.ndarray]] = deque()
        self.exposure_stamp: float | None = None    # the render time of the frame the thread last took
        self.latest_exposure: float | None = None   # ... of `latest_frame` (time.monotonic())

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
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._read_loop, name=f"{self}_read_loop", daemon=True)
        self.thread.start()
        if warmup:
            deadline = time.monotonic() + 10.0
            while self.latest_frame is None:
                if time.monotonic() > deadline or not self.thread.is_alive():
                    self.disconnect()
                    raise ConnectionError(f"{self} delivered no frame within 10 s")
                time.sleep(0.01)

    # ------------------------------------------------------------ the read thread
    def _read_from_device(self) -> np.ndarray:
        """The next frame, `latency_ms` after it was rendered. Each new frame is copied off the
        device as it appears and held back until its time (a delay line: the device keeps only
        its newest frame). ConnectionError: the device is gone; TimeoutError: no frame within
        READ_TIMEOUT_S."""
        deadline = time.monotonic() + READ_TIMEOUT_S
        while not self.stop_event.is_set():
            state, seq, _ = self._reader.header()
            if state == DISCONNECTED:
                self._pending.clear()
                raise ConnectionError(f"{self}: camera disconnected (device gone)")
            if seq and seq % 2 == 0 and seq != self._last_seq:
                got, stamp, frame, _ = self._reader.latest()
                if frame is not None:
                    self._last_seq = got
                    self._pending.append((stamp, frame))
                    deadline = time.monotonic() + READ_TIMEOUT_S
            if self._pending and self._pending[0][0] + self.latency_s <= time.monotonic():
                self.exposure_stamp, frame = self._pending.popleft()
                return self._shape(frame)
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

    def _read_loop(self) -> None:
        failures = 0
        while not self.stop_event.is_set():
            try:
                frame = self._read_from_device()
            except DeviceNotConnectedError:
                return
            except Exception as exc:  # noqa: BLE001 - as OpenCVCamera._read_loop
                failures += 1
                if failures > MAX_FAILURES:
                    logger.warning("%s exceeded maximum consecutive read failures: %s", self, exc)
                    return
                time.sleep(POLL_S)
                continue
            failures = 0
            with self.frame_lock:
                self.latest_frame, self.latest_timestamp = frame, time.perf_counter()
                self.latest_exposure = self.exposure_stamp
            self.new_frame_event.set()

    def _running(self) -> None:
        if self._reader is None:
            raise DeviceNotConnectedError(f"{self} is not connected.")
        if self.thread is None or not self.thread.is_alive():
            raise RuntimeError(f"{self} read thread is not running.")

    def _shape(self, frame: np.ndarray) -> np.ndarray:
        if frame.shape[0] != self.height or frame.shape[1] != self.width:
            frame = cv2.resize(frame, (self.width, self.height), interpolation=cv2.INTER_LINEAR)
        return frame

    # ------------------------------------------------------------ LeRobot's reads
    def read(self) -> np.ndarray:
        self._running()
        self.new_frame_event.clear()
        return self.async_read(timeout_ms=10000)

    def async_read(self, timeout_ms: float = 200) -> np.ndarray:
        self._running()
        if not self.new_frame_event.wait(timeout=timeout_ms / 1000.0):
            raise TimeoutError(f"Timed out waiting for frame from camera {self} after {timeout_ms} ms. "
                               f"Read thread alive: {self.thread.is_alive()}.")
        with self.frame_lock:
            frame = self.latest_frame
            self.new_frame_event.clear()
        return frame

    def read_latest(self, max_age_ms: int = 500) -> np.ndarray:
        self._running()
        with self.frame_lock:
            frame, stamp = self.latest_frame, self.latest_timestamp
        if frame is None or stamp is None:
            raise RuntimeError(f"{self} has not captured any frames yet.")
        age_ms = (time.perf_counter() - stamp) * 1e3
        if age_ms > max_age_ms:
            raise TimeoutError(f"{self} latest frame is too old: {age_ms:.1f} ms (max allowed: {max_age_ms} ms).")
        return frame

    def disconnect(self) -> None:
        if self._reader is None:
            raise DeviceNotConnectedError(f"{self} not connected.")
        if self.stop_event is not None:
            self.stop_event.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=READ_TIMEOUT_S + 1)
        self.thread = None
        self._reader.close()
        self._reader = None
