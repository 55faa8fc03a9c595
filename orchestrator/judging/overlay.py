"""Zoom on the mark and the success-height guide, for cameras whose pose is known.

A `CameraPose` is a pinhole camera placed by its position, the point it looks at (the up
direction is the world's z, as MuJoCo's look-at cameras in `sim.scene`), its vertical field
of view and its image size: a point p in the layout frame (metres, table surface z = 0)
projects to u = W/2 + f x_c / z_c, v = H/2 - f y_c / z_c, with f = (H/2) / tan(fovy/2) and
(x_c, y_c, z_c) its coordinates along the camera's right, up and forward axes.

- `zoom_box`: the pixels of a box around the mark, 6 cm each side and from the table to
  10 cm above the success height, widened to the image's aspect ratio;
- `guide_segment`: the success height as a line: two points at z = `min_height_m` (where the
  cube's bottom must be), 6 cm either side of the mark along the camera's horizontal.

Rigs record their fixed cameras' poses with every episode (`videos/<id>/cameras.json`): the
simulated front camera always, other cameras when their rig-profile entry has a `pose`; a
wrist camera moves and has none, and without a pose the keys say why nothing is drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

ZOOM_HALF_M = 0.06
ZOOM_ABOVE_M = 0.10
GUIDE_HALF_M = 0.06
GUIDE_RGB = (255, 220, 0)


@dataclass(frozen=True)
class CameraPose:
    position: tuple[float, float, float]
    target: tuple[float, float, float]
    fovy_deg: float
    width: int
    height: int

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CameraPose:
        return cls(tuple(map(float, data["position"])), tuple(map(float, data["target"])),
                   float(data["fovy_deg"]), int(data["width"]), int(data["height"]))

    def to_dict(self) -> dict[str, Any]:
        return {"position": list(self.position), "target": list(self.target), "fovy_deg": self.fovy_deg,
                "width": self.width, "height": self.height}

    def axes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(right, up, forward) unit vectors of the camera in the layout frame."""
        forward = np.asarray(self.target, float) - np.asarray(self.position, float)
        forward /= np.linalg.norm(forward)
        right = np.cross(forward, [0.0, 0.0, 1.0])
        right /= np.linalg.norm(right)
        return right, np.cross(right, forward), forward

    def project(self, points: Any) -> np.ndarray:
        """Pixel (u, v) of each point (N, 3), in this pose's image size; NaN behind the camera."""
        right, up, forward = self.axes()
        rel = np.atleast_2d(np.asarray(points, float)) - np.asarray(self.position, float)
        z = rel @ forward
        f = (self.height / 2.0) / math.tan(math.radians(self.fovy_deg) / 2.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            u = self.width / 2.0 + f * (rel @ right) / z
            v = self.height / 2.0 - f * (rel @ up) / z
        out = np.stack([u, v], axis=1)
        out[z <= 0] = np.nan
        return out


def zoom_box(pose: CameraPose, x: float, y: float, min_height_m: float) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) pixels around the mark at (x, y), in the pose's image size."""
    corners = [(x + dx, y + dy, z) for dx in (-ZOOM_HALF_M, ZOOM_HALF_M) for dy in (-ZOOM_HALF_M, ZOOM_HALF_M)
               for z in (0.0, min_height_m + ZOOM_ABOVE_M)]
    px = pose.project(corners)
    px = px[~np.isnan(px).any(axis=1)]
    if not len(px):
        return 0, 0, pose.width, pose.height
    left, top = px.min(axis=0)
    right, bottom = px.max(axis=0)
    width, height = right - left, bottom - top
    aspect = pose.width / pose.height
    if width / max(height, 1e-9) < aspect:        # widen to the image's aspect ratio
        grow = height * aspect - width
        left, right = left - grow / 2, right + grow / 2
    else:
        grow = width / aspect - height
        top, bottom = top - grow / 2, bottom + grow / 2
    box = np.clip([left, top, right, bottom], 0, [pose.width, pose.height, pose.width, pose.height])
    return tuple(int(round(b)) for b in box)


def guide_segment(pose: CameraPose, x: float, y: float, min_height_m: float) -> np.ndarray:
    """Two pixels (2, 2): the success height, either side of the mark."""
    right, _, _ = pose.axes()
    along = np.array([right[0], right[1], 0.0])
    along /= np.linalg.norm(along)
    centre = np.array([x, y, min_height_m])
    return pose.project([centre - GUIDE_HALF_M * along, centre + GUIDE_HALF_M * along])


def draw(image: np.ndarray, pose: CameraPose, x: float, y: float, min_height_m: float, *,
         zoom: bool, guide: bool) -> np.ndarray:
    """`image` (a frame of this camera at any scale) with the guide drawn and/or zoomed."""
    import cv2

    h, w = image.shape[:2]
    sx, sy = w / pose.width, h / pose.height
    out = image
    if guide:
        seg = guide_segment(pose, x, y, min_height_m)
        if not np.isnan(seg).any():
            out = np.ascontiguousarray(out.copy())
            (u0, v0), (u1, v1) = seg
            p0, p1 = (int(round(u0 * sx)), int(round(v0 * sy))), (int(round(u1 * sx)), int(round(v1 * sy)))
            # extend across the frame along the same line
            dx, dy = p1[0] - p0[0], p1[1] - p0[1]
            if dx:
                slope = dy / dx
                p0, p1 = (0, int(round(p0[1] - slope * p0[0]))), (w - 1, int(round(p0[1] + slope * (w - 1 - p0[0]))))
            cv2.line(out, p0, p1, GUIDE_RGB, max(1, h // 120), lineType=cv2.LINE_AA)
    if zoom:
        left, top, right, bottom = zoom_box(pose, x, y, min_height_m)
        left, right = int(left * sx), max(int(left * sx) + 2, int(right * sx))
        top, bottom = int(top * sy), max(int(top * sy) + 2, int(bottom * sy))
        out = cv2.resize(out[top:bottom, left:right], (w, h), interpolation=cv2.INTER_CUBIC)
    return out
