"""The template's fiducials: ArUco markers at known places on the sheet, read by the camera.

Each marker is one of OpenCV's predefined 4x4 ArUco markers (`cv2.aruco.DICT_4X4_50`; Garrido-
Jurado et al. 2014, "Automatic generation and detection of highly reliable fiducial markers
under occlusion", Pattern Recognition 47(6)). A marker of side `size_m` is 6 x 6 cells: a black
border one cell wide around the 4 x 4 code; a white quiet zone of `QUIET_CELLS` cells around it
is part of the drawing, so the border reads against any table.

The board (`BOARD`) is the same on every sheet, in the layout frame (metres; x forward from the
shoulder-pan axis, y to the robot's left, as the marks): two rows of three markers, one row
nearer the base than any mark and one beyond, outside the workspace where neither the arm at rest
nor a cube on a mark covers them (`overlaps` tells a layout whose marks would). Because the board
does not depend on the layout, the simulated and twin tables carry it without knowing the
campaign, and a camera can be checked before a layout is chosen.

Orientation. Seen from above with the robot at the bottom of the sheet, a marker's image rows run
down the page (-x) and its columns to the right (-y), as the sheet frame (`drawing.to_sheet`).
Corner order is ArUco's: top-left, top-right, bottom-right, bottom-left of the marker image.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import cv2
import numpy as np

from orchestrator.design.drawing import Group, Shape, to_sheet

DICTIONARY = cv2.aruco.DICT_4X4_50
CELLS = 6            # 4 x 4 code + a one-cell black border
QUIET_CELLS = 1      # white margin around the border, part of the drawing


@dataclass(frozen=True)
class Fiducial:
    """One marker: ArUco `id`, centre (`x`, `y`) in the layout frame, side `size_m` (border
    included, quiet zone excluded)."""

    id: int
    x: float
    y: float
    size_m: float

    def corners(self) -> np.ndarray:
        """(4, 3) layout-frame points of the marker's corners (z = 0), in ArUco's order."""
        h = self.size_m / 2.0
        return np.array([(self.x + h, self.y + h, 0.0), (self.x + h, self.y - h, 0.0),
                         (self.x - h, self.y - h, 0.0), (self.x - h, self.y + h, 0.0)])

    def extent(self) -> tuple[float, float, float, float]:
        """(x_min, x_max, y_min, y_max) of the marker with its quiet zone, metres."""
        h = self.size_m / 2.0 * (CELLS + 2 * QUIET_CELLS) / CELLS
        return self.x - h, self.x + h, self.y - h, self.y + h


MARKER_SIZE_M = 0.036
NEAR_ROW_X = 0.119     # between the base's +x arrow (to x = 0.084) and grid20's nearest cubes (x = 0.145)
FAR_ROW_X = 0.321      # beyond grid20's farthest cubes (x = 0.295)
ROW_Y = (0.066, 0.0, -0.066)  # grid20 and the board (quiet zones included) fit one A4 page
BOARD: tuple[Fiducial, ...] = tuple(
    Fiducial(i, x, y, MARKER_SIZE_M)
    for i, (x, y) in enumerate((x, y) for x in (FAR_ROW_X, NEAR_ROW_X) for y in ROW_Y))


@functools.cache
def marker_cells(marker_id: int) -> np.ndarray:
    """(CELLS, CELLS) array of 1 (black) and 0 (white): the marker as OpenCV draws it."""
    dictionary = cv2.aruco.getPredefinedDictionary(DICTIONARY)
    image = cv2.aruco.generateImageMarker(dictionary, marker_id, CELLS)
    return (image < 128).astype(np.uint8)


def cell_squares(fiducial: Fiducial) -> list[tuple[float, float, float]]:
    """Centre (x, y) and side of every black cell of `fiducial`, layout frame, metres."""
    cell = fiducial.size_m / CELLS
    top, left = fiducial.x + fiducial.size_m / 2.0, fiducial.y + fiducial.size_m / 2.0
    cells = marker_cells(fiducial.id)
    return [(top - (r + 0.5) * cell, left - (c + 0.5) * cell, cell)
            for r in range(CELLS) for c in range(CELLS) if cells[r, c]]


def overlaps(x: float, y: float, half_m: float, board: tuple[Fiducial, ...] = BOARD) -> list[int]:
    """Ids of the markers (quiet zone included) that a square of half-side `half_m` at (x, y)
    would cover: a mark there would hide them from the camera."""
    hits = []
    for f in board:
        x0, x1, y0, y1 = f.extent()
        if x - half_m < x1 and x + half_m > x0 and y - half_m < y1 and y + half_m > y0:
            hits.append(f.id)
    return hits


def _rect(x0: float, x1: float, y0: float, y1: float) -> list[tuple[float, float]]:
    return [to_sheet(x1, y1), to_sheet(x1, y0), to_sheet(x0, y0), to_sheet(x0, y1)]


def fiducial_groups(board: tuple[Fiducial, ...] = BOARD) -> list[Group]:
    """The board as drawing groups (sheet mm): per marker its white quiet zone and its black
    cells, a row's neighbouring cells merged into one rectangle (no seams inside a run)."""
    groups = []
    for f in board:
        cell = f.size_m / CELLS
        top, left = f.x + f.size_m / 2.0, f.y + f.size_m / 2.0
        shapes = [Shape("polygon", _rect(*f.extent()), stroke="none", width=0.0, fill="#ffffff")]
        cells = marker_cells(f.id)
        for r in range(CELLS):
            c = 0
            while c < CELLS:
                if not cells[r, c]:
                    c += 1
                    continue
                end = c
                while end < CELLS and cells[r, end]:
                    end += 1
                shapes.append(Shape("polygon", _rect(top - (r + 1) * cell, top - r * cell,
                                                     left - end * cell, left - c * cell),
                                    stroke="none", width=0.0, fill="#000000"))
                c = end
        u, v = to_sheet(f.x - f.size_m / 2.0, f.y)
        shapes.append(Shape("text", [(u, v + 2.6)], text=f"fiducial {f.id}", size=2.2, stroke="none"))
        groups.append(Group(id=f"fiducial-{f.id}", shapes=shapes, css_class="fiducial",
                            data={"aruco-id": str(f.id), "dictionary": "DICT_4X4_50",
                                  "x-m": repr(f.x), "y-m": repr(f.y), "size-mm": f"{f.size_m * 1000:g}"}))
    return groups
