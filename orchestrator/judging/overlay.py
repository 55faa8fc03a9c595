"""Zoom on the mark and the success-height guide, for cameras whose pose is known.

A fixed camera's record (`videos/<id>/cameras.json`, a rig profile's camera `pose`: its position,
the point it looks at, its vertical field of view and its image size) is a pinhole camera,
`posed_camera`: `vision.camera_model`'s `CameraPose.look_at` (the up direction is the world's z,
as MuJoCo's look-at cameras in `sim.scene`) and `Intrinsics.from_fovy`. `pixels` projects layout
points (metres, table surface z = 0) to the record's image size, NaN behind the camera.

- `zoom_box`: the pixels of a box around the mark, 6 cm each side and from the table to
  10 cm above the success height, widened to the image's aspect ratio;
- `guide_segment`: the success height as a line: two points at z = `min_height_m` (where the
  cube's bottom must be), 6 cm either side of the mark along the camera's horizontal.

Rigs record their fixed cameras' poses with every episode (`videos/<id>/cameras.json`): the
simulated front camera always, other cameras when their rig-profile entry has a `pose`; a
wrist camera moves and has none, and without a pose the keys say why nothing is drawn.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrator.vision.camera_model import CameraPose, Intrinsics

ZOOM_HALF_M = 0.06
ZOOM_ABOVE_M = 0.10
GUIDE_HALF_M = 0.06
GUIDE_RGB = (255, 220, 0)

Camera = tuple[CameraPose, Intrinsics]


def posed_camera(record: dict[str, Any]) -> Camera:
    """A fixed camera's record (position, target, fovy_deg, width, height) as its pose and intrinsics
    (KeyError, TypeError or ValueError when it is not one; ZeroDivisionError for a zero fovy)."""
    position = tuple(float(v) for v in record["position"])
    target = tuple(float(v) for v in record["target"])
    if len(position) != 3 or len(target) != 3:
        raise ValueError("a position and a target are three numbers each")
    pose = CameraPose.look_at((position[0], position[1], position[2]), (target[0], target[1], target[2]))
    return pose, Intrinsics.from_fovy(float(record["fovy_deg"]), int(record["width"]), int(record["height"]),
                                      "the rig's record")


def pixels(camera: Camera, points: Any) -> np.ndarray:
    """Pixel (u, v) of each point (N, 3), in the camera's image size; NaN behind the camera."""
    pose, intrinsics = camera
    points = np.atleast_2d(np.asarray(points, float))
    out = pose.project(points, intrinsics)
    out[pose.depth(points) <= 0] = np.nan
    return out


def zoom_box(camera: Camera, x: float, y: float, min_height_m: float) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) pixels around the mark at (x, y), in the camera's image size."""
    size = camera[1]
    corners = [(x + dx, y + dy, z) for dx in (-ZOOM_HALF_M, ZOOM_HALF_M) for dy in (-ZOOM_HALF_M, ZOOM_HALF_M)
               for z in (0.0, min_height_m + ZOOM_ABOVE_M)]
    px = pixels(camera, corners)
    px = px[~np.isnan(px).any(axis=1)]
    if not len(px):
        return 0, 0, size.width, size.height
    left, top = px.min(axis=0)
    right, bottom = px.max(axis=0)
    width, height = right - left, bottom - top
    aspect = size.width / size.height
    if width / max(height, 1e-9) < aspect:        # widen to the image's aspect ratio
        grow = height * aspect - width
        left, right = left - grow / 2, right + grow / 2
    else:
        grow = width / aspect - height
        top, bottom = top - grow / 2, bottom + grow / 2
    box = np.clip([left, top, right, bottom], 0, [size.width, size.height, size.width, size.height])
    return int(round(box[0])), int(round(box[1])), int(round(box[2])), int(round(box[3]))


def guide_segment(camera: Camera, x: float, y: float, min_height_m: float) -> np.ndarray:
    """Two pixels (2, 2): the success height, either side of the mark."""
    right = camera[0].rotation[0]                    # the camera's right axis in the layout frame
    along = np.array([right[0], right[1], 0.0])
    along /= np.linalg.norm(along)
    centre = np.array([x, y, min_height_m])
    return pixels(camera, [centre - GUIDE_HALF_M * along, centre + GUIDE_HALF_M * along])


def draw(image: np.ndarray, camera: Camera, x: float, y: float, min_height_m: float, *,
         zoom: bool, guide: bool) -> np.ndarray:
    """`image` (a frame of this camera at any scale) with the guide drawn and/or zoomed."""
    import cv2

    h, w = image.shape[:2]
    sx, sy = w / camera[1].width, h / camera[1].height
    out = image
    if guide:
        seg = guide_segment(camera, x, y, min_height_m)
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
        left, top, right, bottom = zoom_box(camera, x, y, min_height_m)
        left, right = int(left * sx), max(int(left * sx) + 2, int(right * sx))
        top, bottom = int(top * sy), max(int(top * sy) + 2, int(bottom * sy))
        out = cv2.resize(out[top:bottom, left:right], (w, h), interpolation=cv2.INTER_CUBIC)
    return out
