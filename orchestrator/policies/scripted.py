"""Scripted top-down pick (`type: scripted`, `aim_noise_mm`): a rig check and the demo's policies.

The policy aims at the episode's mark plus Gaussian noise (standard deviation `aim_noise_mm`
per axis, x and y, drawn from the trial's seed), then: move above the aim point with the
gripper open, descend straight down, close, lift, hold until the episode ends. It uses only
the layout coordinates (mark, cube size) and the SO-101's kinematics (inverse kinematics on
the MuJoCo model of the arm alone, `orchestrator.sim.kinematics`), never the simulation
state, so it runs unchanged on a real arm. Outputs are joint position targets in rig units
(degrees; gripper 0-100).

The joint trajectory is computed in `reset`; `select_action` only blends from the first
observed pose into it and indexes a table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from orchestrator.policies.base import EpisodeContext, Policy, register_policy
from orchestrator.rigs.base import Action, Observation
from orchestrator.rigs.profile import STATE_KEYS

# Timeline (seconds from the start of the episode). Compressed proportionally when an
# episode is shorter than NOMINAL_END_S + the protocol's hold time.
T_MOVE_END = 2.0      # joint-space move from the start pose to above the aim point
T_OPEN = (0.3, 1.5)   # gripper opens during the move
T_DESCEND = (2.3, 3.8)
T_CLOSE = (4.1, 5.0)
T_LIFT = (5.4, 6.9)
NOMINAL_END_S = 6.9

OPEN_PCT = 35.0       # gripper opening for a 3 cm cube (rig units, ~53 mm between jaw tips);
                      # other cube sizes get the same clearance per side (~12 mm)
NOMINAL_CUBE_M = 0.03
CLOSED_PCT = 0.0      # closing target: past contact, so the servo squeezes
TIP_CLEARANCE_M = 0.008   # fixed jaw tip above the table at the grasp (the moving jaw swings lower)
ABOVE_CLEARANCE_M = 0.025 # jaw tips above the cube's top before descending
LIFT_M = 0.07         # lift of the grasp point (cube bottom ends ~7 cm up: 4 cm + margin)
TILTS_DEG = tuple(range(0, 50, 5))   # gripper tilt tried when straight down is out of reach
IK_POS_TOL_M = 2e-4           # a pose is reachable when IK puts the grasp point within 0.2 mm
IK_ROT_TOL_RAD = math.radians(2.0)   # ... and the gripper within 2 degrees of the target


def smoothstep(u: np.ndarray) -> np.ndarray:
    u = np.clip(u, 0.0, 1.0)
    return u * u * (3.0 - 2.0 * u)


def _wrap(a: float) -> float:
    return (a + math.pi) % (2.0 * math.pi) - math.pi


@dataclass(frozen=True)
class PickPlan:
    """Joint solutions (rig units, 6 values) of the pick's key poses and what they aim at."""

    aim_xy: tuple[float, float]
    jaw_yaw_deg: float
    tilt_deg: float
    open_pct: float         # gripper opening for the approach (rig units)
    centre_xy_m: tuple[float, float]   # the open jaws' middle from the cube's centre (`tilted_jaws`)
    above: np.ndarray
    descent: np.ndarray     # (M, 6) from above to grasp
    lift: np.ndarray        # (M, 6) from grasp to lifted
    ik_error: float


