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
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from lerobot.datasets.lerobot_dataset import LeRobotDataset
from lerobot.datasets.utils import EPISODES_DIR, INFO_PATH
from lerobot.datasets.video_utils import FrameTimestampError, decode_video_frames
from lerobot.utils.import_utils import get_safe_default_video_backend

from orchestrator.export.recorded import crc
from orchestrator.run.recording import GOP_S

TOLERANCE_S = float(inspect.signature(LeRobotDataset.__init__).parameters["tolerance_s"].default)
BATCH = 90   # about this many frame times per decoder call (measured fastest for LeRobot's PyAV decoder here)


class VideoCheckFailed(Exception):
    """The dataset's videos do not give back every frame; the message says where and why."""


def backend() -> str:
    """LeRobot's decoder here: torchcodec where it loads, else PyAV."""
    import logging

    logging.getLogger("lerobot.utils.import_utils").setLevel(logging.ERROR)
    return get_safe_default_video_backend()


def batches(count: int, gop: int) -> Iterator[tuple[int, int]]:
    """[start, end) of the decoder calls for `count` consecutive frame times of an episode that starts
    on a keyframe and has one every `gop` frames: about `BATCH` frames each, a whole number of
    keyframe intervals, every call after the first starting one frame after a keyframe. LeRobot's
    PyAV decoder seeks to the keyframe before its first time less one tick, so a call that starts
    on a keyframe decodes the interval before it for nothing (a third more frames at 90 a call)."""
    size = gop * max(1, BATCH // gop)
    start = 0
    while start < count:
        end = min(count, (start // size + 1) * size + 1)
        yield start, end
        start = end


def decoded(path: Path, times: list[float], decoder: str, gop: int = 1) -> Iterator[np.ndarray]:
    """The frames LeRobot's decoder gives for `times` (3xHxW uint8, as it returns them), in order;
    `gop`: the video's frames from one keyframe to the next (`batches`)."""
    for start, end in batches(len(times), gop):
        batch = decode_video_frames(path, times[start:end], TOLERANCE_S, backend=decoder, return_uint8=True)
        for frame in batch:
            yield frame.contiguous().numpy()


def _check_one(label: str, path: Path, times: list[float], want: np.ndarray | None, decoder: str,
               gop: int) -> int:
    """Decode `times` from `path`; each frame must be there (and be the recorded one)."""
    if want is not None and len(want) != len(times):
        raise VideoCheckFailed(f"{label}: {len(want)} recorded frames for {len(times)} rows")
    checked = 0
    try:
        for k, image in enumerate(decoded(path, times, decoder, gop)):
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

    info = json.loads((Path(root) / INFO_PATH).read_text())
    fps = int(info["fps"])
    keys = [key for key, feature in info["features"].items() if feature.get("dtype") == "video"]
    columns = ["episode_index", "length", *(f"videos/{key}/{field}" for key in keys
                                            for field in ("from_timestamp", "chunk_index", "file_index"))]
    # the episodes' rows as LeRobot stores them (`meta/episodes/*.parquet`), read with pyarrow:
    # `LeRobotDatasetMetadata` loads them through `datasets` with every statistic's column, 4 s of
    # CPU for the demo's 40 episodes; the file path is its `get_video_file_path`'s format
    rows = sorted(pq.read_table(Path(root) / EPISODES_DIR, columns=columns).to_pylist(),
                  key=lambda row: row["episode_index"])
    if [row["episode_index"] for row in rows] != list(range(int(info["total_episodes"]))):
        raise VideoCheckFailed(f"meta/episodes holds episodes {[row['episode_index'] for row in rows]}, "
                               f"info.json {info['total_episodes']}")
    tasks = []
    for row in rows:
        ep = row["episode_index"]
        for key in keys:
            start = float(row[f"videos/{key}/from_timestamp"])
            times = [start + k / fps for k in range(int(row["length"]))]
            path = info["video_path"].format(video_key=key, chunk_index=row[f"videos/{key}/chunk_index"],
                                             file_index=row[f"videos/{key}/file_index"])
            tasks.append((f"episode {ep}, {key}", Path(root) / path, times,
                          None if expected is None else expected[(ep, key)]))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(max(1, workers)) as pool:
            return sum(pool.map(lambda task: _check_one(*task, decoder, GOP_S * fps), tasks))
    finally:
        torch.set_num_threads(threads)
