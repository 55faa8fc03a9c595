"""The physical success test of a pick-and-lift episode (simulation), fed step by step.

Definition (protocol `success: {kind: lift_and_hold, min_height_m, hold_s}`, docs/design.md section 1):
the episode succeeds when the cube's bottom is at least `min_height_m` above the table while
both jaws touch the cube, continuously, for at least `hold_s` of simulation time.

Pure Python (no mujoco) so it is tested on scripted trajectories. The simulated rig feeds it
once per physics step; a hold is measured from the first sample where all three conditions
hold to the current sample, so with a physics step of `dt` the measured hold is exact to `dt`.
"""

from __future__ import annotations

from dataclasses import dataclass

_EPS = 1e-9


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

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.success = False
        self.time_to_success_s: float | None = None
        self.max_lift_m = 0.0
        self.longest_hold_s = 0.0
        self._hold_start: float | None = None

    def update(self, t: float, bottom_height_m: float, fixed_jaw: bool, moving_jaw: bool) -> bool:
        """Feed one sample; return whether the episode has succeeded so far."""
        if bottom_height_m > self.max_lift_m:
            self.max_lift_m = float(bottom_height_m)
        holding = bottom_height_m >= self.min_height_m - _EPS and fixed_jaw and moving_jaw
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
