"""The dataset written by stream copy: LeRobot's own writer (`LeRobotDatasetMetadata.create` and a
`DatasetWriter`) writes the frames' table, the episodes' metadata, the tasks, the statistics and
`info.json`; only where LeRobot would encode an episode's video and join it to the camera's file
(`DatasetWriter._save_episode_video`) the recorded video is joined by stream copy
(`remux.LayoutMuxer`) and its from/to timestamps are handed to LeRobot.

`RecordedVideos` stands where LeRobot's `StreamingVideoEncoder` stands in its writer (the same
methods): it encodes nothing, and hands LeRobot each camera's recorded video with its frame
statistics at the end of each episode. The statistics are the ones LeRobot computes for stored
video frames (`compute_episode_stats`: `sample_indices` frames, `auto_downsample_height_width`,
`get_feature_stats` per channel), on the recorded frames decoded; the same pass keeps a CRC-32
of every frame, so `video_check` can tell the dataset gives back exactly the recorded frames.

Imported only when a dataset is written (it imports LeRobot and torch)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from lerobot.configs.video import RGBEncoderConfig
from lerobot.datasets import dataset_writer
from lerobot.datasets.compute_stats import auto_downsample_height_width, sample_indices
from lerobot.datasets.dataset_metadata import LeRobotDatasetMetadata
from lerobot.datasets.dataset_writer import DatasetWriter
from lerobot.datasets.io_utils import write_info
from lerobot.datasets.utils import update_chunk_file_indices

from orchestrator.core.progress import ProgressBar
from orchestrator.export import frames
from orchestrator.export.names import F_ACTION, F_IMAGE, F_STATE
from orchestrator.export.plan import EpisodePlan, ExportPlan
from orchestrator.export.remux import LayoutMuxer, Segment
from orchestrator.export.video_check import crc, recorded_frames
from orchestrator.run.recording import CRF, GOP_S

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)   # LeRobot's DEFAULT_QUANTILES, as q01 ... q99


def channel_stats(images: np.ndarray) -> dict[str, np.ndarray]:
    """Per-channel statistics of uint8 images (N, C, H, W), in 0-255, as LeRobot's streaming
    encoder returns them: min, max, mean, std, count (images) and q01 ... q99. Exact, from each
    channel's 256-bin histogram (LeRobot's `RunningQuantileStats` estimates the quantiles from
    5000-bin histograms of float values: the two differ by well under one grey level); the
    quantile of a channel's sorted values v at q is v[q (n - 1)], linearly interpolated (numpy's)."""
    levels = np.arange(256, dtype=np.float64)
    out: dict[str, list[float]] = {k: [] for k in ("min", "max", "mean", "std", *(f"q{round(q * 100):02d}" for q in QUANTILES))}
    for channel in range(images.shape[1]):
        hist = np.bincount(images[:, channel].ravel(), minlength=256).astype(np.float64)
        n = hist.sum()
        cum = np.cumsum(hist)
        mean = float((hist * levels).sum() / n)
        out["min"].append(float(np.flatnonzero(hist)[0]))
        out["max"].append(float(np.flatnonzero(hist)[-1]))
        out["mean"].append(mean)
        out["std"].append(float(np.sqrt((hist * (levels - mean) ** 2).sum() / n)))
        for q in QUANTILES:
            pos = q * (n - 1)
            low, high = np.searchsorted(cum, np.floor(pos), "right"), np.searchsorted(cum, np.ceil(pos), "right")
            out[f"q{round(q * 100):02d}"].append(float(low + (high - low) * (pos - np.floor(pos))))
    stats = {k: np.asarray(v) for k, v in out.items()}
    stats["count"] = np.array([images.shape[0]])
    return stats


def frame_stats(path: Path, count: int, fps: int, decoder: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(the statistics LeRobot keeps of an episode's video frames: `channel_stats` of the frames
    `compute_episode_stats` samples (`sample_indices`), downsampled as it does
    (`auto_downsample_height_width`); the CRC-32 of every frame, channels first as LeRobot's
    decoder returns them)."""
    wanted = set(sample_indices(count))
    sampled: list[np.ndarray] = []
    crcs = np.zeros(count, dtype=np.uint32)
    for n, image in enumerate(recorded_frames(path, count, fps, decoder)):
        if n >= count:
            break
        chw = np.ascontiguousarray(image.transpose(2, 0, 1))
        crcs[n] = crc(chw)
        if n in wanted:
            sampled.append(auto_downsample_height_width(chw))
    return channel_stats(np.stack(sampled)), crcs


class RecordedVideos:
    """In LeRobot's writer, instead of its streaming encoder: the recorded videos, not encoded.
    Each episode's frame statistics are computed ahead on a thread pool (`submit`), while LeRobot
    writes the episodes before it."""

    def __init__(self, fps: int, decoder: str, pool: Any):
        self.fps = fps
        self.decoder = decoder
        self.pool = pool
        self.current: dict[str, Segment] = {}         # video key -> this episode's recording
        self.index = -1
        self.crcs: dict[tuple[int, str], np.ndarray] = {}
        self._jobs: dict[tuple[int, str], Any] = {}

    def submit(self, index: int, segments: dict[str, Segment]) -> None:
        for key, segment in segments.items():
            self._jobs[(index, key)] = self.pool.submit(frame_stats, segment.path, segment.frames, self.fps,
                                                        self.decoder)

    def next_episode(self, index: int, segments: dict[str, Segment]) -> None:
        self.index, self.current = index, segments

    def start_episode(self, video_keys: list[str], temp_dir: Path, depth_video_keys: list[str] | None = None) -> None:
        pass

    def feed_frame(self, video_key: str, image: np.ndarray) -> None:
        pass

    def finish_episode(self) -> dict[str, tuple[Path, dict | None]]:
        out = {}
        for key, segment in self.current.items():
            stats, self.crcs[(self.index, key)] = self._jobs.pop((self.index, key)).result()
            out[key] = (segment.path, stats)
        return out

    def cancel_episode(self) -> None:
        pass

    def close(self) -> None:
        for job in self._jobs.values():
            job.cancel()


