"""The check before an export is published: every frame time of every episode decoded from the
dataset with LeRobot's own decoder, at LeRobot's tolerance.

For each episode and camera the frame times are LeRobot's own: `from_timestamp` (from the
dataset's `meta/episodes`, as LeRobotDataset reads it) plus `frame_index / fps`. They are decoded
with `lerobot.datasets.video_utils.decode_video_frames` through the backend LeRobot picks here
(`get_safe_default_video_backend`: torchcodec where it loads, else PyAV) with the default
`tolerance_s` of `LeRobotDataset` (1e-4 s); a frame further than that raises LeRobot's own
`FrameTimestampError`, which is what a training run would hit. When the recorded frames' CRC-32s
are given (an export by stream copy), each decoded frame must also be the recorded one.

Imported only when a dataset is written (it imports LeRobot and torch)."""

from __future__ import annotations

import inspect
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from lerobot.datasets.dataset_metadata import LeRobotDatasetMetadata
from lerobot.datasets.lerobot_dataset import LeRobotDataset
from lerobot.datasets.video_utils import FrameTimestampError, decode_video_frames
from lerobot.utils.import_utils import get_safe_default_video_backend

TOLERANCE_S = float(inspect.signature(LeRobotDataset.__init__).parameters["tolerance_s"].default)
BATCH = 90   # frame times per decoder call (measured fastest for LeRobot's PyAV decoder here)


class VideoCheckFailed(Exception):
    """The dataset's videos do not give back every frame; the message says where and why."""


def backend() -> str:
    """LeRobot's decoder here: torchcodec where it loads, else PyAV."""
    import logging

    logging.getLogger("lerobot.utils.import_utils").setLevel(logging.ERROR)
    return get_safe_default_video_backend()


def decoded(path: Path, times: list[float], decoder: str) -> Iterator[np.ndarray]:
    """The frames LeRobot's decoder gives for `times` (3xHxW uint8, as it returns them), in order."""
    for start in range(0, len(times), BATCH):
        batch = decode_video_frames(path, times[start:start + BATCH], TOLERANCE_S, backend=decoder,
                                    return_uint8=True)
        for frame in batch:
            yield frame.contiguous().numpy()


def recorded_frames(path: Path, count: int, fps: int, decoder: str) -> Iterator[np.ndarray]:
    """A recorded episode video's frames (HxWx3 uint8) as LeRobot's decoder gives them: PyAV's
    `to_ndarray(rgb24)` in order (what LeRobot's PyAV decoder does), or torchcodec at k / fps."""
    if decoder != "pyav":
        for chw in decoded(path, [k / fps for k in range(count)], decoder):
            yield chw.transpose(1, 2, 0)
        return
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            yield frame.to_ndarray(format="rgb24")


def crc(image: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(image).data)


def _check_one(label: str, path: Path, times: list[float], want: np.ndarray | None, decoder: str) -> int:
    """Decode `times` from `path`; each frame must be there (and be the recorded one)."""
    if want is not None and len(want) != len(times):
        raise VideoCheckFailed(f"{label}: {len(want)} recorded frames for {len(times)} rows")
    checked = 0
    try:
        for k, image in enumerate(decoded(path, times, decoder)):
            if want is not None and crc(image) != int(want[k]):
                raise VideoCheckFailed(f"{label}: frame {k} (t = {times[k]:.4f} s in {path.name}) differs "
                                       "from the recorded frame")
            checked += 1
    except FrameTimestampError as exc:
        raise VideoCheckFailed(f"{label}: LeRobot's {decoder} decoder: {str(exc).splitlines()[0]}") from None
    if checked != len(times):
        raise VideoCheckFailed(f"{label}: {checked} frames decoded for {len(times)} rows")
    return checked


def check_dataset(root: Path, repo_id: str, expected: dict[tuple[int, str], np.ndarray] | None,
                  decoder: str, workers: int = 2) -> int:
    """Decode every frame time of every episode; return how many were checked. `expected`:
    (episode index, video key) -> the recorded frames' CRC-32s, or None (re-encoded videos).
    Episodes are decoded on `workers` threads (the decoders release the GIL), torch on one
    thread each (its own intra-op threads only contend with them)."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    meta = LeRobotDatasetMetadata(repo_id, root=root)
    tasks = []
    for ep in range(meta.total_episodes):
        row = meta.episodes[ep]
        for key in meta.video_keys:
            start = float(row[f"videos/{key}/from_timestamp"])
            times = [start + k / meta.fps for k in range(int(row["length"]))]
            tasks.append((f"episode {ep}, {key}", Path(root) / meta.get_video_file_path(ep, key), times,
                          None if expected is None else expected[(ep, key)]))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(max(1, workers)) as pool:
            return sum(pool.map(lambda task: _check_one(*task, decoder), tasks))
    finally:
        torch.set_num_threads(threads)
