"""Renders of the simulated front camera with planted start states: cubes at chosen poses,
other objects on the sheet, a moved camera (the scene of `sim.scene`, edited through MjSpec)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from orchestrator.sim.front_camera import FRONT_CAMERA_FOVY, FRONT_CAMERA_POS, FRONT_CAMERA_TARGET

CUBE_M = 0.03


@dataclass
class Planted:
    """What the scene holds: the cube's pose (None: off the table), extra red cubes, grey boxes
    (`others`: (x, y, half-size)), and how far the camera moved (metres) and turned (degrees,
    about the world's vertical)."""

    cube: tuple[float, float, float] | None = (0.19, 0.025, 0.0)
    extra_cubes: list[tuple[float, float, float]] = field(default_factory=list)
    others: list[tuple[float, float, float]] = field(default_factory=list)
    camera_shift_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    camera_turn_deg: float = 0.0
    camera_turn_axis: tuple[float, float, float] = (0.0, 0.0, 1.0)   # world axis of the turn
    light: float = 1.0


def _camera_quat(pos, target, turn_deg, axis=(0.0, 0.0, 1.0)):
    import cv2
    import mujoco

    from orchestrator.sim.scene import _look_at_xyaxes

    xy = _look_at_xyaxes(pos, target)
    x, y = np.array(xy[:3]), np.array(xy[3:])
    mat = np.stack([x, y, np.cross(x, y)], axis=1)
    unit = np.asarray(axis, float) / np.linalg.norm(axis)
    mat = cv2.Rodrigues(unit * math.radians(turn_deg))[0] @ mat
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, mat.reshape(-1))
    return quat


def render_front(planted: Planted, size: tuple[int, int] = (320, 240)) -> np.ndarray:
    """One RGB front-camera image of `planted` at `size` (width, height)."""
    import mujoco

    from orchestrator.sim.scene import scene_spec, yaw_quat

    spec = scene_spec(CUBE_M, 0.03)
    cam = spec.camera("front")
    cam.pos = list(np.add(FRONT_CAMERA_POS, planted.camera_shift_m))
    cam.quat = _camera_quat(cam.pos, np.add(FRONT_CAMERA_TARGET, planted.camera_shift_m), planted.camera_turn_deg,
                           planted.camera_turn_axis).tolist()
    spec.visual.headlight.diffuse = [0.6 * planted.light] * 3
    for n, (x, y, yaw) in enumerate(planted.extra_cubes):
        geom = spec.worldbody.add_geom()
        geom.name, geom.type = f"extra_cube{n}", mujoco.mjtGeom.mjGEOM_BOX
        geom.size, geom.pos = [CUBE_M / 2] * 3, [x, y, CUBE_M / 2]
        geom.quat = yaw_quat(yaw).tolist()
        geom.rgba = [0.85, 0.15, 0.12, 1.0]
        geom.contype = geom.conaffinity = 0
    for n, (x, y, half) in enumerate(planted.others):
        geom = spec.worldbody.add_geom()
        geom.name, geom.type = f"other{n}", mujoco.mjtGeom.mjGEOM_BOX
        geom.size, geom.pos = [half, half, half], [x, y, half]
        geom.rgba = [0.2, 0.3, 0.8, 1.0]
        geom.contype = geom.conaffinity = 0
    model = spec.compile()
    data = mujoco.MjData(model)
    adr = model.jnt_qposadr[model.joint("cube").id]
    if planted.cube is None:
        data.qpos[adr:adr + 3] = [0.75, 0.6, CUBE_M / 2]
    else:
        x, y, yaw = planted.cube
        data.qpos[adr:adr + 3] = [x, y, CUBE_M / 2]
        data.qpos[adr + 3:adr + 7] = yaw_quat(yaw)
    mujoco.mj_forward(model, data)
    renderer = mujoco.Renderer(model, height=size[1], width=size[0])
    try:
        renderer.update_scene(data, camera="front")
        return renderer.render().copy()
    finally:
        renderer.close()


def front_intrinsics(size: tuple[int, int] = (320, 240)):
    from orchestrator.vision.camera_model import Intrinsics

    return Intrinsics.from_fovy(FRONT_CAMERA_FOVY, size[0], size[1])
