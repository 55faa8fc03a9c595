"""A scripted pick and place in joint space: the arm moves the cube from where the camera found
it to a mark (the autonomous reset between trials, `run/reset.py`).

The key poses come from the scripted pick's inverse kinematics (`scripted.plan_pick`: above the
cube with the gripper open, straight down, the grasp, straight up by `LIFT_M`), solved at the
cube and again at the mark (moved by the cube's shift in the closing jaws, `place_aim`). The path: to above the cube, gripper opening; (on a session's
first pick, `hover_s`: a stay above the cube, where a calibration error shows as jaws beside the
cube before they descend, and the stop key can stop them); down; close; up;
across at the lifted height to above the mark; down until the cube's lowest corner is
`RELEASE_ABOVE_M` above the table (where it sits in the jaws, `Seat`); open; up, clear of the
cube. The place tilts the gripper as it was when the jaws closed on the cube (`tilted_as`: near
the edge of reach the pick tilts it 15-25 degrees), so the cube stands flat over the mark; where
the arm cannot tilt so there, the cube hangs turned in the jaws, a corner up to 13 mm lower than
the place's own grasp would hold it, and is let go that much higher (before the seat it was
pressed into the table and the guarded motion stopped the arm). The jaws close
across the pair of faces nearest the arm's plane at each end (`plan_pick`), so the cube lands
turned to the mark's yaw modulo its 90-degree symmetry. Joint targets in rig units (degrees,
gripper 0-100), one per control step at `fps`, each phase eased in and out (`smoothstep`).
"""

from __future__ import annotations

import math

import numpy as np

from orchestrator.policies.scripted import (
    CLOSED_PCT,
    LIFT_M,
    TILTS_DEG,
    TIP_CLEARANCE_M,
    along_path,
    opening_for,
    plan_pick,
    smoothstep,
)
from orchestrator.sim.kinematics import arm_kinematics

# The jaws open this much wider than the cube on each side: the camera knows where the cube is
# to about a millimetre, so less than the scripted pick's ~12 mm, and the moving jaw pushes the
# cube that much less across the table as it closes.
CLEARANCE_M = 0.005
# The cube's lowest corner is let go this high above the table: held a little lower in the hand
# than it was picked, put down at the grasp height it is pressed into the table and springs off as
# the jaws open.
RELEASE_ABOVE_M = 0.003
# A cube that sits in the jaws more than `TURNED_M` lower or higher than the place's own grasp
# would hold it (picked tilted, put down upright, or the other way round) turns in the closing
# jaws by an amount the seat does not know: let go `TURNED_MARGIN_M` higher still. A cube picked
# 0.31 m out (20 degrees) and put down upright on M07 was let go on its edge with 3 mm, its
# corner pressing the opening jaw into the wrist (blocked); with 5 mm it landed flat.
TURNED_M, TURNED_MARGIN_M = 0.001, 0.002
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


def tilted_as(tilt_deg: float) -> tuple[float, ...]:
    """The place's tilts to try (`plan_pick`'s `tilts`): the gripper tilted as it was when the jaws
    closed on the cube first, so that the cube stands on the table as it stood when gripped (flat),
    then the others as `plan_pick` tries them."""
    return (float(tilt_deg), *(t for t in TILTS_DEG if t != tilt_deg))


def held_tilt_deg(joints: np.ndarray) -> float:
    """The gripper's tilt from straight down at `joints` (rig units), to the nearest of `TILTS_DEG`."""
    kin = arm_kinematics()
    _, rotation = kin.fk(kin.units.from_rig(np.append(np.asarray(joints, float)[:5], CLOSED_PCT)))
    tilt = math.degrees(math.acos(max(-1.0, min(1.0, float(rotation[2, 2])))))
    return float(min(TILTS_DEG, key=lambda t: abs(t - tilt)))


def place_aim(mark_xy_yaw: tuple[float, float, float], cube_size_m: float, tilt_deg: float = 0.0) -> tuple[float, float]:
    """Where to aim the place's plan so that the cube the jaws hold against the fixed jaw lands
    on the mark: the mark moved by `in_hand_offset_m` along the jaw axis, away from the fixed
    jaw, and back by where a tilted plan puts the opening's middle (`PickPlan.centre_xy_m`;
    the axis and the tilt as the place's plan at the mark chooses them)."""
    x, y, yaw = mark_xy_yaw
    plan = plan_pick(x, y, cube_size_m, yaw, clearance_m=CLEARANCE_M, tilts=tilted_as(tilt_deg))
    jaw = math.radians(plan.jaw_yaw_deg)
    off = in_hand_offset_m(cube_size_m)
    return (x + off * math.cos(jaw) - plan.centre_xy_m[0], y + off * math.sin(jaw) - plan.centre_xy_m[1])


