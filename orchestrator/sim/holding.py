"""What counts as the jaws holding the cube, read from the gripper alone: the `auto` rater's
*closed on the cube* (judging/auto/rater.py, on a recorded episode) and the autonomous reset's
test for a cube still in the hand when an episode ends (run/reset.py, on the arm now).

Definition: the gap between the jaw tips (`fk.jaw_gap` of the measured gripper position) is
between `GAP_LOW` and `GAP_HIGH` times the cube's size (closing on nothing shuts it; a gripper
left open is wider), and the commanded gripper is at least `SQUEEZE_PCT` rig units more closed
than the measured one (the servo pushes against something; a gripper that merely stopped at the
cube's width without touching it reaches its command). Without a command the squeeze is not
tested.

A squeeze's hold lasts to the step after its last one when that step's reading still shows the
jaws where they squeezed (`squeezed_when_read`): the control loop observes, then acts, so that
reading was taken while the squeeze's last command was still in force, before the command that
ended it (to open the jaws, or to loosen them). No later step is credited: from then on the jaws
may stand still without squeezing (a loosened command) while the cube slides out.
"""

from __future__ import annotations

import numpy as np

from orchestrator.sim import fk

GAP_LOW = 0.6    # x cube size: below this the jaws have (nearly) shut past where a cube would be
GAP_HIGH = 1.15  # x cube size: above this the gripper is open wider than the cube
SQUEEZE_PCT = 2.0   # commanded this much (rig units) more closed than measured: squeezing
# The jaws have not moved while the measured gripper stays within this many rig units of its reading
# at the squeeze's last step. Measured on the calibration campaign (80 episodes of protocols/sim_near.yaml,
# seed 77120401; `bench/rater_truth.py --calibrate`, docs/benchmarks.md "the automatic rater"): on all
# 39 squeezes that ended before the episode, the reading at the step that commanded the jaws open was
# within 3e-7 of it, and the next reading had opened by 2.94 or more. A reading's noise beyond it only
# leaves the step uncredited (it never lengthens a hold).
STILL_PCT = 0.1


def cube_sized_gap(measured_pct: np.ndarray, cube_size_m: float) -> np.ndarray:
    """Per sample, True where the gap between the jaw tips could hold the cube (the first half
    of the definition: neither shut past it nor open wider than it)."""
    measured = np.asarray(measured_pct, dtype=float)
    gap = fk.jaw_gap(measured) if measured.size else np.zeros(measured.shape)
    return (gap >= GAP_LOW * cube_size_m) & (gap <= GAP_HIGH * cube_size_m)


def closed_on_cube(measured_pct: np.ndarray, cube_size_m: float, commanded_pct: np.ndarray | None = None) -> np.ndarray:
    """Per sample, True where the jaws squeeze a cube-sized object (the module's definition);
    gripper positions in rig units (0-100)."""
    measured = np.asarray(measured_pct, dtype=float)
    closed = cube_sized_gap(measured, cube_size_m)
    if commanded_pct is not None and measured.size:
        closed &= np.asarray(commanded_pct, dtype=float) < measured - SQUEEZE_PCT
    return closed


def squeezed_when_read(closed: np.ndarray, measured_pct: np.ndarray) -> np.ndarray:
    """`closed` (per step, the jaws squeeze the cube: `closed_on_cube`) and, after each squeeze, the
    one step that follows its last when its measured gripper is within `STILL_PCT` of the reading
    at that last step: read while the squeeze's last command was in force, the jaws unmoved (the
    module docstring); rig units."""
    closed = np.asarray(closed, dtype=bool)
    measured = np.asarray(measured_pct, dtype=float)
    held = closed.copy()
    ended = np.flatnonzero(closed[:-1] & ~closed[1:]) if len(closed) else np.zeros(0, int)
    held[ended + 1] = np.abs(measured[ended + 1] - measured[ended]) <= STILL_PCT
    return held
