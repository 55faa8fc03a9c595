"""The cube on the table, measured from one image of the located camera (`table.TableView`).

Finding it. The cube is told from the table by its colour (`CubeColour`: a hue band, minimum
saturation and value in OpenCV's HSV; the shipped cube is red): the colour mask's connected
blobs larger than `MIN_BLOB_FRACTION` of a cube's projected area are the cubes in view.

Measuring it. The cube is a box of side `size_m` standing on the table at (x, y, yaw). Its
silhouette is the convex hull of its 8 projected corners, drawn with `SUPERSAMPLE`x sub-pixel
coverage; the fit minimises the pixels where silhouette and blob (its convex hull: the printed
top-face mark and specular highlights do not punch holes) disagree, with Nelder-Mead (SciPy's
`minimize`) from the blob centroid cast onto the plane of the cube's centre and the best of a
coarse yaw grid. Yaw is returned in (-45, 45] (a cube looks the same every 90 degrees).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from orchestrator.vision.camera_model import Pinhole
from orchestrator.vision.table import TableView

MIN_BLOB_FRACTION = 0.3
SUPERSAMPLE = 4
YAW_GRID_DEG = (0.0, 15.0, 30.0, 45.0, 60.0, 75.0)


@dataclass(frozen=True)
class CubeColour:
    """HSV band of the cube (OpenCV: hue 0-180, saturation and value 0-255). A band whose
    `hue_low` is above its `hue_high` wraps through 0 (red)."""

    hue_low: int = 170
    hue_high: int = 10
    min_saturation: int = 120
    min_value: int = 50

    def mask(self, image: np.ndarray) -> np.ndarray:
        hsv = cv2.cvtColor(image, cv2.COLOR_RGB2HSV)
        hue = hsv[..., 0]
        band = (hue >= self.hue_low) | (hue <= self.hue_high) if self.hue_low > self.hue_high \
            else (hue >= self.hue_low) & (hue <= self.hue_high)
        return (band & (hsv[..., 1] >= self.min_saturation) & (hsv[..., 2] >= self.min_value)).astype(np.uint8)


RED = CubeColour()   # the shipped cube's


@dataclass(frozen=True)
class CubeFit:
    """Where the cube is: centre (`x`, `y`) in the layout frame (metres), `yaw_deg` in (-45, 45],
    and `mismatch_px`, the pixels where the fitted silhouette and the blob disagree."""

    x: float
    y: float
    yaw_deg: float
    mismatch_px: float
    silhouette: np.ndarray          # (H, W) float coverage of the fitted cube


def reduce_yaw(yaw_deg: float) -> float:
    """`yaw_deg` modulo the cube's 90-degree symmetry, in (-45, 45]."""
    reduced = math.fmod(yaw_deg, 90.0)
    if reduced <= -45.0:
        reduced += 90.0
    elif reduced > 45.0:
        reduced -= 90.0
    return reduced


def _corners(size_m: float) -> np.ndarray:
    h = size_m / 2.0
    return np.array([(a, b, c) for a in (-h, h) for b in (-h, h) for c in (0.0, size_m)])


def fixed_point(pixels: np.ndarray) -> np.ndarray:
    """Pixels (..., 2) in the drawing's fixed point: supersampled pixels (pixel k is supersampled
    pixels SUPERSAMPLE*k .. SUPERSAMPLE*k + SUPERSAMPLE-1, INTER_AREA's blocks, centred at
    SUPERSAMPLE*k + (SUPERSAMPLE-1)/2) in sixteenths (OpenCV's `shift=4`)."""
    return np.round(np.asarray(pixels, float) * (SUPERSAMPLE * 16) + (SUPERSAMPLE - 1) * 8).astype(np.int32)


