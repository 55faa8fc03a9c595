"""Arm poses from which the simulated wrist camera sees the sheet's fiducials: the simulated
hand's poses for `orchestrator camera calibrate-wrist` on the simulated rig, and the tests' and
the bench's (`bench/wrist_calibration.py`).

Drawn by rejection, in numpy: joint angles uniform in `RANGES_DEG` (degrees; the gripper above the
sheet, tilted every way), kept when the wrist camera (`fk.wrist_camera_pose`, the model's field of
view) is at least `MIN_HEIGHT_M` above the table, within `MAX_DISTANCE_M` of the markers it sees,
and sees at least `MIN_IN_VIEW` markers whole, `MARGIN_PX` inside a 4:3 image and away from its
lower corners where the jaws are. Views are then chosen greedily so that each turns the gripper
at least `MIN_APART_DEG` from every chosen one (varied rotations: hand-eye calibration needs them).
"""

from __future__ import annotations

import math

import numpy as np

from orchestrator.design.fiducials import BOARD
from orchestrator.sim import fk

RANGES_DEG = ((-35.0, 35.0), (-60.0, 20.0), (-10.0, 70.0), (20.0, 95.0), (-120.0, 120.0))
MIN_HEIGHT_M = 0.12
MAX_DISTANCE_M = 0.32
MIN_IN_VIEW = 3
MARGIN_PX = 0.06       # of the image's height
MIN_APART_DEG = 15.0


def _in_view(joints_deg: np.ndarray) -> np.ndarray:
    """(N,) how many of the board's markers each pose's wrist camera sees whole (module docstring)."""
    centres, rotations = fk.wrist_camera_pose(joints_deg)
    f = 0.5 / math.tan(math.radians(fk.WRIST_CAMERA_FOVY_DEG) / 2.0)      # image height = 1
    corners = np.concatenate([m.corners() for m in BOARD])                 # (M*4, 3)
    camera = np.einsum("nji,nmj->nmi", rotations, corners[None] - centres[:, None, :])
    depth = camera[..., 2]
    u = f * camera[..., 0] / np.maximum(depth, 1e-6)
    v = f * camera[..., 1] / np.maximum(depth, 1e-6)
    half_w, half_h = 2.0 / 3.0 - MARGIN_PX, 0.5 - MARGIN_PX
    inside = (depth > 0.05) & (depth < MAX_DISTANCE_M) & (np.abs(u) < half_w) & (np.abs(v) < half_h)
    inside &= ~((v > 0.15) & (np.abs(u) > 0.3))                            # the jaws' corners
    whole = inside.reshape(len(joints_deg), len(BOARD), 4).all(axis=2)
    counts = whole.sum(axis=1)
    return np.where(centres[:, 2] >= MIN_HEIGHT_M, counts, 0)


def calibration_poses(count: int, seed: int, draws: int = 40000) -> np.ndarray:
    """(count, 5) joint angles (degrees) from which the wrist camera sees the board, their gripper
    rotations at least `MIN_APART_DEG` apart (module docstring); fewer when too few are found."""
    rng = np.random.default_rng(seed)
    low, high = np.array(RANGES_DEG).T
    joints = rng.uniform(low, high, size=(draws, 5))
    good = joints[_in_view(joints) >= MIN_IN_VIEW]
    _, rotations = fk.grasp_pose(good)
    chosen: list[int] = []
    for k in range(len(good)):
        if all(_angle_deg(rotations[k], rotations[j]) >= MIN_APART_DEG for j in chosen):
            chosen.append(k)
            if len(chosen) == count:
                break
    return good[chosen]


def _angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    return math.degrees(math.acos(max(-1.0, min(1.0, (float(np.trace(a.T @ b)) - 1.0) / 2.0))))


def render_wrist_views(poses_deg: np.ndarray, width: int, height: int) -> list[np.ndarray]:
    """The simulated wrist camera's frame (RGB, `width` x `height`) at each pose (degrees, the
    gripper closed), the cube off the sheet: what the simulated hand shows the camera."""
    import mujoco

    from orchestrator.sim.scene import ARM_JOINTS, build_scene

    model = build_scene(0.03, 0.03)
    data = mujoco.MjData(model)
    adr = model.joint("cube").qposadr[0]
    data.qpos[adr:adr + 3] = (0.2, 0.5, 0.015)
    frames = []
    with mujoco.Renderer(model, height=height, width=width) as renderer:
        for q in np.atleast_2d(poses_deg):
            for name, value in zip(ARM_JOINTS, [*np.radians(q[:5]), 0.0], strict=True):
                data.qpos[model.joint(name).qposadr[0]] = value
            mujoco.mj_forward(model, data)
            renderer.update_scene(data, camera="wrist")
            frames.append(renderer.render().copy())
    return frames
