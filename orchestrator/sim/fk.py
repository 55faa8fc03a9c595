"""SO-101 forward kinematics in numpy: the grasp point and the jaw gap from rig units.

The kinematic chain is the MuJoCo Menagerie `robotstudio_so101` model as the simulator places
it (`orchestrator.sim.scene`: layout frame = world frame, origin on the shoulder-pan axis at
table height, z up, table surface z = 0), written out as URDF-style constants: for each body,
its position and orientation (w, x, y, z quaternion) in its parent and the axis of the hinge
joint that moves it (every joint of the chain rotates about its body's z axis at the body
origin). `tests/test_auto_rater.py` compares `grasp_point` with MuJoCo's own kinematics on
random poses, and `jaw_gap` with the model's jaw geometry.

Units as LeRobot's SO-101 follower (docs/design.md section 2): the five arm joints in degrees (same
zero as the model), the gripper 0-100 over the gripper joint's range. The `grasp` site is the
point between the jaws where a grasped cube's centre sits (`sim.scene.GRASP_SITE_POS`).
"""

from __future__ import annotations

import numpy as np

# (body, position in parent (m), orientation in parent (w, x, y, z)), world -> gripper; the
# hinge of every body after `base` turns about the body's own z axis.
CHAIN = (
    ("base", (-0.0388353, 0.0, 0.0024), (1.0, 0.0, 0.0, 0.0)),
    ("shoulder", (0.0388353, 0.0, 0.0624), (0.0, 0.0, -1.0, 0.0)),                  # shoulder_pan
    ("upper_arm", (-0.0303992, -0.0182778, -0.0542), (0.5, -0.5, -0.5, -0.5)),      # shoulder_lift
    ("lower_arm", (-0.11257, -0.028, 0.0), (0.7071068, 0.0, 0.0, 0.7071068)),       # elbow_flex
    ("wrist", (-0.1349, 0.0052, 0.0), (0.7071068, 0.0, 0.0, -0.7071068)),           # wrist_flex
    ("gripper", (0.0, -0.0611, 0.0181), (0.0172091, -0.0172091, 0.7068973, 0.7068973)),  # wrist_roll
)
GRASP_SITE = (0.019, 0.0, -0.083)   # in the gripper body
# The wrist camera (the Menagerie model's `wrist_cam`, `sim.scene`'s `wrist`): in the gripper body
# (its `camera_mount` child sits at the gripper's origin), at WRIST_CAMERA_POS, turned by
# WRIST_CAMERA_TILT_RAD about the body's x axis (the model's euler="-0.57 0 0"), vertical field of
# view WRIST_CAMERA_FOVY_DEG. A real arm's wrist camera has its own (a rig profile's
# `cameras.wrist.geometry`, measured by `camera calibrate-wrist`: vision/wrist_geometry.py).
WRIST_CAMERA_POS = (0.0, 0.055, -0.045)
WRIST_CAMERA_TILT_RAD = -0.57
WRIST_CAMERA_FOVY_DEG = 48.5

# Gap between the inner faces of the two jaw tips (m) at gripper openings 0, 10, ..., 100
# (rig units), from the model's jaw geometry (`sim.kinematics.ArmKinematics.jaw_opening`).
GAP_PCT = np.arange(0.0, 101.0, 10.0)
GAP_M = np.array([0.00144, 0.01616, 0.03128, 0.04623, 0.06047, 0.07347, 0.08475, 0.09391,
                  0.1006, 0.10458, 0.1057])


def _quat_matrix(q) -> np.ndarray:
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


_ROT = [_quat_matrix(np.asarray(q) / np.linalg.norm(q)) for _, _, q in CHAIN]
_POS = [np.asarray(p, dtype=float) for _, p, _ in CHAIN]


def _rz(angles: np.ndarray) -> np.ndarray:
    """Rotations about z, shape (N, 3, 3)."""
    c, s = np.cos(angles), np.sin(angles)
    out = np.zeros((len(angles), 3, 3))
    out[:, 0, 0], out[:, 0, 1], out[:, 1, 0], out[:, 1, 1], out[:, 2, 2] = c, -s, s, c, 1.0
    return out


def grasp_pose(joints_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Grasp-point positions (N, 3) and gripper rotations (N, 3, 3) in the layout frame for
    joint angles (N, >=5) in degrees (shoulder_pan ... wrist_roll; further columns ignored)."""
    q = np.radians(np.atleast_2d(np.asarray(joints_deg, dtype=float))[:, :5])
    n = len(q)
    rot = np.broadcast_to(_ROT[0], (n, 3, 3)).copy()
    pos = np.broadcast_to(_POS[0], (n, 3)).copy()
    for k in range(1, len(CHAIN)):
        pos = pos + rot @ _POS[k]
        rot = rot @ _ROT[k] @ _rz(q[:, k - 1])
    return pos + rot @ np.asarray(GRASP_SITE), rot


def gripper_to_wrist_camera() -> tuple[np.ndarray, np.ndarray]:
    """(position (3,), rotation (3, 3)) of the wrist camera in the gripper body, the rotation's
    columns the camera's axes in OpenCV's convention (x right, y down, z along the optical axis;
    a MuJoCo camera looks along its own -z with y up)."""
    c, s = np.cos(WRIST_CAMERA_TILT_RAD), np.sin(WRIST_CAMERA_TILT_RAD)
    tilt = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    return np.asarray(WRIST_CAMERA_POS, float), tilt @ np.diag([1.0, -1.0, -1.0])


def wrist_camera_pose(joints_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The wrist camera's centres (N, 3) and camera-to-layout rotations (N, 3, 3; OpenCV axes as
    `gripper_to_wrist_camera`) for joint angles (N, >=5) in degrees."""
    point, rot = grasp_pose(joints_deg)
    origin = point - rot @ np.asarray(GRASP_SITE)
    at, turn = gripper_to_wrist_camera()
    return origin + rot @ at, rot @ turn


def grasp_point(joints_deg: np.ndarray) -> np.ndarray:
    """Grasp-point positions (N, 3), metres, layout frame."""
    return grasp_pose(joints_deg)[0]


def jaw_gap(gripper_pct: np.ndarray) -> np.ndarray:
    """Gap between the jaw tips (m) for gripper openings in rig units (0-100)."""
    return np.interp(np.asarray(gripper_pct, dtype=float), GAP_PCT, GAP_M)
