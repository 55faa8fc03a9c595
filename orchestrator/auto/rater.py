"""The `auto` rater: the protocol's lift-and-hold test applied to the recorded joints.

Definition (for every recorded control step, from `episodes/<id>/timeseries.npz`):
- *closed on the cube*: the gap between the jaw tips (`fk.jaw_gap` of the measured gripper
  position) is between `GAP_LOW` and `GAP_HIGH` times the cube's size: the gripper closed on
  something the size of the cube and is not fully shut (closing on nothing shuts it);
- *high enough*: the grasp point (`fk.grasp_point`, where a grasped cube's centre sits) is at
  least `min_height_m` + half the cube's size above the table, so the cube's bottom is at
  least `min_height_m` up;
- success when both hold together, without a break, for at least `hold_s` (the protocol's
  `success` block), measured on the recorded step times.

It sees what a judge cannot (the gripper's opening), and not what the physics test sees (jaw
contacts): a cube squeezed at an edge and about to slip, or an object of the cube's size
that is not the cube, reads as held. It is a second opinion: its agreement with physics (in
simulation) and with the judges is measured in the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import fk

GAP_LOW = 0.6    # x cube size: below this the jaws have (nearly) shut past where a cube would be
GAP_HIGH = 1.15  # x cube size: above this the gripper is open wider than the cube
_EPS = 1e-9


@dataclass(frozen=True)
class AutoVerdict:
    success: bool
    longest_hold_s: float        # longest time closed on a cube-sized object and high enough
    max_bottom_m: float          # highest cube-bottom height while closed on it (0 if never)
    arm_moved: bool              # False: the arm stayed where it started (see `arm_moved`)
    reason: str                  # one line: why (for notes and the report)


def arm_moved(state: np.ndarray, tolerance_deg: float = 2.0) -> bool:
    """Whether any joint left its starting position by more than `tolerance_deg` (the gripper
    by more than that many rig units)."""
    state = np.asarray(state, dtype=float)
    if len(state) == 0:
        return False
    return bool(np.nanmax(np.abs(state - state[0])) > tolerance_deg)


def rate(t: np.ndarray, state: np.ndarray, cube_size_m: float, min_height_m: float,
         hold_s: float) -> AutoVerdict:
    """Apply the lift-and-hold test to a joint trajectory (times s, state (N, 6) rig units)."""
    t = np.asarray(t, dtype=float)
    state = np.asarray(state, dtype=float)
    if len(t) == 0:
        return AutoVerdict(False, 0.0, 0.0, False, "no recorded steps")
    gap = fk.jaw_gap(state[:, 5])
    closed = (gap >= GAP_LOW * cube_size_m) & (gap <= GAP_HIGH * cube_size_m)
    bottom = fk.grasp_point(state)[:, 2] - cube_size_m / 2.0
    high = bottom >= min_height_m - _EPS
    holding = closed & high
    longest, start = 0.0, None
    for k in range(len(t)):
        if holding[k]:
            start = t[k] if start is None else start
            longest = max(longest, t[k] - start)
        else:
            start = None
    max_bottom = float(max(0.0, bottom[closed].max())) if closed.any() else 0.0
    moved = arm_moved(state)
    success = longest >= hold_s - _EPS
    if success:
        reason = f"held {longest:.2f} s with the cube bottom >= {min_height_m * 100:g} cm"
    elif not moved:
        reason = "the arm never moved"
    elif not closed.any():
        reason = "the gripper never closed on a cube-sized object"
    elif max_bottom < min_height_m:
        reason = f"closed on it, lifted to {max_bottom * 100:.1f} cm only"
    else:
        reason = f"held high enough for {longest:.2f} s only"
    return AutoVerdict(success, float(longest), max_bottom, moved, reason)


def rate_file(series: Path, cube_size_m: float, min_height_m: float, hold_s: float) -> AutoVerdict:
    """`rate` on an episode's `timeseries.npz` (written by `recording.EpisodeRecorder`)."""
    with np.load(series) as data:
        return rate(data["t"], data["state"], cube_size_m, min_height_m, hold_s)
