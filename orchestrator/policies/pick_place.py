"""A scripted pick and place in joint space: the arm moves the cube from where the camera found
it to a mark (the autonomous reset between trials, `run/reset.py`).

The key poses come from the scripted pick's inverse kinematics (`scripted.plan_pick`: above the
cube with the gripper open, straight down, the grasp, straight up by `LIFT_M`), solved at the
cube and again at the mark (moved by the cube's shift in the closing jaws, `place_aim`). The path: to above the cube, gripper opening; (on a session's
first pick, `hover_s`: a stay above the cube, where a calibration error shows as jaws beside the
cube before they descend, and the stop key can stop them); down; close; up;
across at the lifted height to above the mark; down; open; up, clear of the cube. The jaws close
across the pair of faces nearest the arm's plane at each end (`plan_pick`), so the cube lands
turned to the mark's yaw modulo its 90-degree symmetry. Joint targets in rig units (degrees,
gripper 0-100), one per control step at `fps`, each phase eased in and out (`smoothstep`).
"""

from __future__ import annotations

import math

import numpy as np

from orchestrator.policies.scripted import CLOSED_PCT, LIFT_M, along_path, opening_for, plan_pick, smoothstep
from orchestrator.sim.kinematics import arm_kinematics

# The jaws open this much wider than the cube on each side: the camera knows where the cube is
# to about a millimetre, so less than the scripted pick's ~12 mm, and the moving jaw pushes the
# cube that much less across the table as it closes.
CLEARANCE_M = 0.005
# The cube is let go this high above the table: held a little lower in the hand than it was
# picked, put down at the grasp height it is pressed into the table and springs off as the jaws open.
RELEASE_ABOVE_M = 0.003
# Phase lengths, seconds (a step at 30 Hz is 33 ms: at most about 1.5 degrees a step on any joint)
TO_ABOVE_S, DOWN_S, CLOSE_S, UP_S, ACROSS_S, OPEN_S, SETTLE_S = 1.5, 1.0, 0.8, 1.0, 2.0, 0.6, 0.5
# A session's first pick stays this long above the cube before it descends (`run/reset.py`): on a
# real arm a few degrees of calibration error at the shoulder put the jaws a centimetre beside the
# cube, which the operator sees there, before the descent would press a jaw onto it.
HOVER_S = 1.0
# A cube still in the jaws after an episode is lifted straight up in this many IK waypoints,
# each solved to within this error (m), before it is carried across.
LIFT_STEPS, LIFT_ERROR_M = 3, 0.003


def _ramp(a: np.ndarray, b: np.ndarray, seconds: float, fps: int) -> np.ndarray:
    """From joint vector `a` to `b`, eased, one row per step (excluding `a`)."""
    n = max(1, round(seconds * fps))
    u = smoothstep(np.arange(1, n + 1) / n)[:, None]
    return a + (b - a) * u


def _follow(path: np.ndarray, gripper: float, seconds: float, fps: int, until: float = 1.0) -> np.ndarray:
    """Along a polyline of arm poses (5 joints) to the fraction `until` of it, eased, the gripper
    held at `gripper`."""
    n = max(1, round(seconds * fps))
    arm = along_path(path[:, :5], until * smoothstep(np.arange(1, n + 1) / n))
    return np.column_stack([arm, np.full(n, gripper)])


def in_hand_offset_m(cube_size_m: float) -> float:
    """How far the cube's centre is from the middle of the open jaws once they close on it: the
    moving jaw pushes it onto the fixed one, so (gap - size) / 2 toward the fixed jaw (the
    gripper's -x; `ArmKinematics.jaw_opening` measures the open gap between the inner faces)."""
    kin = arm_kinematics()
    pct, _ = opening_for(cube_size_m, CLEARANCE_M)
    _, gap = kin.jaw_opening_pct(pct)
    return (gap - cube_size_m) / 2.0


def place_aim(mark_xy_yaw: tuple[float, float, float], cube_size_m: float) -> tuple[float, float]:
    """Where to aim the place's plan so that the cube the jaws hold against the fixed jaw lands
    on the mark: the mark moved by `in_hand_offset_m` along the jaw axis, away from the fixed
    jaw, and back by where a tilted plan puts the opening's middle (`PickPlan.centre_xy_m`;
    the axis and the tilt as the place's plan at the mark chooses them)."""
    x, y, yaw = mark_xy_yaw
    plan = plan_pick(x, y, cube_size_m, yaw, clearance_m=CLEARANCE_M)
    jaw = math.radians(plan.jaw_yaw_deg)
    off = in_hand_offset_m(cube_size_m)
    return (x + off * math.cos(jaw) - plan.centre_xy_m[0], y + off * math.sin(jaw) - plan.centre_xy_m[1])