def opening_for(cube_size_m: float, clearance_m: float | None = None) -> tuple[float, float]:
    """(gripper opening in rig units, shift in metres of the opening's centre along the jaw
    axis relative to the grasp site) giving a cube of this size the clearance a 3 cm cube
    has at `OPEN_PCT`, or `clearance_m` on each side."""
    from orchestrator.sim.kinematics import arm_kinematics

    opening = arm_kinematics().jaw_opening_pct
    centre0, gap0 = opening(OPEN_PCT)
    if abs(cube_size_m - NOMINAL_CUBE_M) < 1e-9 and clearance_m is None:
        return OPEN_PCT, 0.0
    want = cube_size_m + (gap0 - NOMINAL_CUBE_M if clearance_m is None else 2.0 * clearance_m)
    lo, hi = 0.0, 100.0
    if opening(hi)[1] <= want:
        lo = hi
    else:
        for _ in range(40):   # the gap grows with the opening: bisect
            mid = (lo + hi) / 2.0
            lo, hi = (mid, hi) if opening(mid)[1] < want else (lo, mid)
    pct = (lo + hi) / 2.0 if lo != hi else lo
    return pct, opening(pct)[0] - centre0


def tilted_jaws(rotation: np.ndarray, cube_size_m: float, z_grasp_m: float, drop_m: float) -> tuple[float, float]:
    """(width of the cube as the jaws see it, where the middle of the opening goes along the
    jaws' horizontal direction from the cube's centre), metres, for a grasp at `z_grasp_m`
    above the table with the gripper at `rotation` and its jaw tip `drop_m` below the grasp site.

    Tilted toward the jaw axis by `lean` (sin(lean) = the axis' vertical part, `rotation[2, 0]`),
    the jaw faces lean with it while the cube's faces stand upright. Between the tips' height
    and the cube's top (the part of the cube the faces pass), the cube spans
    c cos(lean) + (c - tip height) |sin(lean)| across the jaw axis, off the middle of the
    cube by (mid-height of that part - grasp height) sin(lean). Centring the opening on that
    span, not on the cube, keeps the clearance on both sides: at 20 degrees with 5 mm a side,
    the lower jaw's tip otherwise came down 3 mm inside the cube and pushed it away."""
    sin = float(rotation[2, 0])
    cos = math.sqrt(max(0.0, 1.0 - sin * sin))
    tip = z_grasp_m - drop_m
    width = cube_size_m * cos + (cube_size_m - tip) * abs(sin)
    centre = ((tip + cube_size_m) / 2.0 - z_grasp_m) * sin / cos
    return width, centre


def _ik_ok(kin) -> bool:
    """Whether the last IK solve reached its pose within the tolerances."""
    return kin.last_position_error < IK_POS_TOL_M and kin.last_rotation_error < IK_ROT_TOL_RAD


def _try_tilt(kin, ax: float, ay: float, jaw_yaw: float, radial: float, tilt_deg: float, cube_size_m: float,
              lift_m: float, clearance_m: float | None, last: bool) -> tuple[bool, tuple]:
    """The pick's poses at one tilt of the jaws: (all three reached, (IK error, tilt, rotation,
    q_grasp, q_above, q_lift, z_grasp, z_above, z_lift, opening %, gripper, (x, y), centre)). The
    lifted pose is the hardest to reach and is solved first; when it fails at a tilt that is not
    the `last`, the others are not solved (its error stands for the tilt's)."""
    rot = kin.grasp_rotation(jaw_yaw, math.radians(tilt_deg), radial)
    drop = kin.tip_drop(rot)   # fixed jaw's lowest point below the grasp site
    z_grasp = max(cube_size_m / 2.0, drop + TIP_CLEARANCE_M)
    z_above = cube_size_m + drop + ABOVE_CLEARANCE_M
    z_lift = z_grasp + lift_m
    # Open the jaws for the cube as they see it (tilted_jaws), with the clearance a side,
    # and put the middle of the opening where that span is centred: the grasp site moves
    # by that and against the opening's own shift along the jaw axis.
    width, centre = tilted_jaws(rot, cube_size_m, z_grasp, drop)
    open_pct, shift = opening_for(width, clearance_m)
    open_g = kin.units.from_rig(np.array([0, 0, 0, 0, 0, open_pct]))[5]
    along = rot[:2, 0] / np.linalg.norm(rot[:2, 0])
    centre_xy = (centre * float(along[0]), centre * float(along[1]))
    x, y = ax + centre_xy[0] - shift * rot[0, 0], ay + centre_xy[1] - shift * rot[1, 0]
    q_lift, e3 = kin.ik([x, y, z_lift], rot, gripper=open_g)
    ok = _ik_ok(kin)
    if not ok and not last:
        return False, (e3, tilt_deg, rot, q_lift, q_lift, q_lift, z_grasp, z_above, z_lift, open_pct, open_g,
                       (x, y), centre_xy)
    q_grasp, e1 = kin.ik([x, y, z_grasp], rot, q_lift, gripper=open_g)
    ok = ok and _ik_ok(kin)
    q_above, e2 = kin.ik([x, y, z_above], rot, q_grasp, gripper=open_g)
    ok = ok and _ik_ok(kin)
    return ok, (max(e1, e2, e3), tilt_deg, rot, q_grasp, q_above, q_lift, z_grasp, z_above, z_lift, open_pct,
                open_g, (x, y), centre_xy)


