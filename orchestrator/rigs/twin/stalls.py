"""Stalls: a servo pushing as hard as it may while its joint does not move (a hand holds it, the
arm lies on the table, the jaws squeeze the cube), as the twin's record shows them.

Definition: joint `i` is *at stall* on a physics step when its servo's torque is on, the torque
it transmits is at least `STALL_FRACTION` of its active limit (`ServoLoop.cap_nm`: the least of
Torque_Limit, the Protection_Current share, Protective_Torque while protected, the supply's
share of the stall torque) and the joint turns slower than `STALL_SPEED_DEG_S`. A *stall* is a
run of such steps; one shorter than `MIN_STALL_S` (a fast move's torque saturating as it
reverses) is not recorded. Its load is the largest torque of the run, in N m and in percent of
the servo's stall torque (`Present_Load`'s unit is 0.1 % of it).

Where it shows (`docs/twin.md`, "Stalls"): the twin's `state` answer (`stall_s`: each joint's
present stall, seconds; `stalls`: the recorded ones) and, with a wire log, one line a stall when
it ends, and one for each stall still on when the twin stops:
`{"t", "event": "stall", "joint", "servo", "s", "load_nm", "load_pct", "ongoing"}` (`t`: its
start, epoch seconds). A gripper closed on the cube is at stall by design: the scripted grasp's
squeeze; an arm joint at stall is pushing against something.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

STALL_FRACTION = 0.95
STALL_SPEED_DEG_S = 5.0
MIN_STALL_S = 0.05


@dataclass(frozen=True)
class Stall:
    """One recorded stall (`start_s`: the twin's clock, seconds since it started serving)."""

    joint: str
    servo: int
    start_s: float
    seconds: float
    load_nm: float
    load_pct: float
    ongoing: bool = False

    def line(self, epoch0: float) -> dict:
        """Its wire-log line (`t`: the start in epoch seconds, `epoch0` being the twin's clock zero)."""
        return {"t": round(epoch0 + self.start_s, 6), "event": "stall", "joint": self.joint, "servo": self.servo,
                "s": round(self.seconds, 4), "load_nm": round(self.load_nm, 3), "load_pct": round(self.load_pct, 1),
                "ongoing": self.ongoing}


class StallRecorder:
    """Per joint: the stall going on (its start and peak torque) and the finished ones."""

    def __init__(self, joints: tuple[str, ...]):
        self.joints = joints
        self.start: list[float | None] = [None] * len(joints)
        self.peak = [0.0] * len(joints)
        self.finished: list[Stall] = []
        self.fresh: list[Stall] = []       # finished since the last `take_fresh`

    @staticmethod
    def at_stall(torque_on: bool, torque_nm: float, cap_nm: float, speed_rad_s: float) -> bool:
        return (torque_on and cap_nm > 0.0 and abs(torque_nm) >= STALL_FRACTION * cap_nm
                and abs(speed_rad_s) < math.radians(STALL_SPEED_DEG_S))

    def update(self, i: int, stalled: bool, t_s: float, torque_nm: float, stall_nm: float) -> None:
        """Joint `i` on the step that ends at `t_s`: at stall or not, with this torque."""
        if stalled:
            if self.start[i] is None:
                self.start[i], self.peak[i] = t_s, 0.0
            self.peak[i] = max(self.peak[i], abs(torque_nm))
            return
        start = self.start[i]
        if start is None:
            return
        self.start[i] = None
        if t_s - start >= MIN_STALL_S:
            stall = self._stall(i, start, t_s, stall_nm, ongoing=False)
            self.finished.append(stall)
            self.fresh.append(stall)

    def _stall(self, i: int, start: float, t_s: float, stall_nm: float, ongoing: bool) -> Stall:
        return Stall(self.joints[i], i + 1, start, t_s - start, self.peak[i], 100.0 * self.peak[i] / stall_nm, ongoing)

    def seconds_now(self, t_s: float) -> list[float]:
        """Each joint's present stall, seconds (0 when it is not at stall)."""
        return [0.0 if s is None else t_s - s for s in self.start]

    def ongoing(self, t_s: float, stall_nm: float) -> list[Stall]:
        """The stalls going on at `t_s` that are already `MIN_STALL_S` long."""
        return [self._stall(i, s, t_s, stall_nm, ongoing=True) for i, s in enumerate(self.start)
                if s is not None and t_s - s >= MIN_STALL_S]

    def take_fresh(self) -> list[Stall]:
        fresh, self.fresh = self.fresh, []
        return fresh
