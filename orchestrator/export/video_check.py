"""The check before an export is published: every frame time of every episode found in the
dataset's videos at LeRobot's tolerance, and LeRobot's own `LeRobotDataset` loading it.

For each episode and camera the frame times are LeRobot's own: `from_timestamp` (from the
dataset's `meta/episodes`, as LeRobotDataset reads it) plus `frame_index / fps`, to be found within
the default `tolerance_s` of `LeRobotDataset` (1e-4 s); further than that LeRobot raises its
`FrameTimestampError`, which is what a training run would hit.

- Re-encoded videos (`check_dataset`): every frame time decoded with
  `lerobot.datasets.video_utils.decode_video_frames` through the backend LeRobot picks here
  (`get_safe_default_video_backend`: torchcodec where it loads, else PyAV).
- Videos joined by stream copy (`check_joined`): the packets are read, not decoded (PyAV's
  demuxer): row k of an episode must be a packet at `from_timestamp + k / fps` (within the
  tolerance), byte for byte the recording's k-th packet, the episode's first packet a keyframe
  and the file's codec header (SPS/PPS) the recording's (`packets`, each file on one of the
  export's helpers). The same coded bytes from the same IDR
  frame with the same parameter sets decode to the same pixels (H.264 decoding is exact and an
  IDR frame drops every earlier reference), so every row shows the recorded frame, without
  decoding 14,400 frames through torch twice (docs/benchmarks.md, Export). Then `LeRobotDataset`
  itself loads the dataset and decodes the first and last row of the first and last episode in
  each video file, each equal to LeRobot's decoder reading the recording at that frame's time.

Imported only when a dataset is written (it imports LeRobot and torch)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from concurrent.futures import Executor, Future
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from lerobot.datasets.lerobot_dataset import LeRobotDataset
from lerobot.datasets.utils import EPISODES_DIR, INFO_PATH
from lerobot.datasets.video_utils import FrameTimestampError, decode_video_frames
from lerobot.utils.import_utils import get_safe_default_video_backend

from orchestrator.export.packets import EpisodeVideo, VideoCheckFailed, by_file, check_file, recorded_frames
from orchestrator.run.recording import GOP_S

TOLERANCE_S = float(inspect.signature(LeRobotDataset.__init__).parameters["tolerance_s"].default)
BATCH = 90   # about this many frame times per decoder call (measured fastest for LeRobot's PyAV decoder here)


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


def _check_one(label: str, path: Path, times: list[float], decoder: str, gop: int) -> int:
    """Decode `times` from `path`; each frame must be there."""
    checked = 0
    try:
        for _ in decoded(path, times, decoder, gop):
            checked += 1
    except FrameTimestampError as exc:
        raise VideoCheckFailed(f"{label}: LeRobot's {decoder} decoder: {str(exc).splitlines()[0]}") from None
    if checked != len(times):
        raise VideoCheckFailed(f"{label}: {checked} frames decoded for {len(times)} rows")
    return checked


def episode_videos(root: Path) -> tuple[int, list[EpisodeVideo]]:
    """(fps, every episode's rows in each camera's file), from `meta/info.json` and `meta/episodes`."""
    info = json.loads((Path(root) / INFO_PATH).read_text())
    fps = int(info["fps"])
    keys = [key for key, feature in info["features"].items() if feature.get("dtype") == "video"]
    columns = ["episode_index", "length", *(f"videos/{key}/{field}" for key in keys
                                            for field in ("from_timestamp", "chunk_index", "file_index"))]
    # the episodes' rows as LeRobot stores them (`meta/episodes/*.parquet`), read with pyarrow:
    # `LeRobotDatasetMetadata` loads them through `datasets` with every statistic's column; the
    # file path is its `get_video_file_path`'s format
    rows = sorted(pq.read_table(Path(root) / EPISODES_DIR, columns=columns).to_pylist(),
                  key=lambda row: row["episode_index"])
    if [row["episode_index"] for row in rows] != list(range(int(info["total_episodes"]))):
        raise VideoCheckFailed(f"meta/episodes holds episodes {[row['episode_index'] for row in rows]}, "
                               f"info.json {info['total_episodes']}")
    videos = []
    for row in rows:
        for key in keys:
            start = float(row[f"videos/{key}/from_timestamp"])
            path = info["video_path"].format(video_key=key, chunk_index=row[f"videos/{key}/chunk_index"],
                                             file_index=row[f"videos/{key}/file_index"])
            videos.append(EpisodeVideo(row["episode_index"], key, Path(root) / path,
                                       [start + k / fps for k in range(int(row["length"]))]))
    return fps, videos


def check_dataset(root: Path, decoder: str, workers: int = 2) -> int:
    """Decode every frame time of every episode (re-encoded videos); return how many were checked.
    Episodes are decoded on `workers` threads (the decoders release the GIL), torch on one
    thread each (its own intra-op threads only contend with them)."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    fps, videos = episode_videos(root)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(max(1, workers)) as pool:
            return sum(pool.map(lambda v: _check_one(v.label, v.path, v.times, decoder, GOP_S * fps), videos))
    finally:
        torch.set_num_threads(threads)