def plan_pick(x: float, y: float, cube_size_m: float, cube_yaw_deg: float = 0.0,
              lift_m: float = LIFT_M, clearance_m: float | None = None,
              tilts: tuple[float, ...] = TILTS_DEG) -> PickPlan:
    """Solve the pick's poses for an aim point (layout frame, metres) with the arm's IK; the
    jaws open by `opening_for` the cube's width as the (tilted) jaws see it, with `clearance_m`
    a side, centred on that span (`tilted_jaws`): the first of `tilts` whose poses all reach,
    else the one with the least IK error."""
    from orchestrator.sim.kinematics import arm_kinematics

    kin = arm_kinematics()
    ax, ay = x, y
    radial = math.atan2(y, x)
    # The cube is 4-fold symmetric: close the jaws across the pair of faces most nearly along
    # the arm's plane (wrist roll near 0, where the arm reaches farthest).
    candidates = [math.radians(cube_yaw_deg) + k * math.pi / 2 for k in range(4)]
    jaw_yaw = min(candidates, key=lambda a: abs(_wrap(a - radial)))
    best: tuple | None = None
    for tilt_deg in tilts:
        ok, candidate = _try_tilt(kin, ax, ay, jaw_yaw, radial, tilt_deg, cube_size_m, lift_m, clearance_m,
                                  last=tilt_deg == tilts[-1])
        if ok or best is None or candidate[0] < best[0]:
            best = candidate
        if ok:
            break
    assert best is not None   # TILTS_DEG is not empty
    err, tilt_deg, rot, q_grasp, q_above, q_lift, z_grasp, z_above, z_lift, open_pct, open_g, (x, y), centre_xy = best

    def path(q_from, z_from, z_to, n=8):
        qs, q = [], q_from
        for z in np.linspace(z_from, z_to, n):
            q, _ = kin.ik([x, y, z], rot, q, gripper=open_g)
            qs.append(np.degrees(q))
        return np.array(qs)

    return PickPlan(aim_xy=(ax, ay), jaw_yaw_deg=math.degrees(jaw_yaw), tilt_deg=float(tilt_deg),
                    open_pct=float(open_pct), centre_xy_m=centre_xy, above=np.degrees(q_above), descent=path(q_above, z_above, z_grasp),
                    lift=path(q_grasp, z_grasp, z_lift), ik_error=float(err))


def aim_noise(seed: int, aim_noise_mm: float) -> tuple[float, float]:
    """The aim offset (metres, x and y) of a trial: Gaussian, sd `aim_noise_mm` per axis."""
    noise = np.random.default_rng(seed).normal(0.0, aim_noise_mm / 1000.0, size=2)
    return float(noise[0]), float(noise[1])


