"""The wrist camera measures the cube in the jaws: its pose relative to the gripper in every frame
of a squeeze, hence its bottom's height above the table with the gripper's pose from the joints
(`measure_in_jaws` -> `WristTrack`).

Why the wrist camera. It rides on the gripper, so a held cube is near and large in its image (at
320x240 and the Menagerie mount, about 140 px across at some 6 cm: a pixel is under half a
millimetre; at 640x480, the real arm's size, twice that), and it looks at the cube from where the jaws hold it, so the cube's
place in the jaws (how far it sank: the rater's *seat*; and any slip during the hold) is measured
directly, with no prior from another camera. What it sees during a hold: the cube's top face and
the side face towards the camera, that side face's bottom edge against the table behind it; the
jaws hide the image's lower corners (`bench/wrist_lift.py`, docs/benchmarks.md).

The camera. Its pose in the gripper body is the model's mount (`sim.fk.gripper_to_wrist_camera`)
and its intrinsics the model's field of view (`sim.fk.WRIST_CAMERA_FOVY_DEG`, square pixels,
principal point at the centre). The fit is done in the gripper's frame, so it needs no joint at
all; only the bottom's height in the layout frame uses the gripper's pose from the joints
(`sim.fk.grasp_pose`). On a real arm the mount and the intrinsics are the rig's (`geometry`: a
`vision.wrist_geometry.WristGeometry`, measured by `orchestrator camera calibrate-wrist`); its
frames are undistorted to its pinhole first.

The fit. The cube (a box of the layout's size) has six degrees of freedom in the gripper frame: its
centre and a rotation. Its silhouette (the convex hull of its projected corners, `cube.coverage`)
is matched to the frame by Nelder-Mead (SciPy) on a cost that counts the cube-coloured pixels the
silhouette leaves out plus the unsaturated pixels it covers (`BACKGROUND_SATURATION`: the printed
sheet and the table behind the cube; something saturated and not of the cube's colour, the jaws,
costs nothing: occlusion by the jaws is the normal case). A squeeze's first fitted frame starts
from the cube centred at the grasp point, its faces along the jaws, and from that pose turned
either way about the gripper's y axis (`FIRST_STARTS_DEG`; the best of the three is kept); each
later frame from the previous fit. Each fit reports its mismatch and its turn from the jaws' pose
(`Fit`): the rater does not use a fit turned far about y, a cube wedged in the jaws
(`judging.auto.wrist_sense`). Computed on the image halved (`SCALE`), where the cube is still some
70 px across at 320x240 (140 px at 640x480: the fit's error per frame shrinks about threefold, its
CPU doubles; fitted on 640x480 frames quartered instead, the error is between the two:
docs/benchmarks.md).

Not measured (NaN, with the reason): fewer than `VISIBLE_FRACTION` of the fitted silhouette (or
than `MIN_VISIBLE_PX` pixels) shows the cube's colour, or the fit leaves more than
`UNEXPLAINED_FRACTION` of the cube-coloured pixels out (the cube is not where the jaws hold it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import cv2
import numpy as np

from orchestrator.sim import fk
from orchestrator.vision.camera_model import Intrinsics
from orchestrator.vision.cube import RED, CubeColour, coverage, hull_box
from orchestrator.vision.wrist_geometry import WristGeometry

BACKGROUND_SATURATION = 70  # HSV saturation (0-255) below which a pixel is the sheet or the table
SCALE = 0.5                 # the fit's image is the frame resized by this
VISIBLE_FRACTION = 0.3      # of the silhouette's area in the image: fewer cube-coloured pixels, not measured
UNEXPLAINED_FRACTION = 0.2  # of the cube-coloured pixels: more outside the fit, not measured
MIN_VISIBLE_PX = 200.0      # cube-coloured pixels under the fit (at SCALE; a held cube shows ~4000): fewer, not measured
# The cube's turn in the jaws away from its pose at the squeeze's first frame, about the gripper's x
# and z axes, costs this many pixels per squared degree: the jaws hide the silhouette's lower
# corners, and without it a cube turned 20 degrees into them fitted as well (5 mm low on 4 of 16
# episodes of `bench/wrist_lift.py`); with it (and none about y) 0.98 mm at most.
PRIOR_PX_PER_DEG2 = 2.0
# A squeeze's first fit starts from the jaws' pose and from it turned this much either way about
# the gripper's y axis, and keeps the best: from the jaws' pose alone, a cube wedged 8-12 degrees
# about y (and 1-2 about z) in frames MuJoCo renders was fitted at 3-5 degrees and up to 4.7 mm
# high on 9 of 36 poses; from the three starts on 3 of 36, at most 2.7 mm (tests/test_wrist_camera.py).
FIRST_STARTS_DEG = (0.0, 10.0, -10.0)
XATOL = 5e-5                # Nelder-Mead's step tolerance (m and rad)


@dataclass(frozen=True)
class WristTrack:
    """Per frame of the wrist video: `times_s`, the cube's centre in the gripper frame
    (`centre_g`, (K, 3) m) and its rotation there (`rotation_g`, (K, 3, 3)), the cube bottom's
    height above the table (`bottom_m`: its lowest corner, with the gripper's pose from the
    joints), NaN where not measured, and `reasons` ("" when measured); per fitted frame (NaN where
    none) the fit's `mismatch` (`Fit.mismatch`) and its `turn_deg` ((K, 3), `Fit.turn_deg`); the
    fitted frames' size `frame_px` (width, height; None when none was fitted or not known) and
    whether they were fitted with a rig's measured camera (`measured_camera`) or the model's."""

    times_s: np.ndarray
    centre_g: np.ndarray
    rotation_g: np.ndarray
    bottom_m: np.ndarray
    reasons: tuple[str, ...]
    mismatch: np.ndarray | None = None
    turn_deg: np.ndarray | None = None
    frame_px: tuple[int, int] | None = None
    measured_camera: bool = False

    @property
    def visible(self) -> np.ndarray:
        return ~np.isnan(self.bottom_m)


def _corners(size_m: float) -> np.ndarray:
    h = size_m / 2.0
    return np.array([(a, b, c) for a in (-h, h) for b in (-h, h) for c in (-h, h)])


def _turn_cost(rotation: np.ndarray, prior: np.ndarray) -> float:
    """The prior's cost of the cube turned from `prior` to `rotation` (gripper frame) about the
    gripper's x and z axes (`PRIOR_PX_PER_DEG2`); a turn about its y axis, nearly the camera's line
    of sight (the cube wedged between the hinged jaw and the fixed one: up to 11 degrees in the
    simulator), turns the silhouette in the image and costs nothing."""
    turn = np.degrees(cv2.Rodrigues(rotation @ prior.T)[0].ravel())
    return PRIOR_PX_PER_DEG2 * float(turn[0] ** 2 + turn[2] ** 2)


def _about_x(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


class _WristImage:
    """One frame's masks at the fit's scale and the projection of gripper-frame points."""

    def __init__(self, image: np.ndarray, intrinsics: Intrinsics | WristGeometry, colour: CubeColour) -> None:
        if isinstance(intrinsics, WristGeometry):   # a rig's measured camera: its mount, its lens
            geometry = intrinsics.scaled_to(image.shape[1], image.shape[0])
            image = geometry.undistorted(image)
            f, c = np.diag(geometry.matrix)[:2], geometry.matrix[:2, 2]
            self.at, self.turn = geometry.position, geometry.rotation
        else:
            f = np.array([intrinsics.f_px, intrinsics.f_px])
            c = np.array([(image.shape[1] - 1) / 2.0, (image.shape[0] - 1) / 2.0])
            self.at, self.turn = fk.gripper_to_wrist_camera()
        small = cv2.resize(image, None, fx=SCALE, fy=SCALE, interpolation=cv2.INTER_AREA)
        self.red = colour.mask(small).astype(float)
        saturation = cv2.cvtColor(small, cv2.COLOR_RGB2HSV)[..., 1]
        self.weight = (saturation < BACKGROUND_SATURATION).astype(float) * (1.0 - self.red) - self.red
        self.total = float(self.red.sum())
        self.box = (0, 0, small.shape[1], small.shape[0])
        self.f = f * SCALE
        self.c = (c + 0.5) * SCALE - 0.5            # pixel centres: (0, 0) at pixel (0, 0)'s centre

    def project(self, points_g: np.ndarray) -> np.ndarray:
        camera = (np.asarray(points_g, float) - self.at) @ self.turn
        return self.f * camera[:, :2] / np.maximum(camera[:, 2:3], 1e-4) + self.c

    def cost(self, pixels: np.ndarray) -> float:
        box = hull_box(pixels, self.box)
        if box is None:
            return self.total
        x, y, w, h = box
        return self.total + float((self.weight[y:y + h, x:x + w] * coverage(pixels, box)).sum())

    def seen(self, pixels: np.ndarray) -> tuple[float, float]:
        """(cube-coloured pixels under the silhouette, the silhouette's area in the image)."""
        box = hull_box(pixels, self.box)
        if box is None:
            return 0.0, 0.0
        x, y, w, h = box
        cover = coverage(pixels, box)
        return float((self.red[y:y + h, x:x + w] * cover).sum()), float(cover.sum())


class Fit(NamedTuple):
    """One wrist frame's fit: the cube's `centre` and `rotation` in the gripper frame, why it is
    not measured ("" when it is), its `mismatch` (the pixels the silhouette gets wrong, cube-coloured
    ones it leaves out plus background ones it covers, over the cube-coloured pixels in the frame)
    and its `turn_deg` (the rotation from the prior's pose, a rotation vector in degrees about the
    gripper's x, y, z axes; zeros without a prior)."""

    centre: np.ndarray
    rotation: np.ndarray
    reason: str
    mismatch: float
    turn_deg: np.ndarray


def fit_in_jaws(image: np.ndarray, intrinsics: Intrinsics | WristGeometry, size_m: float, centre_g: np.ndarray,
                rotation_g: np.ndarray, colour: CubeColour = RED, prior: np.ndarray | None = None,
                starts_deg: tuple[float, ...] = (0.0,)) -> Fit:
    """The cube in one wrist frame, fitted from (`centre_g`, `rotation_g`) turned by each of
    `starts_deg` about the gripper's y axis, the best fit kept (module docstring); `intrinsics`:
    the model's camera's (the model's mount), or a rig's measured `WristGeometry`."""
    frame = _WristImage(image, intrinsics, colour)
    local = _corners(size_m)

    def pose(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return centre_g + p[:3], cv2.Rodrigues(np.asarray(p[3:], float).reshape(3, 1))[0] @ rotation_g

    def cost(p: np.ndarray) -> float:
        centre, rotation = pose(p)
        return frame.cost(frame.project(centre + local @ rotation.T)) + (0.0 if prior is None else _turn_cost(rotation, prior))

    from scipy.optimize import minimize  # here, not at the top: 0.35 s of import that every
    # reader of the rater's labels (export's plan, report) paid without fitting a frame

    step, turn = 0.002, 0.05
    best_x: np.ndarray = np.zeros(6)
    best_cost = math.inf
    for start_deg in starts_deg:
        x0 = np.array([0.0, 0.0, 0.0, 0.0, math.radians(start_deg), 0.0])
        simplex = x0 + np.vstack([np.zeros(6), np.diag([step, step, step, turn, turn, turn])])
        result = minimize(cost, x0, method="Nelder-Mead",
                          options={"xatol": XATOL, "fatol": 0.2, "initial_simplex": simplex, "maxiter": 600})
        if float(result.fun) < best_cost:
            best_x, best_cost = np.asarray(result.x, float), float(result.fun)
    centre, rotation = pose(best_x)
    pixels = frame.project(centre + local @ rotation.T)
    inside, area = frame.seen(pixels)
    mismatch = frame.cost(pixels) / max(frame.total, 1.0)
    turned = np.zeros(3) if prior is None else np.degrees(cv2.Rodrigues(rotation @ prior.T)[0].ravel())
    reason = ""
    if inside < max(VISIBLE_FRACTION * area, MIN_VISIBLE_PX):
        reason = f"occluded: {inside:.0f} of {area:.0f} px of the cube's colour in the wrist camera"
    elif frame.total - inside > UNEXPLAINED_FRACTION * frame.total:
        reason = (f"{frame.total - inside:.0f} px of the cube's colour outside the fitted cube in "
                  "the wrist camera: not where the jaws hold it")
    return Fit(centre, rotation, reason, mismatch, turned)


def start_pose(rotation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fit's start at a squeeze's first frame: the cube centred at the grasp point, standing
    flat on the table with its faces along the gripper's x axis (the jaws' closing direction),
    in the gripper frame of the gripper's `rotation` (layout frame)."""
    up = rotation.T @ np.array([0.0, 0.0, 1.0])
    return np.asarray(fk.GRASP_SITE, float), _about_x(math.atan2(-up[1], up[2]))


def bottom_height(point: np.ndarray, rotation: np.ndarray, centre_g: np.ndarray, rotation_g: np.ndarray,
                  size_m: float) -> float:
    """The lowest corner's height (m, layout frame) of a cube at (`centre_g`, `rotation_g`) in a
    gripper whose grasp point is at `point` with `rotation` (`sim.fk.grasp_pose`)."""
    origin = point - rotation @ np.asarray(fk.GRASP_SITE, float)
    corners = (centre_g + _corners(size_m) @ rotation_g.T) @ rotation.T + origin
    return float(corners[:, 2].min())


def measure_in_jaws(frames: Iterable[np.ndarray | None], times_s: np.ndarray, joints_deg: np.ndarray,
                    closed: np.ndarray, size_m: float, wanted: np.ndarray | None = None,
                    colour: CubeColour = RED, geometry: WristGeometry | None = None) -> WristTrack:
    """The cube in the jaws in each wrist frame taken while `closed` and `wanted` (per frame,
    default every closed frame; the joints `joints_deg` (K, >=5) at each frame), each fitted from
    the previous fit of its squeeze or from `start_pose` at the squeeze's first frame (module
    docstring); the other frames may be None. `geometry`: the wrist camera's (a rig's measured
    one, `vision.wrist_geometry`), default the simulated SO-101's model."""
    times = np.asarray(times_s, float)
    n = len(times)
    centres, rotations = np.full((n, 3), np.nan), np.full((n, 3, 3), np.nan)
    bottoms, mismatch, turns = np.full(n, np.nan), np.full(n, np.nan), np.full((n, 3), np.nan)
    reasons = ["not in the jaws (the gripper is not closed on it): not measured"] * n
    wanted = np.ones(n, bool) if wanted is None else np.asarray(wanted, bool)
    points, grippers = fk.grasp_pose(np.asarray(joints_deg, float)) if n else (np.zeros((0, 3)), np.zeros((0, 3, 3)))
    start: tuple[np.ndarray, np.ndarray] | None = None
    prior, fresh = None, False
    frame_px: tuple[int, int] | None = None
    for k, image in enumerate(frames):
        if k >= n:
            break
        if not closed[k]:
            start = None
            continue
        if start is None:
            start = start_pose(grippers[k])
            prior, fresh = start[1], True
        if not wanted[k]:
            reasons[k] = "not fitted (the wrist camera fits a sample of the held frames)"
            continue
        if image is None:
            raise ValueError(f"wrist frame {k} is None, but it is to be fitted: it must be read")
        frame_px = (int(image.shape[1]), int(image.shape[0]))
        camera = geometry or Intrinsics.from_fovy(fk.WRIST_CAMERA_FOVY_DEG, image.shape[1], image.shape[0], "the model's")
        fit = fit_in_jaws(np.asarray(image), camera, size_m, *start, colour, prior,
                          FIRST_STARTS_DEG if fresh else (0.0,))
        centre, rotation, reasons[k] = fit.centre, fit.rotation, fit.reason
        centres[k], rotations[k], mismatch[k], turns[k] = centre, rotation, fit.mismatch, fit.turn_deg
        if not reasons[k]:
            start, fresh = (centre, rotation), False
            bottoms[k] = bottom_height(points[k], grippers[k], centre, rotation, size_m)
    return WristTrack(times, centres, rotations, bottoms, tuple(reasons), mismatch, turns, frame_px, geometry is not None)