def _rows_lerobot_reads(videos: list[EpisodeVideo]) -> list[tuple[int, int]]:
    """(episode, row) of the first and last row of the first and last episode in each video file."""
    files: dict[Path, list[EpisodeVideo]] = {}
    for video in videos:
        files.setdefault(video.path, []).append(video)
    return sorted({(v.episode, k) for in_file in files.values() for v in (in_file[0], in_file[-1])
                   for k in (0, len(v.times) - 1) if v.times})


def check_lerobot_load(root: Path, repo_id: str, fps: int, videos: list[EpisodeVideo],
                       recordings: dict[tuple[int, str], Path], decoder: str,
                       recorded: dict[tuple[int, str], Future] | None = None) -> int:
    """`LeRobotDataset` loads the dataset at `root`, and each row of `_rows_lerobot_reads` it gives has,
    for every camera, the frame LeRobot's decoder reads from the recording at that frame's time
    (exactly equal); return how many rows were read. `recorded`: with LeRobot's PyAV decoder,
    (episode, video key) -> `packets.recorded_frames` of the recording at those rows, decoded on
    a helper (frame k is at k / fps: the packet check holds each recording to that), converted
    as LeRobot's PyAV decoder converts a frame (float32 in [0, 1], channels first)."""
    import torch

    dataset = LeRobotDataset(repo_id, root=root, video_backend=decoder)
    rows = _rows_lerobot_reads(videos)
    for episode, k in rows:
        index = int(dataset.meta.episodes[episode]["dataset_from_index"]) + k
        item = dataset[index]
        if (int(item["episode_index"]), int(item["frame_index"])) != (episode, k):
            raise VideoCheckFailed(f"LeRobotDataset's row {index} is episode {int(item['episode_index'])} "
                                   f"frame {int(item['frame_index'])}, not episode {episode} frame {k}")
        for key in dataset.meta.video_keys:
            if recorded is not None:
                frame = recorded[(episode, key)].result().get(k)
                want = (torch.from_numpy(frame).permute(2, 0, 1).type(torch.float32) / 255
                        if frame is not None else None)
            else:
                want = decode_video_frames(recordings[(episode, key)], [k / fps], TOLERANCE_S, backend=decoder)[0]
            if want is None or not torch.equal(item[key], want):
                raise VideoCheckFailed(f"episode {episode}, {key}: LeRobotDataset's frame {k} is not the "
                                       f"recorded frame ({recordings[(episode, key)].name})")
    return len(rows)


def check_joined(root: Path, repo_id: str, recordings: dict[tuple[int, str], Path], decoder: str,
                 helpers: Executor | None = None) -> tuple[int, int]:
    """The check of an export by stream copy (the module docstring): `recordings` is (episode index,
    video key) -> the recorded video joined there. Return (rows checked by their packets, rows
    read through `LeRobotDataset`). Each video file's packets, and with LeRobot's PyAV decoder
    the recorded frames `LeRobotDataset`'s rows are compared with, are read on `helpers` (the
    export's, `workers`; None: here) while `LeRobotDataset` loads the dataset here."""
    fps, videos = episode_videos(root)
    missing = sorted({(v.episode, v.key) for v in videos} - set(recordings))
    if missing:
        raise VideoCheckFailed(f"episode {missing[0][0]}, {missing[0][1]}: no recording given")
    files = by_file(videos)
    if helpers is None:
        checked = sum(check_file(path, in_file, recordings, TOLERANCE_S) for path, in_file in files.items())
        return checked, check_lerobot_load(root, repo_id, fps, videos, recordings, decoder)
    recorded = None
    if decoder == "pyav":   # first: the main thread needs them once LeRobotDataset has loaded
        rows: dict[int, list[int]] = {}
        for episode, k in _rows_lerobot_reads(videos):
            rows.setdefault(episode, []).append(k)
        recorded = {(v.episode, v.key): helpers.submit(recorded_frames, recordings[(v.episode, v.key)],
                                                       rows[v.episode])
                    for v in videos if v.episode in rows}
    jobs = [helpers.submit(check_file, path, in_file, recordings, TOLERANCE_S) for path, in_file in files.items()]
    try:
        read = check_lerobot_load(root, repo_id, fps, videos, recordings, decoder, recorded)
        return sum(job.result() for job in jobs), read
    finally:
        pending: list[Future] = [*jobs, *(recorded.values() if recorded is not None else ())]
        for job in pending:
            job.cancel()