def pick_and_place_path(start: np.ndarray, cube_xy_yaw: tuple[float, float, float],
                        mark_xy_yaw: tuple[float, float, float], cube_size_m: float, fps: int,
                        correction_m: tuple[float, float] = (0.0, 0.0), hover_s: float = 0.0) -> np.ndarray:
    """(N, 6) joint targets from `start` (the 6 joints now) that pick the cube at
    (x, y, yaw degrees) and leave it at the mark's (x, y, yaw); see the module docstring.
    `correction_m` is added to where the cube is put down (the reset's next try: minus the
    offset the camera measured after the last one); `hover_s`: seconds held above the cube,
    the jaws open, before the descent."""
    pick = plan_pick(cube_xy_yaw[0], cube_xy_yaw[1], cube_size_m, cube_xy_yaw[2], clearance_m=CLEARANCE_M)
    ax, ay = place_aim(mark_xy_yaw, cube_size_m)
    place = plan_pick(ax + correction_m[0], ay + correction_m[1], cube_size_m, mark_xy_yaw[2], clearance_m=CLEARANCE_M)
    opened = pick.open_pct
    above = np.append(pick.above[:5], opened)
    legs = [_ramp(np.asarray(start, float), above, TO_ABOVE_S, fps),
            np.repeat(above[None, :], round(hover_s * fps), axis=0),
            _follow(pick.descent, opened, DOWN_S, fps)]
    grasp = np.append(pick.descent[-1][:5], opened)
    legs.append(_ramp(grasp, np.append(grasp[:5], CLOSED_PCT), CLOSE_S, fps))
    legs.append(_follow(pick.lift, CLOSED_PCT, UP_S, fps))
    lifted = np.append(pick.lift[-1][:5], CLOSED_PCT)
    return np.vstack(legs + _place_legs(lifted, place, fps))


def _place_legs(lifted: np.ndarray, place, fps: int) -> list[np.ndarray]:
    """From `lifted` (the jaws closed on the cube, clear of the table): across at the lifted
    height to above the mark, the swing let die down, down to `RELEASE_ABOVE_M`, open, up."""
    over = np.append(place.lift[-1][:5], CLOSED_PCT)
    legs = [_ramp(lifted, over, ACROSS_S, fps),
            np.repeat(over[None, :], max(1, round(SETTLE_S * fps)), axis=0)]   # the swing dies down
    stop_at = 1.0 - RELEASE_ABOVE_M / LIFT_M   # the lift path rises LIFT_M above the grasp height
    legs.append(_follow(place.lift[::-1], CLOSED_PCT, DOWN_S, fps, stop_at))
    down = np.append(along_path(place.lift[::-1][:, :5], np.array([stop_at]))[0], CLOSED_PCT)
    legs.append(np.repeat(down[None, :], max(1, round(SETTLE_S * fps)), axis=0))
    legs.append(_ramp(down, np.append(down[:5], place.open_pct), OPEN_S, fps))
    legs.append(_follow(place.descent[::-1], place.open_pct, UP_S, fps))
    return legs


def place_held_path(start: np.ndarray, mark_xy_yaw: tuple[float, float, float], cube_size_m: float, fps: int,
                    correction_m: tuple[float, float] = (0.0, 0.0)) -> np.ndarray | None:
    """(N, 6) joint targets from `start` (the 6 joints now, the jaws closed on the cube where an
    episode left it) that put the cube on the mark: straight up, the gripper's orientation kept,
    until the grasp point is at the place's lifted height (`LIFT_STEPS` IK waypoints, so the cube
    never sweeps the table), then `pick_and_place_path`'s place. None when that lift is out of
    the arm's reach (the cube then goes to rest with the arm, as without a reset)."""
    kin = arm_kinematics()
    ax, ay = place_aim(mark_xy_yaw, cube_size_m)
    place = plan_pick(ax + correction_m[0], ay + correction_m[1], cube_size_m, mark_xy_yaw[2],
                      clearance_m=CLEARANCE_M)
    here = np.append(np.asarray(start, float)[:5], CLOSED_PCT)
    q = kin.units.from_rig(here)
    rise = float(kin.fk(kin.units.from_rig(np.append(place.lift[-1][:5], CLOSED_PCT)))[0][2] - kin.fk(q)[0][2])
    legs = [_ramp(np.asarray(start, float), here, CLOSE_S, fps)]   # the jaws keep squeezing
    if rise > 0:
        for step in range(1, LIFT_STEPS + 1):
            up, error = kin.lifted(q, rise * step / LIFT_STEPS)
            if error > LIFT_ERROR_M:
                return None
            row = kin.units.to_rig(up)
            row[5] = CLOSED_PCT
            legs.append(_ramp(legs[-1][-1], row, UP_S / LIFT_STEPS, fps))
    return np.vstack(legs + _place_legs(legs[-1][-1], place, fps))