class Seat:
    """Where the cube sits in the closed jaws: its eight corners in the grasp site's frame (m).
    `of_pick`: the cube upright on the table where a pick's plan grasps it, pushed onto the fixed
    jaw by `in_hand_offset_m` as the jaws close (as `place_aim` assumes); `of_held`: a cube that
    an episode left in the jaws, assumed gripped as the scripted pick grips one with the gripper
    turned as it is now (upright, its faces along the jaw axis, centred between the jaws, its
    bottom where `plan_pick` puts the table under the grasp site): the episode's own grasp is not
    known to the reset."""

    def __init__(self, corners: np.ndarray):
        self.corners = np.asarray(corners, float)

    @staticmethod
    def _cube(centre: np.ndarray, jaw_axis: np.ndarray, cube_size_m: float) -> np.ndarray:
        """An upright cube's corners (world frame) at `centre`, two faces square to `jaw_axis`."""
        x = np.array([jaw_axis[0], jaw_axis[1], 0.0]) / math.hypot(jaw_axis[0], jaw_axis[1])
        y = np.cross([0.0, 0.0, 1.0], x)
        h = cube_size_m / 2.0
        return np.array([centre + a * h * x + b * h * y + c * h * np.array([0.0, 0.0, 1.0])
                         for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)])

    @classmethod
    def _in_grip(cls, q: np.ndarray, centre_xy: tuple[float, float], cube_size_m: float, bottom_m: float) -> Seat:
        kin = arm_kinematics()
        site, rotation = kin.fk(q)
        centre = np.array([centre_xy[0], centre_xy[1], bottom_m + cube_size_m / 2.0])
        return cls((cls._cube(centre, rotation[:, 0], cube_size_m) - site) @ rotation)

    @classmethod
    def of_pick(cls, pick, cube_xy: tuple[float, float], cube_size_m: float) -> Seat:
        kin = arm_kinematics()
        q = kin.units.from_rig(np.append(pick.descent[-1][:5], pick.open_pct))
        jaw = math.radians(pick.jaw_yaw_deg)
        off = in_hand_offset_m(cube_size_m)
        return cls._in_grip(q, (cube_xy[0] - off * math.cos(jaw), cube_xy[1] - off * math.sin(jaw)), cube_size_m, 0.0)

    @classmethod
    def of_held(cls, joints: np.ndarray, cube_size_m: float) -> Seat:
        kin = arm_kinematics()
        q = kin.units.from_rig(np.append(np.asarray(joints, float)[:5], CLOSED_PCT))
        site, rotation = kin.fk(q)
        z_grasp = max(cube_size_m / 2.0, kin.tip_drop(rotation) + TIP_CLEARANCE_M)
        return cls._in_grip(q, (float(site[0]), float(site[1])), cube_size_m, float(site[2]) - z_grasp)

    def lowest_below_site_m(self, rotation: np.ndarray) -> float:
        """How far the cube's lowest corner is below the grasp site with the gripper at `rotation`."""
        return float(-(self.corners @ np.asarray(rotation).T)[:, 2].min())


def pick_and_place_path(start: np.ndarray, cube_xy_yaw: tuple[float, float, float],
                        mark_xy_yaw: tuple[float, float, float], cube_size_m: float, fps: int,
                        correction_m: tuple[float, float] = (0.0, 0.0), hover_s: float = 0.0) -> np.ndarray:
    """(N, 6) joint targets from `start` (the 6 joints now) that pick the cube at
    (x, y, yaw degrees) and leave it at the mark's (x, y, yaw); see the module docstring.
    `correction_m` is added to where the cube is put down (the reset's next try: minus the
    offset the camera measured after the last one); `hover_s`: seconds held above the cube,
    the jaws open, before the descent."""
    pick = plan_pick(cube_xy_yaw[0], cube_xy_yaw[1], cube_size_m, cube_xy_yaw[2], clearance_m=CLEARANCE_M)
    ax, ay = place_aim(mark_xy_yaw, cube_size_m, pick.tilt_deg)
    place = plan_pick(ax + correction_m[0], ay + correction_m[1], cube_size_m, mark_xy_yaw[2], clearance_m=CLEARANCE_M,
                      tilts=tilted_as(pick.tilt_deg))
    opened = pick.open_pct
    above = np.append(pick.above[:5], opened)
    legs = [_ramp(np.asarray(start, float), above, TO_ABOVE_S, fps),
            np.repeat(above[None, :], round(hover_s * fps), axis=0),
            _follow(pick.descent, opened, DOWN_S, fps)]
    grasp = np.append(pick.descent[-1][:5], opened)
    legs.append(_ramp(grasp, np.append(grasp[:5], CLOSED_PCT), CLOSE_S, fps))
    legs.append(_follow(pick.lift, CLOSED_PCT, UP_S, fps))
    lifted = np.append(pick.lift[-1][:5], CLOSED_PCT)
    seat = Seat.of_pick(pick, cube_xy_yaw[:2], cube_size_m)
    return np.vstack(legs + _place_legs(lifted, place, seat, fps))