def along_path(path: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Positions along a polyline of joint vectors at fractions `u` in [0, 1]."""
    s = np.clip(u, 0.0, 1.0) * (len(path) - 1)
    i = np.minimum(np.floor(s).astype(int), len(path) - 2)
    f = (s - i)[:, None]
    return path[i] * (1 - f) + path[i + 1] * f


@register_policy("scripted")
class ScriptedPickPolicy(Policy):
    """Top-down pick aimed at the mark + Gaussian aim noise (see the module docstring)."""

    needs_images = False

    @classmethod
    def from_spec(cls, label, spec, protocol=None, rig=None) -> ScriptedPickPolicy:
        return cls(aim_noise_mm=spec.aim_noise_mm, release_s=spec.release_s, lift_m=spec.lift_m,
                   grip_pct=spec.grip_pct)

    def __init__(self, aim_noise_mm: float = 0.0, release_s: float | None = None,
                 lift_m: float | None = None, grip_pct: float | None = None) -> None:
        self.aim_noise_mm = float(aim_noise_mm)
        self.release_s = release_s      # open the gripper at this episode time (a drop)
        self.lift_m = LIFT_M if lift_m is None else float(lift_m)
        self.grip_pct = CLOSED_PCT if grip_pct is None else float(grip_pct)
        self.plan: PickPlan | None = None
        self._table: np.ndarray | None = None
        self._start: np.ndarray | None = None
        self._k = 0

    def reset(self, context: EpisodeContext) -> None:
        noise = aim_noise(context.seed, self.aim_noise_mm)
        mark, cube = context.mark, context.cube
        self.noise_m = noise
        plan = plan_pick(mark.x + noise[0], mark.y + noise[1], cube.size_m, mark.yaw_deg, self.lift_m)
        self.plan = plan
        fps = context.fps
        frames = max(1, round(fps * context.duration_s))
        scale = min(1.0, (context.duration_s - 1.5) / NOMINAL_END_S) if context.duration_s > 1.5 else 0.2
        t = np.arange(frames) / fps / scale   # nominal-timeline seconds of each frame
        self._t = t
        table = np.zeros((frames, 6))
        # After the move: descend, close, lift, hold (arm columns), gripper column separately.
        table[:, :5] = plan.above[:5]
        d = (t - T_DESCEND[0]) / (T_DESCEND[1] - T_DESCEND[0])
        in_d = t >= T_DESCEND[0]
        table[in_d, :5] = along_path(plan.descent[:, :5], d[in_d])
        lft = (t - T_LIFT[0]) / (T_LIFT[1] - T_LIFT[0])
        in_l = t >= T_LIFT[0]
        table[in_l, :5] = along_path(plan.lift[:, :5], smoothstep(lft[in_l]))
        close = smoothstep((t - T_CLOSE[0]) / (T_CLOSE[1] - T_CLOSE[0]))
        table[:, 5] = plan.open_pct + (self.grip_pct - plan.open_pct) * close
        if self.release_s is not None:   # a drop: open again at release_s (episode time)
            table[np.arange(frames) / fps >= self.release_s, 5] = plan.open_pct
        self._table = table
        self._move = smoothstep(t / T_MOVE_END)
        self._open = smoothstep((t - T_OPEN[0]) / (T_OPEN[1] - T_OPEN[0]))
        self._start = None
        self._k = 0

    def select_action(self, observation: Observation) -> Action:
        if self._table is None or self.plan is None:
            raise RuntimeError("ScriptedPickPolicy.select_action before reset")
        k = min(self._k, len(self._table) - 1)
        self._k += 1
        if self._start is None:
            self._start = np.array([float(observation.get(key, self._table[0][i]))
                                    for i, key in enumerate(STATE_KEYS)])
        target = self._table[k].copy()
        if self._t[k] < T_MOVE_END:
            w = self._move[k]
            target[:5] = self._start[:5] + (self.plan.above[:5] - self._start[:5]) * w
            o = self._open[k]
            target[5] = self._start[5] + (self.plan.open_pct - self._start[5]) * o
        return {key: float(v) for key, v in zip(STATE_KEYS, target, strict=True)}

    def close(self) -> None:
        self._table = None
