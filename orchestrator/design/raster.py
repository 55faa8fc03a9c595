"""The template's drawing as an image of the table: the texture of the simulated and twin sheet.

`rasterize` draws drawing groups (sheet millimetres, `drawing.to_sheet`) into an RGB image at
`px_per_mm`, with OpenCV's anti-aliased polygon fill and lines (text is left out: a camera does
not read it). `sheet_image` is the sheet every simulated table carries: white paper under the
fiducial board (`fiducials.BOARD`) with `SHEET_MARGIN_M` around it. The board does not depend on
the layout, so the simulator and the twin draw it without knowing the campaign; the marks are
not on the simulated sheet (the cube stands where the mark would be).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import cv2
import numpy as np

from orchestrator.design.drawing import Group, to_sheet
from orchestrator.design.fiducials import BOARD, fiducial_groups

SHEET_PX_PER_MM = 2.0          # 1 marker cell (6.7 mm) = 13 texels
SHEET_MARGIN_M = 0.015
_SHIFT = 4                     # OpenCV's fixed-point bits for sub-pixel vertices


@dataclass(frozen=True)
class SheetImage:
    """An RGB image of the table region x in [x_min, x_max], y in [y_min, y_max] (metres, layout
    frame): row 0 along x = x_max, column 0 along y = y_max (the sheet seen from above, robot at
    the bottom)."""

    rgb: np.ndarray
    x_min: float
    x_max: float
    y_min: float
    y_max: float


def _colour(name: str) -> tuple[int, int, int]:
    text = name.lstrip("#")
    return tuple(int(text[i:i + 2], 16) for i in (0, 2, 4))   # type: ignore[return-value]


def rasterize(groups: list[Group], origin_uv: tuple[float, float], size_px: tuple[int, int],
              px_per_mm: float, background: str = "#ffffff") -> np.ndarray:
    """`groups` drawn in order into a (height, width, 3) RGB image whose pixel (0, 0) is the
    sheet point `origin_uv` (mm) and whose pixels are 1 / `px_per_mm` mm."""
    width, height = size_px
    image = np.empty((height, width, 3), np.uint8)
    image[:] = _colour(background)
    u0, v0 = origin_uv
    scale = px_per_mm * (1 << _SHIFT)
    for group in groups:
        for shape in group.shapes:
            if shape.kind == "text":
                continue
            fixed = np.array([[(u - u0) * scale, (v - v0) * scale] for u, v in shape.points], np.int64)
            pts = fixed.astype(np.int32).reshape(-1, 1, 2)
            if shape.kind == "polygon" and shape.fill and shape.fill != "none":
                cv2.fillPoly(image, [pts], _colour(shape.fill), lineType=cv2.LINE_AA, shift=_SHIFT)
            if shape.stroke != "none" and shape.width > 0:
                thickness = max(1, round(shape.width * px_per_mm))
                cv2.polylines(image, [pts], shape.kind == "polygon", _colour(shape.stroke),
                              thickness=thickness, lineType=cv2.LINE_AA, shift=_SHIFT)
    return image


@functools.cache
def sheet_image(px_per_mm: float = SHEET_PX_PER_MM) -> SheetImage:
    """The simulated tables' sheet (see the module docstring)."""
    extents = [f.extent() for f in BOARD]
    x_min = min(e[0] for e in extents) - SHEET_MARGIN_M
    x_max = max(e[1] for e in extents) + SHEET_MARGIN_M
    y_min = min(e[2] for e in extents) - SHEET_MARGIN_M
    y_max = max(e[3] for e in extents) + SHEET_MARGIN_M
    width = round((y_max - y_min) * 1000 * px_per_mm)
    height = round((x_max - x_min) * 1000 * px_per_mm)
    rgb = rasterize(fiducial_groups(BOARD), to_sheet(x_max, y_max), (width, height), px_per_mm)
    rgb.setflags(write=False)
    return SheetImage(rgb, x_min, x_max, y_min, y_max)


def sheet_corners() -> np.ndarray:
    """(4, 3) layout-frame corners (z = 0) of the simulated tables' sheet: the region the
    start-state check watches for anything besides the cube."""
    sheet = sheet_image()
    return np.array([(sheet.x_max, sheet.y_max, 0.0), (sheet.x_max, sheet.y_min, 0.0),
                     (sheet.x_min, sheet.y_min, 0.0), (sheet.x_min, sheet.y_max, 0.0)])