def release_height_m(place, seat: Seat) -> float:
    """How far above the place's grasp height the grasp site stops so that the cube, sitting in
    the jaws as `seat` says, has its lowest corner `RELEASE_ABOVE_M` above the table, plus
    `TURNED_MARGIN_M` when the seat is not the place's own (below `RELEASE_ABOVE_M`: the cube
    sits higher in the jaws than the place's own grasp would hold it)."""
    kin = arm_kinematics()
    site, rotation = kin.fk(kin.units.from_rig(np.append(place.descent[-1][:5], CLOSED_PCT)))
    lower = seat.lowest_below_site_m(rotation) - float(site[2])   # than the place's own grasp holds it
    return RELEASE_ABOVE_M + lower + (TURNED_MARGIN_M if abs(lower) > TURNED_M else 0.0)


def _place_legs(lifted: np.ndarray, place, seat: Seat, fps: int) -> list[np.ndarray]:
    """From `lifted` (the jaws closed on the cube, clear of the table): across at the lifted
    height to above the mark, the swing let die down, down until the cube's lowest corner is
    `RELEASE_ABOVE_M` above the table (`release_height_m`; never below the place's grasp
    height), open, up to above the mark."""
    over = np.append(place.lift[-1][:5], CLOSED_PCT)
    legs = [_ramp(lifted, over, ACROSS_S, fps),
            np.repeat(over[None, :], max(1, round(SETTLE_S * fps)), axis=0)]   # the swing dies down
    release = min(max(release_height_m(place, seat), 0.0), LIFT_M)
    stop_at = 1.0 - release / LIFT_M   # the lift path rises LIFT_M above the grasp height
    legs.append(_follow(place.lift[::-1], CLOSED_PCT, DOWN_S, fps, stop_at))
    down = np.append(along_path(place.lift[::-1][:, :5], np.array([stop_at]))[0], CLOSED_PCT)
    legs.append(np.repeat(down[None, :], max(1, round(SETTLE_S * fps)), axis=0))
    legs.append(_ramp(down, np.append(down[:5], place.open_pct), OPEN_S, fps))
    # up from where the jaws opened, by the descent (above -> grasp height, straight down) from
    # `RELEASE_ABOVE_M` below there: a cube held as the place's own grasp holds it, as before the seat
    kin = arm_kinematics()
    heights = [float(kin.fk(kin.units.from_rig(np.append(row[:5], place.open_pct)))[0][2]) for row in place.descent[[0, -1]]]
    from_m = max(0.0, release - RELEASE_ABOVE_M)
    start = min(1.0, from_m / (heights[0] - heights[1])) if heights[0] > heights[1] else 0.0
    rising = place.descent[::-1][:, :5]
    first = math.floor(start * (len(rising) - 1)) + 1
    up = np.vstack([along_path(rising, np.array([start])), rising[first:]])
    legs.append(_follow(up, place.open_pct, UP_S, fps))
    return legs


def place_held_path(start: np.ndarray, mark_xy_yaw: tuple[float, float, float], cube_size_m: float, fps: int,
                    correction_m: tuple[float, float] = (0.0, 0.0)) -> np.ndarray | None:
    """(N, 6) joint targets from `start` (the 6 joints now, the jaws closed on the cube where an
    episode left it) that put the cube on the mark: straight up, the gripper's orientation kept,
    until the grasp point is at the place's lifted height (`LIFT_STEPS` IK waypoints, so the cube
    never sweeps the table), then `pick_and_place_path`'s place. None when that lift is out of
    the arm's reach (the cube then goes to rest with the arm, as without a reset)."""
    kin = arm_kinematics()
    tilt = held_tilt_deg(start)
    ax, ay = place_aim(mark_xy_yaw, cube_size_m, tilt)
    place = plan_pick(ax + correction_m[0], ay + correction_m[1], cube_size_m, mark_xy_yaw[2],
                      clearance_m=CLEARANCE_M, tilts=tilted_as(tilt))
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
    return np.vstack(legs + _place_legs(legs[-1][-1], place, Seat.of_held(start, cube_size_m), fps))
