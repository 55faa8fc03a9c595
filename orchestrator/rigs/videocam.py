"""A video file played as a LeRobot camera (demos and tests), looping.

Registered in LeRobot's camera config registry as `video`, so a rig profile can name
`{type: video, index_or_path: clip.mp4, width: 640, height: 480, fps: 30}` next to real
OpenCV cameras and LeRobot's `make_cameras_from_configs` builds it like any camera
(`VideoCamConfig` -> `VideoCam`, found by LeRobot's device-class lookup in this module).

Frames are decoded on a background thread at the configured fps (the file's own rate is
ignored), resized to width x height if the file differs, converted to RGB, and served with
OpenCVCamera's semantics: `read()` waits for a new frame, `async_read(timeout_ms)` raises
`TimeoutError` when none arrives, `read_latest(max_age_ms)` raises `TimeoutError` when the
newest frame is stale (a camera that stopped delivering).

Fault injection for tests and demos: `stop_after_frames: N` in the profile (or `freeze()`)
makes the camera stop delivering, as an unplugged USB camera does.

Imports LeRobot (and so torch): import this module only from the LeRobot adapters.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from lerobot.cameras.camera import Camera
from lerobot.cameras.configs import CameraConfig, ColorMode
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

logger = logging.getLogger(__name__)
_RUNNING: "weakref.WeakSet[VideoCam]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """Stop decoding threads before the interpreter finalizes (a daemon thread inside OpenCV at
    shutdown aborts the process)."""
    for cam in list(_RUNNING):
        cam._stop.set()
    for cam in list(_RUNNING):
        if cam._thread is not None:
            cam._thread.join(timeout=1.0)


@CameraConfig.register_subclass("video")
@dataclass
class VideoCamConfig(CameraConfig):
    """A video file as a camera. `fps`, `width`, `height` as for `OpenCVCameraConfig`."""

    index_or_path: str | Path = ""
    loop: bool = True
    color_mode: ColorMode = ColorMode.RGB
    stop_after_frames: int | None = None

    def __post_init__(self) -> None:
        self.index_or_path = Path(self.index_or_path)
        self.color_mode = ColorMode(self.color_mode)
        if not self.fps or not self.width or not self.height:
            raise ValueError("a video camera needs fps, width and height")


class VideoCam(Camera):
    """Plays `config.index_or_path` as a live camera (see module docstring)."""

    def __init__(self, config: VideoCamConfig):
        super().__init__(config)
        self.config = config
        self.path = Path(config.index_or_path)
        self._cap: cv2.VideoCapture | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._frozen = threading.Event()
        self._lock = threading.Lock()
        self._new = threading.Event()
        self._frame: np.ndarray | None = None
        self._stamp: float | None = None
        self.frames_delivered = 0
        self.error: BaseException | None = None

    def __str__(self) -> str:
        return f"VideoCam({self.path.name})"

    @property
    def is_connected(self) -> bool:
        return self._cap is not None and self._thread is not None and self._thread.is_alive()

    @staticmethod
    def find_cameras() -> list[dict[str, Any]]:
        return []

    def connect(self, warmup: bool = True) -> None:
        if self.is_connected:
            raise DeviceAlreadyConnectedError(f"{self} already connected")
        if not self.path.is_file():
            raise ConnectionError(f"{self}: video file {self.path} not found")
        cap = cv2.VideoCapture(str(self.path))
        if not cap.isOpened():
            cap.release()
            raise ConnectionError(f"{self}: OpenCV cannot decode {self.path}")
        self._cap = cap
        self._stop.clear()
        self._frozen.clear()
        self._thread = threading.Thread(target=self._run, name=f"{self}_read_loop", daemon=True)
        _RUNNING.add(self)
        self._thread.start()
        if warmup and not self._new.wait(timeout=5.0):
            self.disconnect()
            raise ConnectionError(f"{self} delivered no frame within 5 s")

    def freeze(self) -> None:
        """Stop delivering frames (the thread stays alive, like a hung USB camera)."""
        self._frozen.set()

    def _decode(self) -> np.ndarray | None:
        assert self._cap is not None
        ok, frame = self._cap.read()
        if not ok and self.config.loop:
            self._cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
            ok, frame = self._cap.read()
        if not ok:
            return None
        if frame.shape[0] != self.height or frame.shape[1] != self.width:
            frame = cv2.resize(frame, (self.width, self.height), interpolation=cv2.INTER_AREA)
        if self.config.color_mode == ColorMode.RGB:
            frame = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
        return frame

    def _run(self) -> None:
        period = 1.0 / float(self.fps or 30)
        next_t = time.perf_counter()
        try:
            while not self._stop.is_set():
                limit = self.config.stop_after_frames
                if self._frozen.is_set() or (limit is not None and self.frames_delivered >= limit):
                    self._stop.wait(0.05)
                    continue
                frame = self._decode()
                if frame is None:
                    logger.info("%s reached the end of the file", self)
                    self._frozen.set()
                    continue
                next_t += period
                delay = next_t - time.perf_counter()
                if delay > 0:
                    self._stop.wait(delay)
                elif delay < -10 * period:  # far behind (suspended): restart the clock
                    next_t = time.perf_counter()
                # slightly behind: deliver at once and catch up, so the average rate holds
                with self._lock:
                    self._frame, self._stamp = frame, time.perf_counter()
                self.frames_delivered += 1
                self._new.set()
        except BaseException as exc:  # noqa: BLE001 - reported by the readers
            self.error = exc
            logger.warning("%s read loop failed: %s", self, exc)

    def _check(self) -> None:
        if self._cap is None:
            raise DeviceNotConnectedError(f"{self} is not connected.")
        if self._thread is None or not self._thread.is_alive():
            raise RuntimeError(f"{self} read thread is not running"
                               + (f" ({self.error})" if self.error else ""))

    def read(self) -> np.ndarray:
        self._check()
        self._new.clear()
        return self.async_read(timeout_ms=10000)

    def async_read(self, timeout_ms: float = 200) -> np.ndarray:
        self._check()
        if not self._new.wait(timeout=timeout_ms / 1000.0):
            raise TimeoutError(f"Timed out waiting for frame from camera {self} after {timeout_ms} ms.")
        with self._lock:
            frame = self._frame
            self._new.clear()
        assert frame is not None
        return frame

    def read_latest(self, max_age_ms: int = 500) -> np.ndarray:
        self._check()
        with self._lock:
            frame, stamp = self._frame, self._stamp
        if frame is None or stamp is None:
            raise RuntimeError(f"{self} has not captured any frames yet.")
        age_ms = (time.perf_counter() - stamp) * 1e3
        if age_ms > max_age_ms:
            raise TimeoutError(f"{self} latest frame is too old: {age_ms:.1f} ms (max allowed: {max_age_ms} ms).")
        return frame

    def disconnect(self) -> None:
        if self._cap is None and self._thread is None:
            raise DeviceNotConnectedError(f"{self} not connected.")
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self._thread = None
        _RUNNING.discard(self)
        if self._cap is not None:
            self._cap.release()
        self._cap = None
        with self._lock:
            self._frame = self._stamp = None
        self._new.clear()
