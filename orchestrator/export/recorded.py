"""The recorded episode videos as an export by stream copy reads them: every frame decoded once
(PyAV), for the statistics LeRobot keeps of an episode's video frames, and `RecordedVideos`,
which hands them to LeRobot's writer in place of its streaming encoder.

Nothing here imports LeRobot or torch (PyAV and numpy only): the decoding starts on a thread pool
while the main thread imports LeRobot, which takes seconds (docs/benchmarks.md, Export). The
statistics are of the frames as PyAV's `to_ndarray(rgb24)` gives them, which is what LeRobot's
PyAV decoder returns (and what LeRobot's own writer computes its statistics on: the frames before
they are encoded, here the recorded ones decoded). The two pieces of LeRobot's statistics this
needs are restated here, `sample_indices` and `downsampled` (LeRobot's
`compute_stats.sample_indices` and `auto_downsample_height_width`); tests/test_export_remux.py
compares them with LeRobot's own. Whether the dataset gives back the recorded frames is
`video_check.check_joined`'s: the same packets, byte for byte, at each row's time."""

from __future__ import annotations

from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

import numpy as np

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)   # LeRobot's DEFAULT_QUANTILES, as q01 ... q99


def sample_indices(count: int) -> list[int]:
    """The frames of a `count`-frame episode whose statistics LeRobot keeps (its
    `compute_stats.sample_indices`): `estimate_num_samples` of them (all up to 100; then
    `count ** 0.75`, at most 10,000), evenly spaced from the first to the last, rounded."""
    wanted = count if count < 100 else max(100, min(int(count ** 0.75), 10_000))
    return np.round(np.linspace(0, count - 1, wanted)).astype(int).tolist()


def downsampled(image: np.ndarray, target: int = 150, threshold: int = 300) -> np.ndarray:
    """A channels-first image as LeRobot samples it for statistics (its
    `auto_downsample_height_width`): every k-th row and column, k = the longer side // `target`,
    when the longer side is at least `threshold`; else the image itself."""
    _, height, width = image.shape
    if max(width, height) < threshold:
        return image
    factor = int(width / target) if width > height else int(height / target)
    return image[:, ::factor, ::factor]


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


def frame_stats(path: Path, count: int) -> dict[str, np.ndarray]:
    """The statistics LeRobot keeps of an episode's video frames: `channel_stats` of the frames
    `compute_episode_stats` samples (`sample_indices`) of the first `count`, channels first and
    downsampled as it does (`downsampled`). Every frame is decoded (each needs the one before
    it); only the sampled ones are converted to RGB."""
    import av

    wanted = set(sample_indices(count))
    sampled: list[np.ndarray] = []
    with av.open(str(path)) as container:
        for n, frame in enumerate(container.decode(container.streams.video[0])):
            if n >= count:
                break
            if n in wanted:
                sampled.append(downsampled(frame.to_ndarray(format="rgb24").transpose(2, 0, 1)))
    return channel_stats(np.stack(sampled))


class RecordedVideos:
    """In LeRobot's writer, instead of its streaming encoder (`StreamingVideoEncoder`'s methods):
    the recorded videos, not encoded. Each episode's frame statistics are computed ahead on a
    thread pool (`submit`, which may run before LeRobot is imported), while LeRobot writes the
    episodes before it."""

    def __init__(self, pool: Executor):
        self.pool = pool
        self.current: dict[str, Any] = {}          # video key -> this episode's `remux.Segment`
        self.index = -1
        self._jobs: dict[tuple[int, str], Future] = {}

    def submit(self, index: int, segments: dict[str, Any]) -> None:
        for key, segment in segments.items():
            self._jobs[(index, key)] = self.pool.submit(frame_stats, segment.path, segment.frames)

    def next_episode(self, index: int, segments: dict[str, Any]) -> None:
        self.index, self.current = index, segments

    def start_episode(self, video_keys: list[str], temp_dir: Path, depth_video_keys: list[str] | None = None) -> None:
        pass

    def feed_frame(self, video_key: str, image: np.ndarray) -> None:
        pass

    def finish_episode(self) -> dict[str, tuple[Path, dict | None]]:
        out = {}
        for key, segment in self.current.items():
            out[key] = (segment.path, self._jobs.pop((self.index, key)).result())
        return out

    def cancel_episode(self) -> None:
        pass

    def close(self) -> None:
        for job in self._jobs.values():
            job.cancel()
