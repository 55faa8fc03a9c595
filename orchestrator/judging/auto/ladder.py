"""An episode's progress ladder from the recorded joints: reached, grasped, lifted, held, with the
time of each. It is recorded so that a test on partial credit can be
pre-registered later; no decision of the tool uses it yet.

Definition (per recorded control step of `episodes/<id>/timeseries.npz`, the evidence the `auto`
rater uses, `rater.trace`):
- *reached*: the grasp point (`fk.grasp_point`, where a grasped cube's centre sits) is within
  `REACH_CUBES` cube sizes of the cube's centre at its mark (the layout's mark x, y; half the cube
  size above the table): 30 mm for the shipped 30 mm cube (`sim.success.REACH_CUBES` says why);
- *grasped*: the jaws squeeze a cube-sized object (`holding.closed_on_cube`);
- *lifted*: closed on it with the cube's bottom at the success height or above (the grasp
  point's rise since the squeeze began less the seat `rater.SEAT_M`);
- *held*: that for the protocol's `hold_s` without a break (the time is when the hold is
  complete, as the physics test's `time_to_success_s`).
Each stage is the first step at or after the previous stage's time where its condition holds, so
the ladder is monotone (a stage never counts without the ones below it). Times are the recorded
step times (seconds from the episode's start).

It reads the seat's central value, not the rater's error band: `held` here can be true where
the rater's label is `unsure` (the band straddles the test). In simulation the physics test keeps
its own ladder (`sim.success.LiftHoldTracker.ladder`: contacts and the cube itself); the report
shows both.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from orchestrator.judging.auto.rater import trace
from orchestrator.sim import fk
from orchestrator.sim.success import REACH_CUBES
from orchestrator.store.episode_files import read_series
from orchestrator.store.records import STAGES

_EPS = 1e-9


def reach_distance(state: np.ndarray, mark_xy: tuple[float, float], cube_size_m: float) -> np.ndarray:
    """Per step, the grasp point's distance (m) from the cube's centre at its mark."""
    centre = np.array([mark_xy[0], mark_xy[1], cube_size_m / 2.0])
    return np.linalg.norm(fk.grasp_point(state) - centre, axis=1)


def ladder(t: np.ndarray, state: np.ndarray, cube_size_m: float, min_height_m: float, hold_s: float,
           mark_xy: tuple[float, float], action: np.ndarray | None = None) -> dict[str, float | None]:
    """The ladder of a joint trajectory (step times s, measured joints (N, 6), commanded joints
    (N, 6), rig units): stage -> the time it was first reached (s), or None (module docstring)."""
    t = np.asarray(t, dtype=float)
    state = np.asarray(state, dtype=float)
    out: dict[str, float | None] = dict.fromkeys(STAGES)
    if not len(t):
        return out
    seen = trace(t, state, cube_size_m, min_height_m, action)
    conditions = (reach_distance(state, mark_xy, cube_size_m) <= REACH_CUBES * cube_size_m + _EPS,
                  seen["closed"] > 0, seen["bottom_m"] >= min_height_m - _EPS, seen["hold_s"] >= hold_s - _EPS)
    k = 0
    for stage, holds in zip(STAGES, conditions, strict=True):
        later = np.flatnonzero(holds[k:])
        if not later.size:
            break
        k += int(later[0])
        out[stage] = round(float(t[k]), 4)
    return out


def ladder_file(series: Path, cube_size_m: float, min_height_m: float, hold_s: float,
                mark_xy: tuple[float, float]) -> dict[str, float | None]:
    """`ladder` of an episode's `timeseries.npz` (read by `episode_files.read_series`)."""
    data = read_series(series)
    return ladder(data["t"], data["state"], cube_size_m, min_height_m, hold_s, mark_xy, data.get("action"))