def draw(fixed: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """(h, w) uint8 coverage (255: covered) of the convex hull of the `fixed_point` pixels in the
    image region `box` (x0, y0, w, h)."""
    x0, y0, w, h = box
    hull = cv2.convexHull(fixed - np.array([x0 * SUPERSAMPLE * 16, y0 * SUPERSAMPLE * 16], np.int32))
    big = np.zeros((h * SUPERSAMPLE, w * SUPERSAMPLE), np.uint8)
    cv2.fillConvexPoly(big, hull, 255, lineType=cv2.LINE_8, shift=4)
    return cv2.resize(big, (w, h), interpolation=cv2.INTER_AREA)


def coverage(pixels: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """(h, w) sub-pixel coverage in [0, 1] of the convex hull of `pixels` (image coordinates) in
    the image region `box` (x0, y0, w, h): the silhouette's drawing (module docstring)."""
    return draw(fixed_point(pixels), box).astype(float) / 255.0


def hull_boxes(pixels: np.ndarray, within: tuple[int, int, int, int]) -> list[tuple[int, int, int, int] | None]:
    """For each set of pixels (M, N, 2), the region (x0, y0, w, h) outside which their hull covers
    nothing, clipped to the region `within` (None: they do not meet). The coverage drawn in it
    equals the coverage drawn in `within`, cut to it: the fits draw only there."""
    wx, wy, ww, wh = within
    pixels = np.asarray(pixels, float)
    low, high = pixels.min(axis=1), pixels.max(axis=1)
    boxes: list[tuple[int, int, int, int] | None] = []
    for (lx, ly), (hx, hy) in zip(low.tolist(), high.tolist(), strict=True):
        if not all(math.isfinite(v) for v in (lx, ly, hx, hy)):
            boxes.append(within)
            continue
        x0, y0 = max(math.floor(lx) - 1, wx), max(math.floor(ly) - 1, wy)
        x1, y1 = min(math.ceil(hx) + 2, wx + ww), min(math.ceil(hy) + 2, wy + wh)
        boxes.append(None if x1 <= x0 or y1 <= y0 else (x0, y0, x1 - x0, y1 - y0))
    return boxes


def hull_box(pixels: np.ndarray, within: tuple[int, int, int, int]) -> tuple[int, int, int, int] | None:
    """`hull_boxes` of one set of pixels (N, 2)."""
    return hull_boxes(np.asarray(pixels, float)[None], within)[0]


def _standing(camera: Pinhole, size_m: float, x: float, y: float, yaw_deg: float) -> np.ndarray:
    """The 8 corners' pixels of a cube standing at (x, y, yaw)."""
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    rotation = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
    return camera.project(_corners(size_m) @ rotation + [x, y, 0.0])


def silhouette(view: TableView, size_m: float, x: float, y: float, yaw_deg: float,
               shape: tuple[int, int]) -> np.ndarray:
    """(H, W) coverage in [0, 1] of a cube standing at (x, y, yaw) as `view`'s camera sees it."""
    height, width = shape
    out = np.zeros((height, width))
    pixels = _standing(Pinhole.of(view.pose, view.intrinsics), size_m, x, y, yaw_deg)
    box = hull_box(pixels, (0, 0, width, height))
    if box is not None:
        x0, y0, w, h = box
        out[y0:y0 + h, x0:x0 + w] = coverage(pixels, box)
    return out


def cube_area_px(view: TableView, size_m: float, x: float, y: float, shape: tuple[int, int]) -> float:
    """Pixels a cube at (x, y) covers (at yaw 0): the scale for blob sizes."""
    pixels = _standing(Pinhole.of(view.pose, view.intrinsics), size_m, x, y, 0.0)
    box = hull_box(pixels, (0, 0, shape[1], shape[0]))
    return 0.0 if box is None else float(coverage(pixels, box).sum())


def find_blobs(image: np.ndarray, view: TableView, size_m: float, at: tuple[float, float],
               colour: CubeColour = RED) -> list[np.ndarray]:
    """Filled convex hulls (H, W uint8) of the colour blobs big enough to be a cube, largest first."""
    mask = colour.mask(image)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask)
    least = MIN_BLOB_FRACTION * cube_area_px(view, size_m, at[0], at[1], mask.shape)
    blobs = []
    for k in sorted(range(1, count), key=lambda k: -stats[k, cv2.CC_STAT_AREA]):
        if stats[k, cv2.CC_STAT_AREA] < least:
            break
        contours, _ = cv2.findContours((labels == k).astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
        hull = np.zeros(mask.shape, np.uint8)
        cv2.fillConvexPoly(hull, cv2.convexHull(np.concatenate(contours)), 1)
        blobs.append(hull)
    return blobs


def fit_cube(blob: np.ndarray, view: TableView, size_m: float) -> CubeFit:
    """The cube pose whose silhouette best matches `blob` (see the module docstring)."""
    target = blob.astype(float)
    moments = cv2.moments(blob, binaryImage=True)
    centroid = (moments["m10"] / moments["m00"], moments["m01"] / moments["m00"])
    x0, y0 = view.pose.ray_to_plane(centroid, size_m / 2.0, view.intrinsics)[:2]

    total, image = float(target.sum()), (0, 0, target.shape[1], target.shape[0])
    camera = Pinhole.of(view.pose, view.intrinsics)

    def cost(p: np.ndarray) -> float:
        """|silhouette - blob| summed over the image: inside the silhouette's box, plus the blob outside it."""
        pixels = _standing(camera, size_m, p[0], p[1], p[2])
        box = hull_box(pixels, image)
        if box is None:
            return total
        bx, by, w, h = box
        inside = target[by:by + h, bx:bx + w]
        return float(np.abs(coverage(pixels, box) - inside).sum() + total - inside.sum())

    yaw0 = min(YAW_GRID_DEG, key=lambda a: cost(np.array([x0, y0, a])))
    step = size_m / 10.0
    start = np.array([x0, y0, yaw0])
    simplex = np.array([start, start + [step, 0, 0], start + [0, step, 0], start + [0, 0, 8.0]])
    from scipy.optimize import minimize  # here: the module's readers need no fit (0.35 s of import)
    result = minimize(cost, start, method="Nelder-Mead",
                      options={"xatol": 1e-4, "fatol": 0.05, "initial_simplex": simplex, "maxiter": 400})
    x, y, yaw = (float(v) for v in result.x)
    return CubeFit(x, y, reduce_yaw(yaw), float(result.fun), silhouette(view, size_m, x, y, yaw, target.shape))
