"""The recorded episode videos as an export by stream copy reads them: every frame decoded once
(PyAV), for the statistics LeRobot keeps of an episode's video frames, and `RecordedVideos`,
which hands them to LeRobot's writer in place of its streaming encoder.

Nothing here imports LeRobot or torch (PyAV and numpy only): the recordings are read on the
export's helpers (`Recordings`, `workers`) while the main thread imports LeRobot, which takes
seconds (docs/benchmarks.md, Export). The
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


def histogram_stats(hist: np.ndarray, images: int) -> dict[str, np.ndarray]:
    """Per-channel statistics from each channel's 256-bin histogram `hist` (C, 256) of `images`
    uint8 images, in 0-255, as LeRobot's streaming encoder returns them: min, max, mean, std,
    count (images) and q01 ... q99. Exact (LeRobot's `RunningQuantileStats` estimates the
    quantiles from 5000-bin histograms of float values: the two differ by well under one grey
    level); the quantile of a channel's sorted values v at q is v[q (n - 1)], linearly
    interpolated (numpy's)."""
    levels = np.arange(256, dtype=np.float64)
    out: dict[str, list[float]] = {k: [] for k in ("min", "max", "mean", "std", *(f"q{round(q * 100):02d}" for q in QUANTILES))}
    for counts in hist:
        counts = counts.astype(np.float64)
        n = counts.sum()
        cum = np.cumsum(counts)
        mean = float((counts * levels).sum() / n)
        out["min"].append(float(np.flatnonzero(counts)[0]))
        out["max"].append(float(np.flatnonzero(counts)[-1]))
        out["mean"].append(mean)
        out["std"].append(float(np.sqrt((counts * (levels - mean) ** 2).sum() / n)))
        for q in QUANTILES:
            pos = q * (n - 1)
            low, high = np.searchsorted(cum, np.floor(pos), "right"), np.searchsorted(cum, np.ceil(pos), "right")
            out[f"q{round(q * 100):02d}"].append(float(low + (high - low) * (pos - np.floor(pos))))
    stats = {k: np.asarray(v) for k, v in out.items()}
    stats["count"] = np.array([images])
    return stats


def frame_count(path: Path) -> int:
    """The frames of `path`'s video stream: its packets with a decoding time (`remux.probe`'s count)."""
    import av

    with av.open(str(path)) as container:
        count = sum(1 for packet in container.demux(container.streams.video[0]) if packet.dts is not None)
    return count


def frame_stats(path: Path, count: int | None = None) -> dict[str, np.ndarray]:
    """The statistics LeRobot keeps of an episode's video frames: `histogram_stats` of the frames
    `compute_episode_stats` samples (`sample_indices`) of the first `count` (default: every
    frame, `frame_count`), channels first and downsampled as it does (`downsampled`). Every
    frame is decoded (each needs the one before it); only the sampled ones are converted to RGB,
    and each one's channel histograms added up as it comes (the counts of the sampled frames
    stacked, without stacking them: about 10 ms a video less, docs/benchmarks.md, Export)."""
    import av

    count = frame_count(path) if count is None else count
    wanted = set(sample_indices(count))
    hist: np.ndarray | None = None
    sampled = 0
    with av.open(str(path)) as container:
        for n, frame in enumerate(container.decode(container.streams.video[0])):
            if n >= count:
                break
            if n in wanted:
                image = downsampled(frame.to_ndarray(format="rgb24").transpose(2, 0, 1))
                counts = np.stack([np.bincount(channel.ravel(), minlength=256) for channel in image])
                hist = counts if hist is None else hist + counts
                sampled += 1
    if hist is None:
        raise ValueError(f"{path}: no frame decoded")
    return histogram_stats(hist, sampled)


class Recordings:
    """Every recording of an export read on the helpers (`workers.helpers`), in the plan's episode
    order: first each one's packets (`remux.probe`: whether it can be joined), then each episode's
    series (`frames.episode_rows`: the rows' times, state and action, read once), then each
    recording decoded for its frame statistics (`frame_stats`), while the main thread imports
    LeRobot and then writes the episodes before it. Results by the recording's path, series by
    the episode."""

    def __init__(self, pool: Executor, plan: Any):
        from orchestrator.export.frames import episode_files_of, episode_rows
        from orchestrator.export.remux import probe

        self.pool = pool
        paths = [plan.campaign_dir / ep.files.videos[camera] for ep in plan.episodes for camera in plan.cameras]
        self._probes: dict[Path, Future] = {path: pool.submit(probe, path, plan.fps) for path in paths}
        self._rows: dict[int, Future] = {ep.index: pool.submit(episode_rows, *episode_files_of(plan, ep), plan.cameras)
                                         for ep in plan.episodes}
        self._stats: dict[Path, Future] = {path: pool.submit(frame_stats, path) for path in paths}

    def segment(self, path: Path) -> Any:
        """The recording's `remux.Segment`."""
        return self._probes[path].result()

    def rows(self, ep: Any) -> dict[str, np.ndarray]:
        """The episode's series as the export reads it (`frames.episode_rows`)."""
        return self._rows[ep.index].result()

    def stats(self, path: Path) -> dict[str, np.ndarray]:
        """The recording's `frame_stats`."""
        return self._stats[path].result()

    def close(self) -> None:
        """Drop the jobs not started (the helpers finish the ones they run)."""
        for job in (*self._probes.values(), *self._rows.values(), *self._stats.values()):
            job.cancel()


class RecordedVideos:
    """In LeRobot's writer, instead of its streaming encoder (`StreamingVideoEncoder`'s methods):
    the recorded videos, not encoded, each episode's with its frame statistics (`Recordings`,
    computed ahead while LeRobot writes the episodes before it)."""

    def __init__(self, recordings: Recordings):
        self.recordings = recordings
        self.current: dict[str, Any] = {}          # video key -> this episode's `remux.Segment`
        self.index = -1

    def next_episode(self, index: int, segments: dict[str, Any]) -> None:
        self.index, self.current = index, segments

    def start_episode(self, video_keys: list[str], temp_dir: Path, depth_video_keys: list[str] | None = None) -> None:
        pass

    def feed_frame(self, video_key: str, image: np.ndarray) -> None:
        pass

    def finish_episode(self) -> dict[str, tuple[Path, dict | None]]:
        return {key: (segment.path, self.recordings.stats(segment.path)) for key, segment in self.current.items()}

    def cancel_episode(self) -> None:
        pass

    def close(self) -> None:
        pass
