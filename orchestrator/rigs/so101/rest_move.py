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
the world's. After a loop step that took longer than `UNWATCHED_S` (the host or the bus stalled:
a busy machine, a USB hiccup; the twin then answers late too) the decision waits for one more
read; the stall's time still counts toward `FOLLOW_S` (a joint pushing against a hand pushes
whether or not the host was watching), and its goal stayed within `MAX_LEAD_DEG` of it.
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

The loop itself is the one guarded motion (`rigs/guarded_motion.py`, `RestAim`): `check()` (the
operator's stop key) runs before every step and `watch()` (servo alarms and torque,
`servo_alarms.check_servos`) every `CHECK_EVERY_STEPS` steps; either raises to stop.
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.rigs.guarded_motion import (  # noqa: F401 - the move's rules, named where they are described
    CHECK_EVERY_STEPS,
    FOLLOW_DEG,
    FOLLOW_S,
    MAX_DT_S,
    MAX_LEAD_DEG,
    PROGRESS_DEG,
    UNWATCHED_S,
    Clock,
    RestAim,
    guarded_loop,
)

NEAR_TABLE_M = 0.01       # the arm's lowest point this close to the table (at rest: 22 mm): lift it...
LIFT_M = 0.03             # ...off first, the gripper this far straight up...
LIFT_STEPS = 3            # ...in this many waypoints (a short joint-space move per centimetre)
LIFT_ERROR_M = 0.005      # a lift the arm cannot make this exactly (a joint limit) is left out

Pose = dict[str, float]

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


def move_to_rest(read: Callable[[], Pose], write: Callable[[Pose], object], rest: Pose, *,
                 speed_deg_s: float, fps: int, settle_s: float, tolerance_deg: float,
                 check: Callable[[], None], watch: Callable[[], None],
                 blocked: Callable[[list[str]], BaseException], clock: Clock | None = None) -> None:
    """Move to `rest` (see the module docstring); raises `blocked(joints)` after holding."""
    guarded_loop(read, write, RestAim(rest, speed_deg_s), fps=fps, settle_s=settle_s, tolerance_deg=tolerance_deg,
                 check=check, watch=watch, blocked=blocked, clock=clock)
