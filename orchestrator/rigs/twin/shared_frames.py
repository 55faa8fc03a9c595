"""Camera frames shared between the twin process (writer) and the orchestrator (reader).

One file per camera in a tmpfs folder (`/dev/shm` where it exists), memory-mapped by both
sides: a 64-byte header then one RGB frame. Header (little endian): magic `TWNF`, state (u32:
0 live, 1 frozen, 2 disconnected), height, width (u32), sequence (u64: odd while the writer is
copying a frame, even when the frame is whole), stamp (f64, `time.monotonic()` of the render;
CLOCK_MONOTONIC is one clock for every process on the machine). A reader copies the frame
and retries if the sequence changed meanwhile (a seqlock).
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from pathlib import Path

import numpy as np

MAGIC = b"TWNF"
HEADER = struct.Struct("<4sIIIQd")
HEADER_BYTES = 64
LIVE, FROZEN, DISCONNECTED = 0, 1, 2


def frames_root() -> Path:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(os.environ.get("TMPDIR", "/tmp"))


class _Mapped:
    """A shared file both processes map: `_map` over the descriptor `_fd`."""

    _map: mmap.mmap
    _fd: int

    def close(self) -> None:
        try:
            self._map.close()
            os.close(self._fd)
        except (OSError, ValueError, BufferError):
            pass


class FrameWriter(_Mapped):
    def __init__(self, path: Path, height: int, width: int):
        self.path, self.height, self.width = Path(path), int(height), int(width)
        size = HEADER_BYTES + self.height * self.width * 3
        with open(self.path, "wb") as f:
            f.truncate(size)
        self._fd = os.open(self.path, os.O_RDWR)
        self._map = mmap.mmap(self._fd, size)
        self._frame: np.ndarray = np.ndarray((self.height, self.width, 3), np.uint8, self._map, HEADER_BYTES)
        self.seq = 0
        self.state = LIVE
        self._header(0.0)

    def _header(self, stamp: float) -> None:
        self._map[:HEADER.size] = HEADER.pack(MAGIC, self.state, self.height, self.width, self.seq, stamp)

    def write(self, rgb: np.ndarray) -> None:
        if self.state != LIVE:
            return
        self.seq += 1
        self._header(time.monotonic())
        self._frame[...] = rgb
        self.seq += 1
        self._header(time.monotonic())

    def set_state(self, state: int) -> None:
        self.state = state
        self._header(time.monotonic())


class FrameReader(_Mapped):
    """Latest frame of one camera. `latest()` -> (sequence, stamp, frame copy, state)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_RDONLY)
        size = os.fstat(self._fd).st_size
        self._map = mmap.mmap(self._fd, size, prot=mmap.PROT_READ)
        magic, _, self.height, self.width, _, _ = HEADER.unpack(self._map[:HEADER.size])
        if magic != MAGIC:
            self.close()
            raise ConnectionError(f"{self.path} is not a twin camera")
        self._frame: np.ndarray = np.ndarray((self.height, self.width, 3), np.uint8, self._map, HEADER_BYTES)

    def header(self) -> tuple[int, int, float]:
        _, state, _, _, seq, stamp = HEADER.unpack(self._map[:HEADER.size])
        return state, seq, stamp

    def latest(self) -> tuple[int, float, np.ndarray | None, int]:
        for _ in range(100):
            state, seq, stamp = self.header()
            if seq == 0 or seq % 2:
                if seq == 0:
                    return seq, stamp, None, state
                time.sleep(0.0005)
                continue
            frame = self._frame.copy()
            state2, seq2, _ = self.header()
            if seq2 == seq:
                return seq, stamp, frame, state2
        return 0, 0.0, None, self.header()[0]


# ---------------------------------------------------------------- the scene state for the renderer

STATE = struct.Struct("<4sIIQd")     # magic TWNS, nq, cameras, sequence, stamp


class SceneState(_Mapped):
    """The simulation's joint positions (`qpos`), each camera's fault state and its frame-rate
    override (0: the camera's own fps; `camera_slow`), shared by the physics process (writer)
    with the render process (reader), seqlocked like the frames."""

    def __init__(self, path: Path, nq: int = 0, cameras: int = 0, create: bool = False):
        self.path = Path(path)
        if create:
            with open(self.path, "wb") as f:
                f.truncate(HEADER_BYTES + 4 * cameras + 8 * nq + 8 * cameras)
            self._fd = os.open(self.path, os.O_RDWR)
        else:
            self._fd = os.open(self.path, os.O_RDWR)
        self._map = mmap.mmap(self._fd, os.fstat(self._fd).st_size)
        if create:
            self._map[:STATE.size] = STATE.pack(b"TWNS", nq, cameras, 0, 0.0)
        _, self.nq, self.cameras, _, _ = STATE.unpack(self._map[:STATE.size])
        self._states: np.ndarray = np.ndarray((self.cameras,), np.uint32, self._map, HEADER_BYTES)
        self._qpos: np.ndarray = np.ndarray((self.nq,), np.float64, self._map, HEADER_BYTES + 4 * self.cameras)
        self._fps: np.ndarray = np.ndarray((self.cameras,), np.float64, self._map, HEADER_BYTES + 4 * self.cameras + 8 * self.nq)
        self.seq = STATE.unpack(self._map[:STATE.size])[3]

    def _put_seq(self, seq: int) -> None:
        self._map[:STATE.size] = STATE.pack(b"TWNS", self.nq, self.cameras, seq, time.monotonic())

    def write_qpos(self, qpos: np.ndarray) -> None:
        self.seq += 1
        self._put_seq(self.seq)
        self._qpos[:] = qpos
        self.seq += 1
        self._put_seq(self.seq)

    def read_qpos(self, out: np.ndarray) -> bool:
        for _ in range(100):
            seq = STATE.unpack(self._map[:STATE.size])[3]
            if seq % 2:
                time.sleep(0.0002)
                continue
            out[:] = self._qpos
            if STATE.unpack(self._map[:STATE.size])[3] == seq:
                return True
        return False

    def camera_state(self, index: int) -> int:
        return int(self._states[index])

    def set_camera_state(self, index: int, state: int) -> None:
        self._states[index] = state

    def camera_fps(self, index: int) -> float:
        return float(self._fps[index])

    def set_camera_fps(self, index: int, fps: float) -> None:
        self._fps[index] = fps

