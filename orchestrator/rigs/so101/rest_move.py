"""The move to rest, closed-loop: every goal is the present position plus a bounded step.

An open-loop move (interpolate goals in time from the start pose, then send the rest pose until a
timer runs out) keeps sending goals however far the joint has fallen behind: a joint held back by
a hand, the cube or the table ends with its goal up to the whole move ahead, and snaps there at
full servo speed when it is freed.

`move_to_rest` instead keeps, per joint, a reference that travels toward `rest` at `speed_deg_s`
(measured time, not loop counts: a bus read takes milliseconds on a real arm and tens of them on
the twin) but never more than `MAX_LEAD_DEG` ahead of the joint: a joint that follows slowly
(gravity on a soft position loop, the servo's own acceleration ramp) holds its reference back
instead of falling ever further behind. Each period (`fps`) it reads the present positions and
commands the reference, so no goal is ever more than `MAX_LEAD_DEG` from where the joint is.

A joint is **blocked** when it is more than `FOLLOW_DEG` from its reference and has moved less
than `PROGRESS_DEG` toward it for `FOLLOW_S` (a hand, the cube or the table holds it): the move
stops, the present pose is commanded (the arm holds where it is) and `RestBlocked` names the
joints. A joint that moves, however slowly, is not blocked: slowness is the servo's, a stop is
the world's. A loop step that took longer than `UNWATCHED_S` (the host or the bus stalled: a
busy machine, a USB hiccup; the twin then answers late too) does not count toward `FOLLOW_S`:
the joint was not watched then, and its goal stayed within `MAX_LEAD_DEG` of it all the while.
When every reference has arrived, the move ends once every joint is within
`tolerance_deg` of rest, or after `settle_s` (a joint still more than `MAX_LEAD_DEG` away is
blocked). Units are LeRobot's (degrees; the gripper 0-100).

The move goes in stages (`stages`): the shoulder lifts first, then the other arm joints follow,
then the gripper. A stop late in a pick leaves the arm low and, once torque is off, sagged onto
the table; interpolating every joint at once from there drives the wrist and the closed gripper
into the table, and the joints held by it did not follow (on the twin: "blocked" for a stop two
seconds or more into a scripted pick, a different joint each time). Lifted first, nothing
touches the table on the way.

A stage that lifts the shoulder can still be held by the table: an arm that sagged folded, its
gripper on the table beside the base, is wedged there (on the twin: `shoulder_lift blocked` at
stall torque for a stop half a second into a pick, the tip's contact friction holding it), so
`route` puts first, when the arm's lowest point is within `NEAR_TABLE_M` of the table (forward
kinematics of the SO-101 model, `sim/kinematics.py`), a lift of the gripper `LIFT_M` straight up
with its orientation kept, in `LIFT_STEPS` waypoints: nothing slides on the table, every
contact opens. Then the stages.

`check()` (the operator's stop key) runs before every step and `watch()` (servo alarms and
torque, `servo_alarms.check_servos`) every `CHECK_EVERY_STEPS` steps; either raises to stop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

MAX_LEAD_DEG = 5.0        # no goal further than this from the present position
FOLLOW_DEG = 3.0          # a joint this far from its reference...
PROGRESS_DEG = 1.0        # ...that moves less than this toward it...
FOLLOW_S = 0.3            # ...for this long is blocked
MAX_DT_S = 0.1            # a stalled loop (a slow read) does not advance the reference further
UNWATCHED_S = 0.1         # a loop step longer than this (a stalled host or bus) is not watched time
CHECK_EVERY_STEPS = 5
NEAR_TABLE_M = 0.01       # the arm's lowest point this close to the table (at rest: 22 mm): lift it...
LIFT_M = 0.03             # ...off first, the gripper this far straight up...
LIFT_STEPS = 3            # ...in this many waypoints (a short joint-space move per centimetre)
LIFT_ERROR_M = 0.005      # a lift the arm cannot make this exactly (a joint limit) is left out

Pose = dict[str, float]


def _clip(x: float, bound: float) -> float:
    return max(-bound, min(bound, x))


class _Following:
    """Per joint: where it was when it last made `PROGRESS_DEG` of progress toward its reference
    (or was within `FOLLOW_DEG` of it), and when."""

    def __init__(self, here: Pose, now: float):
        self.mark = dict(here)
        self.since = dict.fromkeys(here, now)

    def unwatched(self, seconds: float) -> None:
        """A loop step that took `seconds` (more than `UNWATCHED_S`): the arm was not watched, so
        that time does not count as a joint not following."""
        for k in self.since:
            self.since[k] += seconds

    def stuck(self, reference: Pose, here: Pose, now: float) -> list[str]:
        out = []
        for k, ref in reference.items():
            error = ref - here[k]
            progress = (here[k] - self.mark[k]) * (1.0 if error >= 0 else -1.0)
            if abs(error) <= FOLLOW_DEG or progress >= PROGRESS_DEG:
                self.mark[k], self.since[k] = here[k], now
            elif now - self.since[k] >= FOLLOW_S:
                out.append(k)
        return out


ORDER = (("shoulder_lift.pos",), None, ("gripper.pos",))   # None: every joint not named


def stages(rest: Pose, here: Pose) -> list[Pose]:
    """The targets of a move to `rest` from `here`, one per group of `ORDER`: the shoulder lifts
    first, then the other arm joints follow, then the gripper; each target holds the joints of
    the later groups where they are (`here`). Groups with nothing to move are left out, so a
    move from near rest is one stage."""
    named = {k for group in ORDER if group for k in group}
    groups = [[k for k in rest if (k in group if group else k not in named)] for group in ORDER]
    groups = [g for g in groups if g]
    out, target = [], {k: here.get(k, v) for k, v in rest.items()}
    for group in groups:
        if all(abs(rest[k] - target[k]) < 1e-9 for k in group):
            continue
        target = {**target, **{k: rest[k] for k in group}}
        out.append(dict(target))
    return out or [dict(rest)]


def lift_off_table(here: Pose) -> list[Pose]:
    """The waypoints that lift the gripper `LIFT_M` straight up from `here`, when the arm's
    lowest point is within `NEAR_TABLE_M` of the table (else, or when the lift is out of reach
    or `here` lacks a joint, none)."""
    import numpy as np

    from orchestrator.sim.kinematics import arm_kinematics
    from orchestrator.sim.scene import ARM_JOINTS

    keys = [f"{joint}.pos" for joint in ARM_JOINTS]
    if any(k not in here for k in keys):
        return []
    kinematics = arm_kinematics()
    q = kinematics.units.from_rig(np.array([here[k] for k in keys], dtype=float))
    if kinematics.lowest_point_m(q) > NEAR_TABLE_M:
        return []
    out = []
    for step in range(1, LIFT_STEPS + 1):
        lifted, error = kinematics.lifted(q, LIFT_M * step / LIFT_STEPS)
        if error > LIFT_ERROR_M:
            return []
        out.append({**here, **dict(zip(keys, map(float, kinematics.units.to_rig(lifted)), strict=True))})
    return out


def route(rest: Pose, here: Pose) -> list[Pose]:
    """The targets of a move to `rest` from `here`: the lift off the table when the arm lies
    near it (`lift_off_table`), then the `stages`."""
    lift = [{k: p[k] for k in rest if k in p} for p in lift_off_table(here)]
    return lift + stages(rest, lift[-1] if lift else here)


def move_to_rest(read: Callable[[], Pose], write: Callable[[Pose], None], rest: Pose, *,
                 speed_deg_s: float, fps: int, settle_s: float, tolerance_deg: float,
                 check: Callable[[], None], watch: Callable[[], None],
                 blocked: Callable[[list[str]], BaseException]) -> None:
    """Move to `rest` (see the module docstring); raises `blocked(joints)` after holding."""
    period = 1.0 / fps
    here = read()
    keys = [k for k in rest if k in here]
    reference = {k: here[k] for k in keys}
    last = time.perf_counter()
    following = _Following({k: here[k] for k in keys}, last)
    settle_until = None
    n = 0
    while True:
        t0 = time.perf_counter()
        check()
        if n % CHECK_EVERY_STEPS == 0:   # from the first step: a move never starts on an alarm
            watch()
        step = speed_deg_s * min(t0 - last, MAX_DT_S)
        if t0 - last > UNWATCHED_S:
            following.unwatched(t0 - last)
        last = t0
        for k in keys:
            moved = reference[k] + _clip(rest[k] - reference[k], step)
            reference[k] = here[k] + _clip(moved - here[k], MAX_LEAD_DEG)
        stuck = following.stuck(reference, here, t0)
        if stuck:
            write({k: here[k] for k in keys})
            raise blocked([k.removesuffix(".pos") for k in stuck])
        write(dict(reference))
        time.sleep(max(0.0, period - (time.perf_counter() - t0)))
        here = read()
        n += 1
        if any(abs(reference[k] - rest[k]) > 1e-9 for k in keys):
            continue
        if all(abs(here[k] - rest[k]) <= tolerance_deg for k in keys):
            return
        now = time.perf_counter()
        settle_until = settle_until or now + settle_s
        if now >= settle_until:
            far = [k for k in keys if abs(here[k] - rest[k]) > MAX_LEAD_DEG]
            if far:
                write({k: here[k] for k in keys})
                raise blocked([k.removesuffix(".pos") for k in far])
            return
