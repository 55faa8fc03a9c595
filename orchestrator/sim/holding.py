"""What counts as the jaws holding the cube, read from the gripper alone: the `auto` rater's
*closed on the cube* (judging/auto/rater.py, on a recorded episode) and the autonomous reset's
test for a cube still in the hand when an episode ends (run/reset.py, on the arm now).

Definition: the gap between the jaw tips (`fk.jaw_gap` of the measured gripper position) is
between `GAP_LOW` and `GAP_HIGH` times the cube's size (closing on nothing shuts it; a gripper
left open is wider), and the commanded gripper is at least `SQUEEZE_PCT` rig units more closed
than the measured one (the servo pushes against something; a gripper that merely stopped at the
cube's width without touching it reaches its command). Without a command the squeeze is not
tested.
"""

from __future__ import annotations

import numpy as np

from orchestrator.sim import fk

GAP_LOW = 0.6    # x cube size: below this the jaws have (nearly) shut past where a cube would be
GAP_HIGH = 1.15  # x cube size: above this the gripper is open wider than the cube
SQUEEZE_PCT = 2.0   # commanded this much (rig units) more closed than measured: squeezing


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
