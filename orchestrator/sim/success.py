"""The physical success test of a pick-and-lift episode (simulation), fed step by step.

Definition (protocol `success: {kind: lift_and_hold, min_height_m, hold_s}`, docs/design.md section 1):
the episode succeeds when the cube's bottom is at least `min_height_m` above the table while
both jaws touch the cube, continuously, for at least `hold_s` of simulation time.

Pure Python (no mujoco) so it is tested on scripted trajectories. The simulated rig feeds it
once per physics step; a hold is measured from the first sample where all three conditions
hold to the current sample, so with a physics step of `dt` the measured hold is exact to `dt`.

It also keeps the episode's progress ladder as physics sees it (the joints'
ladder is `judging/auto/ladder.py`), each stage the first time its condition holds at or after
the previous stage's time: *reached*, the grasp point (`grasp` site) within `REACH_CUBES` cube
sizes of the cube's centre; *grasped*, both jaws touch the cube; *lifted*, both touch it with its
bottom at the success height; *held*, the success test's hold complete (`time_to_success_s`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

_EPS = 1e-9
# "Reached": the grasp point (where a grasped cube's centre sits) within this many cube sizes of
# the cube's centre, i.e. 30 mm for the shipped 30 mm cube: the open jaws (wider than
# `holding.GAP_HIGH` x the cube) can then close on it, and the placement's own error on the mark
# (the start check's default tolerance, 5 mm) stays well inside it. Measured on the demo campaign
# (protocols/sim_demo.yaml, 40 episodes): when a squeeze began the grasp point was 17.6 mm (median)
# and at most 28 mm from the cube's centre at its mark (37 squeezes; docs/judging.md).
REACH_CUBES = 1.0


@dataclass
class LiftHoldTracker:
    """Incremental lift-and-hold test.

    `update(t, bottom_height_m, fixed_jaw, moving_jaw)`: sim time (s), the lowest point of the
    cube above the table (m), and whether each jaw touches the cube at that time.

    `success` latches once a hold reaches `hold_s`; `time_to_success_s` is the sim time at
    which the hold was complete (not when it began). `max_lift_m` is the highest cube-bottom
    height seen (whether or not it was held), never below 0.
    """

    min_height_m: float            # the protocol's `success` (design.protocol.Success: its defaults)
    hold_s: float
    cube_size_m: float = 0.03      # the layout's cube (the reach distance is REACH_CUBES of it)

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.success = False
        self.time_to_success_s: float | None = None
        self.max_lift_m = 0.0
        self.longest_hold_s = 0.0
        self._hold_start: float | None = None
        self.reached_s: float | None = None    # the progress ladder (module docstring)
        self.grasped_s: float | None = None
        self.lifted_s: float | None = None

    def update(self, t: float, bottom_height_m: float, fixed_jaw: bool, moving_jaw: bool,
               grasp_xyz=None, cube_xyz=None) -> bool:
        """Feed one sample (with the grasp point's and the cube centre's positions, m, for the
        ladder's *reached*); return whether the episode has succeeded so far."""
        if bottom_height_m > self.max_lift_m:
            self.max_lift_m = float(bottom_height_m)
        if self.reached_s is None and grasp_xyz is not None and cube_xyz is not None \
                and math.dist(grasp_xyz, cube_xyz) <= REACH_CUBES * self.cube_size_m + _EPS:
            self.reached_s = float(t)
        holding = bottom_height_m >= self.min_height_m - _EPS and fixed_jaw and moving_jaw
        if self.reached_s is not None and self.grasped_s is None and fixed_jaw and moving_jaw:
            self.grasped_s = float(t)
        if self.grasped_s is not None and self.lifted_s is None and holding:
            self.lifted_s = float(t)
        if not holding:
            self._hold_start = None
            return self.success
        if self._hold_start is None:
            self._hold_start = t
        held = t - self._hold_start
        self.longest_hold_s = max(self.longest_hold_s, held)
        if not self.success and held >= self.hold_s - _EPS:
            self.success = True
            self.time_to_success_s = float(t)
        return self.success

    def ladder(self) -> dict[str, float | None]:
        """The progress ladder: stage -> the simulation time it was first reached (s), or None
        (`held` needs the earlier stages: a hold that began before *reached* is not one)."""
        held = self.time_to_success_s if self.lifted_s is not None else None
        return {"reached": self.reached_s, "grasped": self.grasped_s, "lifted": self.lifted_s, "held": held}