class RemuxWriter(DatasetWriter):
    """LeRobot's `DatasetWriter`, joining the recorded videos instead of encoding frames."""

    def __init__(self, meta: LeRobotDatasetMetadata, videos: RecordedVideos, muxers: dict[str, LayoutMuxer]):
        super().__init__(meta=meta, root=meta.root, rgb_encoder=None, depth_encoder=None, encoder_threads=None,
                         batch_encoding_size=1, streaming_encoder=videos)
        self._videos = videos
        self._muxers = muxers

    def _save_episode_video(self, video_key: str, episode_index: int, temp_path: Path | None = None) -> dict:
        # LeRobot's own moves (and deletes) its temporary file: here the recording stays untouched
        return {"episode_index": episode_index, **self._muxers[video_key].add(self._videos.current[video_key])}

    def _save_episode_data(self, episode_buffer: dict) -> dict:
        # LeRobot's own, without `embed_images`: a row-by-row `datasets.map` that embeds image
        # files, a no-op on a table that has no image column (videos are not in the table), and
        # 40% of the demo's export time
        embed, dataset_writer.embed_images = dataset_writer.embed_images, lambda dataset: dataset
        try:
            return super()._save_episode_data(episode_buffer)
        finally:
            dataset_writer.embed_images = embed

    def flush_pending_videos(self) -> None:
        for muxer in self._muxers.values():
            muxer.close()
        super().flush_pending_videos()


def recorded_encoder(fps: int) -> RGBEncoderConfig:
    """What the recorder's encode is, for `info.json`'s `video.*` fields (the preset depends on the rig:
    `ultrafast` on a live camera, `veryfast` in simulation)."""
    return RGBEncoderConfig(vcodec="h264", pix_fmt="yuv420p", g=GOP_S * int(fps), crf=CRF, preset=None)


def _add_episode(writer: RemuxWriter, videos: RecordedVideos, plan: ExportPlan, ep: EpisodePlan,
                 segments: dict[str, Segment], blank: dict[str, np.ndarray]) -> int:
    series = frames.episode_series(plan, ep)
    rows = range(0, len(series["t"]), plan.stride)
    videos.next_episode(ep.index, segments)
    columns = frames.episode_columns(plan, ep)
    task = plan.task_of(ep.trial.policy)
    for step in rows:
        writer.add_frame({F_STATE: series["state"][step], F_ACTION: series["action"][step], "task": task,
                          **{k: v.copy() for k, v in columns.items()}, **blank})
    writer.save_episode()
    return len(rows)


def write_remuxed(plan: ExportPlan, out: Path, segments: dict[str, list[Segment]], decoder: str,
                  say: Callable[[str], None], console: Any) -> dict[tuple[int, str], np.ndarray]:
    """Write the dataset at `out`; return the recorded frames' CRC-32s for `video_check`."""
    meta = LeRobotDatasetMetadata.create(repo_id=plan.repo_id, fps=plan.fps, features=plan.features(),
                                         robot_type=plan.robot_type, root=out, use_videos=True)
    keys = {camera: F_IMAGE.format(camera=camera) for camera in plan.cameras}
    def next_file(chunk: int, file: int) -> tuple[int, int]:
        return update_chunk_file_indices(chunk, file, meta.chunks_size)

    muxers = {key: LayoutMuxer(out, key, meta.video_path, meta.video_files_size_in_mb, next_file)
              for key in keys.values()}
    pool = ThreadPoolExecutor(2)
    videos = RecordedVideos(plan.fps, decoder, pool)
    writer = RemuxWriter(meta, videos, muxers)
    # LeRobot checks each frame's image shape; the video itself comes from the recording
    blank = {key: np.zeros((*plan.camera_shapes[camera], 3), np.uint8) for camera, key in keys.items()}
    episode_segments = [{keys[c]: segments[c][ep.index] for c in plan.cameras} for ep in plan.episodes]
    progress = ProgressBar(len(plan.episodes), 0, "episode", say, console)
    try:
        for ep in plan.episodes:
            videos.submit(ep.index, episode_segments[ep.index])
        for ep in plan.episodes:
            steps = _add_episode(writer, videos, plan, ep, episode_segments[ep.index], blank)
            progress.step(f"trial {ep.trial.slot + 1}, mark {ep.trial.mark_id}, {steps} frames (stream copy)")
    finally:
        progress.close()
        videos.close()
        pool.shutdown(wait=True)
        writer.finalize()
    meta.update_video_info(video_encoder=recorded_encoder(plan.fps))
    write_info(meta.info, meta.root)
    return videos.crcs
