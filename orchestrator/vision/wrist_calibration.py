"""The wrist camera's geometry measured from the template: views of the printed sheet's ArUco
board (`design.fiducials.BOARD`), each with the joints read while the arm stood still there
(`calibrate_wrist` -> `Calibration`).

Method.
1. *Fiducials* in every view (`vision.table.find_fiducials`); a view with fewer than
   `MIN_MARKERS` markers is dropped.
2. *Intrinsics*: given (a profile's), or by `cv2.calibrateCamera` on the markers' corners over
   the views (Zhang 2000, "A flexible new technique for camera calibration", IEEE TPAMI 22(11):
   each view of the flat board constrains the image of the absolute conic), estimating fx, fy,
   cx, cy and the radial k1, k2 (tangential terms and k3 held at 0: the board's 24 corners a view
   do not pin them down, and wrist lenses' distortion is mostly radial).
3. *The board in each view* (`cv2.solvePnP`, refined by Levenberg-Marquardt): board-to-camera.
4. *Hand-eye*: the gripper's pose in each view from the joints' forward kinematics
   (`sim.fk.grasp_pose`) and the board's in the camera give the camera-to-gripper transform
   X of A X = X B (`cv2.calibrateHandEye`, method `HAND_EYE_METHOD`: R. Tsai and R. Lenz, "A new
   technique for fully autonomous and efficient 3D robotics hand/eye calibration", IEEE Trans.
   Robotics and Automation 5(3), 1989: rotation first from the motions' axes, then translation
   by least squares; Park & Martin 1994's Lie-group solution is `cv2.CALIB_HAND_EYE_PARK`).
5. *Refinement*: the mount and the board's pose in the layout frame together (and the intrinsics
   fx, fy, cx, cy, k1, k2 when they were not given), by nonlinear least squares on the corners'
   reprojection over every view (scipy `least_squares`, Levenberg-Marquardt), from the hand-eye
   solution: the joints tie the views together, which pins the intrinsics down further than the
   board alone (on `bench/wrist_calibration.py`, 5 seeds of 12 views at 320x240: the mount's
   error at most 2.4 mm and 0.79 degrees after step 4, 0.93 mm and 0.44 degrees after step 5). `reprojection_px` is its RMS (pixels): the chain joints -> gripper -> camera
   -> image closes to it, so a wrong joint reading, a bent mount or a sheet that moved shows there.

Refused (`CalibrationRefused`): fewer than `MIN_VIEWS` views with the board, or views whose
gripper rotations are degenerate (hand-eye needs two motions about non-parallel axes, Tsai & Lenz
1989 section IV): fewer than two relative rotations of at least `MIN_TURN_DEG`, or all their axes
within `MIN_AXIS_SPREAD_DEG` of one line (e.g. turning the wrist's roll only).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from orchestrator.design.fiducials import BOARD, Fiducial
from orchestrator.sim import fk
from orchestrator.vision.table import find_fiducials
from orchestrator.vision.wrist_geometry import WristGeometry

MIN_MARKERS = 2           # per view: 8 corners, a pose
MIN_VIEWS = 6             # views with the board
MIN_TURN_DEG = 10.0       # a relative rotation this large carries an axis
MIN_AXIS_SPREAD_DEG = 20.0  # the largest angle between two motions' axes (as lines)
HAND_EYE_METHOD = cv2.CALIB_HAND_EYE_TSAI


class CalibrationRefused(ValueError):
    """Too few or degenerate views: the geometry cannot be measured from them."""


@dataclass(frozen=True)
class View:
    """One still pose: the joints read there (degrees, shoulder_pan ... wrist_roll, further
    columns ignored) and the wrist frame (RGB)."""

    joints_deg: np.ndarray
    image: np.ndarray


@dataclass(frozen=True)
class Calibration:
    """The measured geometry, with `reprojection_px` (RMS of the refined chain, module docstring),
    `intrinsics_rms_px` (`cv2.calibrateCamera`'s RMS; None when the intrinsics were given), the
    views used and dropped, and the largest angle between the motions' axes (degrees)."""

    geometry: WristGeometry
    reprojection_px: float
    intrinsics_rms_px: float | None
    views_used: int
    views_dropped: int
    axis_spread_deg: float

    def measured(self) -> dict:
        return {"views": self.views_used, "views_without_the_board": self.views_dropped,
                "reprojection_px": round(self.reprojection_px, 3),
                "intrinsics_rms_px": None if self.intrinsics_rms_px is None else round(self.intrinsics_rms_px, 3),
                "axis_spread_deg": round(self.axis_spread_deg, 1),
                "method": "cv2.calibrateCamera (Zhang 2000), cv2.calibrateHandEye (Tsai & Lenz 1989), "
                          "refined by least squares on the reprojection"}


def gripper_poses(joints_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(origins (N, 3), rotations (N, 3, 3)) of the gripper body in the layout frame."""
    point, rotation = fk.grasp_pose(np.atleast_2d(np.asarray(joints_deg, float)))
    return point - rotation @ np.asarray(fk.GRASP_SITE, float), rotation


def axis_spread_deg(rotations: np.ndarray) -> tuple[int, float]:
    """(how many relative rotations between the views turn at least `MIN_TURN_DEG`, the largest
    angle (degrees, 0-90) between two of their axes taken as lines) of gripper rotations (N, 3, 3)."""
    axes = []
    for i in range(len(rotations)):
        for j in range(i + 1, len(rotations)):
            vec = cv2.Rodrigues(rotations[i].T @ rotations[j])[0].ravel()
            if math.degrees(float(np.linalg.norm(vec))) >= MIN_TURN_DEG:
                axes.append(vec / np.linalg.norm(vec))
    if len(axes) < 2:
        return len(axes), 0.0
    unit = np.asarray(axes)
    cosines = np.clip(np.abs(unit @ unit.T), 0.0, 1.0)
    return len(axes), math.degrees(math.acos(float(cosines.min())))


def _points(found: dict[int, np.ndarray], board: tuple[Fiducial, ...]) -> tuple[np.ndarray, np.ndarray]:
    by_id = {f.id: f for f in board}
    ids = sorted(found)
    world = np.concatenate([by_id[i].corners() for i in ids]).astype(np.float32)
    pixels = np.concatenate([found[i] for i in ids]).astype(np.float32)
    return world, pixels


def _intrinsics(worlds, pixels, size: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, float]:
    width, height = size
    f0 = float(max(width, height))
    guess = np.array([[f0, 0.0, (width - 1) / 2.0], [0.0, f0, (height - 1) / 2.0], [0.0, 0.0, 1.0]])
    flags = cv2.CALIB_USE_INTRINSIC_GUESS | cv2.CALIB_ZERO_TANGENT_DIST | cv2.CALIB_FIX_K3
    rms, matrix, distortion, _, _ = cv2.calibrateCamera(worlds, pixels, (width, height), guess, np.zeros(5),
                                                        flags=flags)
    return matrix, np.asarray(distortion, float).ravel()[:5], float(rms)


def calibrate_wrist(views: Sequence[View], given: WristGeometry | None = None,
                    board: tuple[Fiducial, ...] = BOARD) -> Calibration:
    """The wrist camera's geometry from `views` (module docstring); with `given`, its intrinsics
    are used (scaled to the views' size) and only the mount is measured."""
    kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for view in views:
        found = find_fiducials(view.image, board)
        if len(found) >= MIN_MARKERS:
            kept.append((np.asarray(view.joints_deg, float), *_points(found, board)))
    dropped = len(views) - len(kept)
    if len(kept) < MIN_VIEWS:
        raise CalibrationRefused(f"{len(kept)} of {len(views)} views show at least {MIN_MARKERS} of the sheet's "
                                 f"fiducials; at least {MIN_VIEWS} are needed: hold the gripper so the wrist "
                                 "camera sees the sheet, from more poses")
    joints = np.stack([k[0] for k in kept])
    origins, rotations = gripper_poses(joints)
    turns, spread = axis_spread_deg(rotations)
    if turns < 2 or spread < MIN_AXIS_SPREAD_DEG:
        raise CalibrationRefused(f"the views' gripper rotations are degenerate ({turns} turns of at least "
                                 f"{MIN_TURN_DEG:g} degrees, their axes at most {spread:.0f} degrees apart, "
                                 f"{MIN_AXIS_SPREAD_DEG:g} needed): tilt the gripper about different axes, "
                                 "not only its roll")
    height, width = views[0].image.shape[:2]
    worlds, pixels = [k[1] for k in kept], [k[2] for k in kept]
    if given is None:
        matrix, distortion, rms = _intrinsics(worlds, pixels, (width, height))
        intrinsics_rms: float | None = rms
    else:
        scaled = given.scaled_to(width, height)
        matrix, distortion, intrinsics_rms = scaled.matrix, scaled.distortion, None
    board_r, board_t = [], []
    for world, pixel in zip(worlds, pixels, strict=True):
        ok, rvec, tvec = cv2.solvePnP(world, pixel, matrix, distortion, flags=cv2.SOLVEPNP_ITERATIVE)
        rvec, tvec = cv2.solvePnPRefineLM(world, pixel, matrix, distortion, rvec, tvec)
        board_r.append(cv2.Rodrigues(rvec)[0])
        board_t.append(tvec.reshape(3, 1))
    rotation, position = cv2.calibrateHandEye(list(rotations), [o.reshape(3, 1) for o in origins],
                                              board_r, board_t, method=HAND_EYE_METHOD)
    # the board's pose in the layout frame by the hand-eye chain in the first view (the identity
    # when the sheet lies where the layout says)
    board_in_layout = rotations[0] @ rotation @ board_r[0]
    board_at = origins[0] + rotations[0] @ (rotation @ board_t[0].ravel() + position.ravel())
    board_start = np.concatenate([cv2.Rodrigues(board_in_layout)[0].ravel(), board_at])
    start = np.concatenate([cv2.Rodrigues(rotation)[0].ravel(), position.ravel(), board_start])
    if given is None:    # the intrinsics refined with the chain: the joints pin them down further
        start = np.concatenate([start, [matrix[0, 0], matrix[1, 1], matrix[0, 2], matrix[1, 2], *distortion[:2]]])
    params, rms_px = _refine(start, origins, rotations, worlds, pixels, matrix, distortion)
    rotation, position, _, _, matrix, distortion = _unpack(params, matrix, distortion)
    source = "measured by camera calibrate-wrist" if given is None else f"mount measured; intrinsics from {given.source}"
    geometry = WristGeometry(position, rotation, matrix, distortion, width, height, source)
    return Calibration(geometry, rms_px, intrinsics_rms, len(kept), dropped, spread)


def _unpack(params: np.ndarray, matrix: np.ndarray, distortion: np.ndarray):
    """(mount rotation, mount position, board rotation, board position, matrix, distortion) of
    the refinement's parameters: the mount (rotation vector, position), the board's pose in the
    layout frame, then, when refined, fx, fy, cx, cy, k1, k2."""
    if len(params) > 12:
        fx, fy, cx, cy, k1, k2 = params[12:18]
        matrix = np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])
        distortion = np.array([k1, k2, 0.0, 0.0, 0.0])
    return (cv2.Rodrigues(params[:3])[0], params[3:6], cv2.Rodrigues(params[6:9])[0], params[9:12],
            matrix, distortion)


def _chain(params: np.ndarray, origins, rotations, worlds, matrix, distortion) -> list[np.ndarray]:
    """Each view's projected corners for the parameters (`_unpack`)."""
    mount_r, mount_t, board_r, board_t, matrix, distortion = _unpack(params, matrix, distortion)
    out = []
    for origin, rotation, world in zip(origins, rotations, worlds, strict=True):
        layout = world.astype(float) @ board_r.T + board_t
        camera_r = rotation @ mount_r                      # camera axes in the layout frame
        centre = origin + rotation @ mount_t
        rvec = cv2.Rodrigues(camera_r.T)[0]
        tvec = -camera_r.T @ centre
        out.append(cv2.projectPoints(layout, rvec, tvec, matrix, distortion)[0].reshape(-1, 2))
    return out


def _refine(start: np.ndarray, origins, rotations, worlds, pixels, matrix, distortion):
    """(parameters, RMS px) refined from `start` (`_unpack`; module docstring)."""
    from scipy.optimize import least_squares

    target = np.concatenate([p.astype(float) for p in pixels])

    def residual(p: np.ndarray) -> np.ndarray:
        return (np.concatenate(_chain(p, origins, rotations, worlds, matrix, distortion)) - target).ravel()

    result = least_squares(residual, start, method="lm", x_scale="jac")
    error = residual(result.x).reshape(-1, 2)
    return result.x, math.sqrt(float((error ** 2).sum(axis=1).mean()))
