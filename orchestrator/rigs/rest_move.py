"""The move to rest, closed-loop: every goal is the present position plus a bounded step.

An open-loop move (interpolate goals in time from the start pose, then send the rest pose until a
timer runs out) keeps sending goals however far the joint has fallen behind: a joint held back by
a hand, the cube or the table ends with its goal up to the whole move ahead, and snaps there at
full servo speed when it is freed.

`move_to_rest` instead keeps a reference that travels from the start pose to `rest` at
`speed_deg_s`, and each period (`fps`) reads the present positions and commands

    goal = present + clip(reference - present, -MAX_LEAD_DEG, +MAX_LEAD_DEG)

so no goal is ever more than `MAX_LEAD_DEG` from where the joint is. The following error
`|reference - present|` of each joint is watched: above `FOLLOW_DEG` for `FOLLOW_S` (the joint
does not follow: blocked) the move stops, the present pose is commanded (the arm holds where it
is) and `RestBlocked` names the joints. When the reference has arrived, the move ends once every
joint is within `tolerance_deg` of rest, or after `settle_s` (a joint still more than
`FOLLOW_DEG` away is blocked). Units are LeRobot's (degrees; the gripper 0-100).

`check()` (the operator's stop key) runs before every step and `watch()` (servo alarms and
torque, `servo_alarms.check_servos`) every `CHECK_EVERY_STEPS` steps; either raises to stop.
"""

from __future__ import annotations

import time
from typing import Callable

FOLLOW_DEG = 5.0          # following error that counts as "not following"...
FOLLOW_S = 0.3            # ...for this long
MAX_LEAD_DEG = 5.0        # no goal further than this from the present position
CHECK_EVERY_STEPS = 5

Pose = dict[str, float]


def _clip(x: float, bound: float) -> float:
    return max(-bound, min(bound, x))


def move_to_rest(read: Callable[[], Pose], write: Callable[[Pose], None], rest: Pose, *,
                 speed_deg_s: float, fps: int, settle_s: float, tolerance_deg: float,
                 check: Callable[[], None], watch: Callable[[], None],
                 blocked: Callable[[list[str]], BaseException]) -> None:
    """Move to `rest` (see the module docstring); raises `blocked(joints)` after holding."""
    period = 1.0 / fps
    # the reference may not run away from a joint that follows at MAX_LEAD_DEG a period
    step = min(speed_deg_s * period, MAX_LEAD_DEG / 2)
    here = read()
    keys = [k for k in rest if k in here]
    reference = {k: here[k] for k in keys}
    lagging = {k: 0.0 for k in keys}
    settle_until = None
    n = 0
    while True:
        t0 = time.perf_counter()
        check()
        if n % CHECK_EVERY_STEPS == 0:   # from the first step: a move never starts on an alarm
            watch()
        for k in keys:
            reference[k] += _clip(rest[k] - reference[k], step)
            error = abs(reference[k] - here[k])
            lagging[k] = lagging[k] + period if error > FOLLOW_DEG else 0.0
        stuck = [k for k in keys if lagging[k] >= FOLLOW_S]
        if stuck:
            write({k: here[k] for k in keys})
            raise blocked([k.removesuffix(".pos") for k in stuck])
        write({k: here[k] + _clip(reference[k] - here[k], MAX_LEAD_DEG) for k in keys})
        time.sleep(max(0.0, period - (time.perf_counter() - t0)))
        here = read()
        n += 1
        if any(reference[k] != rest[k] for k in keys):
            continue
        if all(abs(here[k] - rest[k]) <= tolerance_deg for k in keys):
            return
        now = time.perf_counter()
        settle_until = settle_until or now + settle_s
        if now >= settle_until:
            far = [k for k in keys if abs(here[k] - rest[k]) > FOLLOW_DEG]
            if far:
                write({k: here[k] for k in keys})
                raise blocked([k.removesuffix(".pos") for k in far])
            return
