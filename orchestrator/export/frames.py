"""Frames for the dataset: the recorded videos decoded (PyAV) and aligned to the control steps,
the episode's joint time series, and its per-frame evaluation columns.

The dataset runs at the protocol's control fps; a camera recorded at a lower fps contributes, at
each control step, the latest frame taken at or before that step (its recorded frame times say
when), so every step has an image and none is taken from the future."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import numpy as np

from orchestrator.core.errors import RuntimeFailure
from orchestrator.core.timeline import frame_shown_at
from orchestrator.export.names import F_FAILURE, F_MARK, F_POLICY, F_SUCCESS
from orchestrator.export.plan import EpisodePlan, ExportPlan
from orchestrator.store.episode_files import read_series


def _decoded(path: Path) -> Generator[np.ndarray]:
    """RGB frames of the first video stream, in order."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for frame in container.decode(stream):
            yield frame.to_ndarray(format="rgb24")


def frame_indices(step_t: np.ndarray, frame_t: np.ndarray | None, n_video: int | None) -> np.ndarray:
    """For each control step, the index of the camera frame to show: the latest frame taken at
    or before the step (a slower camera's frame is held until its next one). Without recorded
    frame times the frames are spread uniformly over the steps."""
    steps = len(step_t)
    if frame_t is not None and len(frame_t):
        return frame_shown_at(frame_t, np.asarray(step_t, dtype=float))
    n = n_video or steps
    return np.floor(np.arange(steps) * n / max(steps, 1)).astype(int)


def held_frames(path: Path, indices: np.ndarray, shape: tuple[int, int], where: str) -> Generator[np.ndarray]:
    """Yield one image per control step, advancing through the decoded video as `indices` asks
    (holding the last frame if the video is shorter than its recorded frame times say)."""
    frames = _decoded(path)
    current: np.ndarray | None = None
    position = -1
    try:
        for target in indices:
            while position < target:
                nxt = next(frames, None)
                if nxt is None:
                    break
                current, position = nxt, position + 1
            if current is None:
                raise RuntimeFailure(f"{where}: the video has no frame")
            if current.shape[:2] != shape:
                raise RuntimeFailure(f"{where}: frames are {current.shape[1]}x{current.shape[0]}, the "
                                     f"dataset's {shape[1]}x{shape[0]} (camera changed between episodes)")
            yield current
    finally:
        frames.close()


def episode_series(plan: ExportPlan, ep: EpisodePlan) -> dict[str, np.ndarray]:
    """The episode's time series (`episode_files.read_series`), state and action as float32."""
    return read_episode(*episode_files_of(plan, ep))


def episode_files_of(plan: ExportPlan, ep: EpisodePlan) -> tuple[Path, int]:
    """(the episode's series file, the control steps it ran: `steps_ran`)."""
    if ep.files.timeseries is None:   # the plan refuses such an episode (`plan._check_files`)
        raise RuntimeFailure(f"{plan.campaign_dir}: episode {ep.trial.episode_id} lists no time series")
    return plan.campaign_dir / ep.files.timeseries, steps_ran(ep)


def steps_ran(ep: EpisodePlan) -> int:
    """The control steps the episode ran (`timing.steps`); fewer than the planned `frames` when a
    real rig lost steps."""
    timing = ep.record.get("timing")
    ran = timing.get("steps") if isinstance(timing, dict) else None
    return int(ran if ran is not None else ep.record["frames"])


def read_episode(path: Path, steps: int) -> dict[str, np.ndarray]:
    """`episode_series` of the series file `path` of an episode that ran `steps` control steps."""
    data = read_series(path)
    for name in ("state", "action"):
        data[name] = data[name].astype(np.float32)
    if len(data["t"]) != steps:
        raise RuntimeFailure(f"{path}: {len(data['t'])} control steps recorded, the store says {steps}")
    return data


def episode_rows(path: Path, steps: int, cameras: list[str]) -> dict[str, np.ndarray]:
    """What an export by stream copy reads of one episode's series file `path` (`read_episode`):
    its times, state, action and each camera's recorded frame times (`frame_t.<camera>`, where
    recorded). Read once, on one of the export's helpers (`recorded.Recordings`)."""
    data = read_episode(path, steps)
    return {k: v for k, v in data.items() if k in ("t", "state", "action", *(f"frame_t.{c}" for c in cameras))}


def episode_columns(plan: ExportPlan, ep: EpisodePlan) -> dict[str, np.ndarray]:
    """The per-frame evaluation columns of one episode (constant over it)."""
    mode_index = {m: i for i, m in enumerate(plan.failure_modes)}
    mark_index = {m: i for i, m in enumerate(plan.marks)}
    return {
        F_POLICY: np.array([plan.policies.index(ep.trial.policy)], dtype=np.int64),
        F_MARK: np.array([mark_index.get(ep.trial.mark_id, -1)], dtype=np.int64),
        F_SUCCESS: np.array([-1 if ep.success is None else int(ep.success)], dtype=np.int64),
        F_FAILURE: np.array([mode_index.get(ep.failure_mode, -1) if ep.failure_mode else -1], dtype=np.int64),
    }
