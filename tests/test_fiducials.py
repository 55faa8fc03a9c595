"""The template's fiducials: OpenCV's ArUco detector reads every marker of the printed PNG at
its board position (1:1 at 300 dpi), the SVG carries them, a mark that would cover one leaves it
off, the simulated sheet carries the same markers, and the focal length recovered from one view
of a plane matches the camera's (Zhang 2000) where a synthetic camera is known."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from orchestrator.design.fiducials import BOARD, CELLS, marker_cells
from orchestrator.design.protocol import load_layout
from orchestrator.design.template import PNG_DPI, write_template
from orchestrator.vision.camera_model import CameraPose, Intrinsics, IntrinsicsUnknown
from orchestrator.vision.table import find_fiducials
from support.repo import REPO

LAYOUT, _ = load_layout(REPO / "layouts" / "grid20.yaml")


def test_the_board_has_six_distinct_markers_clear_of_every_grid20_cube():
    from orchestrator.design.template import printed_fiducials

    assert len(BOARD) == 6 and len({f.id for f in BOARD}) == 6
    assert printed_fiducials(LAYOUT) == BOARD
    for marker in BOARD:
        cells = marker_cells(marker.id)
        assert cells.shape == (CELLS, CELLS)
        assert cells[0].all() and cells[-1].all() and cells[:, 0].all() and cells[:, -1].all()  # the border


def test_the_printed_png_is_read_at_the_board_positions(tmp_path):
    """Every marker found, each centre within 0.3 mm of where the board puts it (the page's
    pixels mapped back through the sheet frame by a similarity fitted to the six centres)."""
    out = tmp_path / "grid20.png"
    written = write_template(LAYOUT, out, paper="A3")
    assert written == [out]
    image = cv2.cvtColor(cv2.imread(str(out)), cv2.COLOR_BGR2RGB)
    found = find_fiducials(image)
    assert sorted(found) == [f.id for f in BOARD]
    mm_per_px = 25.4 / PNG_DPI
    centres_px = np.array([found[f.id].mean(axis=0) for f in BOARD])
    sheet_mm = np.array([(-1000 * f.y, -1000 * f.x) for f in BOARD])   # drawing.to_sheet
    offset = (sheet_mm - centres_px * mm_per_px).mean(axis=0)
    residual = np.linalg.norm(centres_px * mm_per_px + offset - sheet_mm, axis=1)
    assert residual.max() < 0.3, residual
    side_px = np.linalg.norm(found[0][0] - found[0][1])
    assert abs(side_px * mm_per_px - 1000 * BOARD[0].size_m) < 0.5


def test_the_svg_carries_each_fiducial_and_a_mark_over_one_leaves_it_off(tmp_path):
    out = tmp_path / "grid20.svg"
    write_template(LAYOUT, out, paper="A3")
    text = out.read_text()
    assert text.count('class="fiducial"') == len(BOARD)
    assert all(f'data-aruco-id="{f.id}"' in text for f in BOARD)
    covering = LAYOUT.model_copy(update={"marks": [*LAYOUT.marks, LAYOUT.marks[0].model_copy(
        update={"id": "M99", "x": BOARD[1].x, "y": BOARD[1].y})]})
    out2 = tmp_path / "covered.svg"
    write_template(covering, out2, paper="A3")
    text2 = out2.read_text()
    assert text2.count('class="fiducial"') == len(BOARD) - 1
    assert f'data-aruco-id="{BOARD[1].id}"' not in text2


def test_the_simulated_sheet_is_the_same_drawing():
    from orchestrator.design.raster import SHEET_PX_PER_MM, sheet_image

    sheet = sheet_image()
    found = find_fiducials(np.ascontiguousarray(sheet.rgb))
    assert sorted(found) == [f.id for f in BOARD]
    for f in BOARD:
        row = (sheet.x_max - f.x) * 1000 * SHEET_PX_PER_MM
        col = (sheet.y_max - f.y) * 1000 * SHEET_PX_PER_MM
        centre = found[f.id].mean(axis=0)   # (col, row) pixels, pixel centres at integers
        assert math.dist(centre, (col - 0.5, row - 0.5)) < 1.0, (f.id, centre, col, row)


def _synthetic_homography(f_px: float, tilt_deg: float) -> np.ndarray:
    intrinsics = Intrinsics(f_px, 640, 480, "test")
    rvec = cv2.Rodrigues(np.array([[1, 0, 0], [0, -1, 0], [0, 0, -1.0]]) @ cv2.Rodrigues(
        np.array([math.radians(tilt_deg), 0.2, 0.1]))[0])[0]
    pose = CameraPose(tuple(rvec.ravel()), (0.02, -0.01, 0.5))
    plane = np.array([(x, y, 0.0) for x in (-0.1, 0.0, 0.1) for y in (-0.1, 0.0, 0.1)])
    homography, _ = cv2.findHomography(plane[:, :2], pose.project(plane, intrinsics), 0)
    return homography


@pytest.mark.parametrize("f_px", [300.0, 500.0, 900.0])
def test_the_focal_length_from_one_homography_is_the_cameras(f_px):
    recovered = Intrinsics.from_homography(_synthetic_homography(f_px, 35.0), 640, 480)
    assert abs(recovered.f_px / f_px - 1) < 1e-3, recovered


def test_a_frontal_view_says_that_the_focal_length_cannot_be_told():
    frontal = np.array([[500.0, 0, 319.5], [0, 500.0, 239.5], [0, 0, 1.0]]) @ np.diag([1.0, 1.0, 0.5])
    with pytest.raises(IntrinsicsUnknown, match="pose.fovy_deg"):
        Intrinsics.from_homography(frontal, 640, 480)
