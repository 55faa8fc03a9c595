"""A video file played as a LeRobot camera (demos and tests), looping.

Registered in LeRobot's camera config registry as `video`, so a rig profile can name
`{type: video, index_or_path: clip.mp4, width: 640, height: 480, fps: 30}` next to real
OpenCV cameras and LeRobot's `make_cameras_from_configs` builds it like any camera
(`VideoCamConfig` -> `VideoCam`, found by LeRobot's device-class lookup in this module).

Frames are decoded on a background read thread at the configured fps (the file's own rate is
ignored), resized to width x height if the file differs, converted to RGB, and served by
`ThreadedCamera` (`threaded_camera.py`) with OpenCVCamera's semantics: `read()` waits for a new
frame, `async_read(timeout_ms)` raises `TimeoutError` when none arrives, `read_latest(max_age_ms)`
raises `TimeoutError` when the newest frame is stale (a camera that stopped delivering), and a
decoder that keeps failing ends the thread (`RuntimeError`: "read thread is not running").

Fault injection for tests and demos: `stop_after_frames: N` in the profile (or `freeze()`)
makes the camera stop delivering, as an unplugged USB camera does.

Imports LeRobot (and so torch): import this module only from the LeRobot adapters.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from lerobot.cameras.configs import CameraConfig, ColorMode
from lerobot.utils.errors import DeviceNotConnectedError

from orchestrator.rigs.so101.threaded_camera import ThreadedCamera

logger = logging.getLogger(__name__)


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


class VideoCam(ThreadedCamera):
    """Plays `config.index_or_path` as a live camera (see module docstring)."""

    def __init__(self, config: VideoCamConfig):
        super().__init__(config)
        self.path = Path(config.index_or_path)
        self._cap: cv2.VideoCapture | None = None
        self._frozen = threading.Event()
        self._next_t = 0.0            # when the next frame is due (time.perf_counter())
        self.frames_delivered = 0

    def __str__(self) -> str:
        return f"VideoCam({self.path.name})"

    @property
    def is_connected(self) -> bool:
        return self._cap is not None   # as OpenCVCamera: the capture is open

    def _open(self) -> None:
        if not self.path.is_file():
            raise ConnectionError(f"{self}: video file {self.path} not found")
        cap = cv2.VideoCapture(str(self.path))
        if not cap.isOpened():
            cap.release()
            raise ConnectionError(f"{self}: OpenCV cannot decode {self.path}")
        self._cap = cap
        self._frozen.clear()
        self._next_t = time.perf_counter()

    def _close(self) -> None:
        if self._cap is not None:
            self._cap.release()
        self._cap = None

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

    def _grab(self) -> tuple[np.ndarray, None]:
        """The next frame of the file when it is due at the configured fps; none while frozen
        (`freeze()`, `stop_after_frames`, the end of a file that does not loop)."""
        stop = self.stop_event
        if stop is None:   # disconnected before this read thread got here
            raise DeviceNotConnectedError(f"{self} is stopping")
        while True:
            limit = self.config.stop_after_frames
            if self._frozen.is_set() or (limit is not None and self.frames_delivered >= limit):
                if stop.wait(0.05):
                    raise DeviceNotConnectedError(f"{self} is stopping")
                continue
            frame = self._decode()
            if frame is not None:
                break
            logger.info("%s reached the end of the file", self)
            self._frozen.set()
        period = 1.0 / float(self.fps or 30)
        self._next_t += period
        delay = self._next_t - time.perf_counter()
        if delay > 0:
            stop.wait(delay)
        elif delay < -10 * period:  # far behind (suspended): restart the clock
            self._next_t = time.perf_counter()
        # slightly behind: deliver at once and catch up, so the average rate holds
        self.frames_delivered += 1
        return frame, None
