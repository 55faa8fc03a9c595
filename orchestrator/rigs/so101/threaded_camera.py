"""A LeRobot camera whose frames come off a background read thread, in the shape of LeRobot's
`OpenCVCamera` (lerobot/cameras/opencv/camera_opencv.py, LeRobot 0.6.1): the base of the
video-file camera (`videocam.py`) and of the twin's camera (`twin/twincamera.py`).

A subclass opens and closes its device (`_open`, `_close`, `is_connected`) and grabs one frame
(`_grab`); this class runs the read thread and serves LeRobot's `Camera` reads with
OpenCVCamera's semantics:

- the read thread calls `_grab()` in a loop and keeps the latest frame with its
  `latest_timestamp` (`time.perf_counter()` when the thread got it) and `latest_exposure` (when
  the device says the frame was exposed, `time.monotonic()`, or None), then sets
  `new_frame_event`;
- a failed grab (any exception but `DeviceNotConnectedError`) is retried; after more than
  `MAX_FAILURES` failures in a row the thread ends, as OpenCVCamera's `_read_loop` does, keeping
  the last failure in `error`; `DeviceNotConnectedError` ends it quietly (the camera is stopping);
- `read_latest(max_age_ms)` peeks at the latest frame without consuming it (`TimeoutError` when it
  is older than `max_age_ms`: a frozen camera), `async_read(timeout_ms)` waits for a frame newer
  than the last one it returned (`TimeoutError` when none comes), `read()` for the next one;
  all three raise `RuntimeError("... read thread is not running")` once the thread has ended and
  `DeviceNotConnectedError` when the camera is not connected;
- `disconnect()` stops the thread, drops the latest frame and closes the device.

The read threads still running when the interpreter exits are stopped first (`atexit`): a daemon
thread inside OpenCV at shutdown aborts the process.

Imports LeRobot (and so torch): import this module only from the LeRobot adapters.
"""

from __future__ import annotations

import abc
import atexit
import logging
import threading
import time
import weakref
from typing import Any

import numpy as np
from lerobot.cameras.camera import Camera
from lerobot.cameras.configs import CameraConfig
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

logger = logging.getLogger(__name__)

MAX_FAILURES = 10      # OpenCVCamera._read_loop: more than 10 failed reads in a row end the thread
RETRY_S = 0.001        # the pause before a failed grab is retried
_RUNNING: weakref.WeakSet[ThreadedCamera] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """Stop the read threads before the interpreter finalizes."""
    for cam in list(_RUNNING):
        if cam.stop_event is not None:
            cam.stop_event.set()
    for cam in list(_RUNNING):
        if cam.thread is not None:
            cam.thread.join(timeout=1.0)


class ThreadedCamera(Camera):
    """A camera read by a background thread (see the module docstring). Subclasses define
    `_open`, `_close`, `_grab` and `is_connected`; `warmup_s` bounds `connect`'s wait for the
    first frame, `join_s` `disconnect`'s wait for the thread."""

    warmup_s = 5.0
    join_s = 2.0

    def __init__(self, config: CameraConfig):
        super().__init__(config)
        self.config = config
        self.thread: threading.Thread | None = None
        self.stop_event: threading.Event | None = None
        self.frame_lock = threading.Lock()
        self.new_frame_event = threading.Event()
        self.latest_frame: np.ndarray | None = None
        self.latest_timestamp: float | None = None   # time.perf_counter() when the thread got it
        self.latest_exposure: float | None = None    # time.monotonic() of its exposure, if known
        self.error: BaseException | None = None      # the failure that ended the read thread

    # ------------------------------------------------------------ the subclass's device
    @abc.abstractmethod
    def _open(self) -> None:
        """Open the device; `ConnectionError` (one line: what and where) when it cannot."""

    @abc.abstractmethod
    def _close(self) -> None:
        """Release the device (the read thread has stopped or been given up on)."""

    @abc.abstractmethod
    def _grab(self) -> tuple[np.ndarray, float | None]:
        """The next frame (height x width x 3) and its exposure time (`time.monotonic()`, or
        None), blocking until it is there. Runs on the read thread; `self.stop_event` is set when
        the camera is stopping: then raise `DeviceNotConnectedError`. Any other exception is a
        failed read."""

    @staticmethod
    def find_cameras() -> list[dict[str, Any]]:
        return []

    # ------------------------------------------------------------ connection
    def connect(self, warmup: bool = True) -> None:
        if self.is_connected:
            raise DeviceAlreadyConnectedError(f"{self} already connected")
        self._open()
        self.error = None
        self.new_frame_event.clear()
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._read_loop, name=f"{self}_read_loop", daemon=True)
        _RUNNING.add(self)
        self.thread.start()
        if warmup:
            deadline = time.monotonic() + self.warmup_s
            while not self.new_frame_event.wait(timeout=0.01):
                if time.monotonic() > deadline or not self.thread.is_alive():
                    self.disconnect()
                    raise ConnectionError(f"{self} delivered no frame within {self.warmup_s:g} s")

    def disconnect(self) -> None:
        if not self.is_connected and self.thread is None:
            raise DeviceNotConnectedError(f"{self} not connected.")
        if self.stop_event is not None:
            self.stop_event.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=self.join_s)
            if self.thread.is_alive():
                logger.warning("%s read thread did not terminate within %g s", self, self.join_s)
        self.thread = None
        _RUNNING.discard(self)
        with self.frame_lock:
            self.latest_frame = self.latest_timestamp = self.latest_exposure = None
            self.new_frame_event.clear()
        self._close()

    # ------------------------------------------------------------ the read thread
    def _read_loop(self) -> None:
        stop = self.stop_event
        assert stop is not None
        failures = 0
        while not stop.is_set():
            try:
                frame, exposure = self._grab()
            except DeviceNotConnectedError:
                return
            except Exception as exc:  # noqa: BLE001 - as OpenCVCamera._read_loop
                failures += 1
                if failures > MAX_FAILURES:
                    self.error = exc
                    logger.warning("%s exceeded maximum consecutive read failures: %s", self, exc)
                    return
                time.sleep(RETRY_S)
                continue
            failures = 0
            with self.frame_lock:
                self.latest_frame, self.latest_timestamp = frame, time.perf_counter()
                self.latest_exposure = exposure
            self.new_frame_event.set()

    def _running(self) -> None:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected.")
        if self.thread is None or not self.thread.is_alive():
            cause = f" Last failure: {self.error}" if self.error is not None else ""
            raise RuntimeError(f"{self} read thread is not running.{cause}")

    # ------------------------------------------------------------ LeRobot's reads
    def read(self) -> np.ndarray:
        self._running()
        self.new_frame_event.clear()
        return self.async_read(timeout_ms=10000)

    def async_read(self, timeout_ms: float = 200) -> np.ndarray:
        self._running()
        if not self.new_frame_event.wait(timeout=timeout_ms / 1000.0):
            thread = self.thread   # None once a disconnect on another thread has stopped it
            raise TimeoutError(f"Timed out waiting for frame from camera {self} after {timeout_ms} ms. "
                               f"Read thread alive: {thread is not None and thread.is_alive()}.")
        with self.frame_lock:
            frame = self.latest_frame
            self.new_frame_event.clear()
        if frame is None:
            raise RuntimeError(f"Internal error: Event set but no frame available for {self}.")
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
