"""The table as the camera sees it: the template's fiducials found, the camera's pose recovered.

`find_fiducials` runs OpenCV's ArUco detector (`cv2.aruco.ArucoDetector`, the board's dictionary,
corners refined on the contour) and keeps the ids of the board (`design.fiducials.BOARD`).
`locate_table` fits the table-to-image homography to every corner found (at least
`MIN_FIDUCIALS` markers), takes the intrinsics given or recovers them from that homography
(`camera_model.Intrinsics.from_homography`), then the camera pose by `cv2.solvePnP` (iterative,
Levenberg-Marquardt) on the same corners. `reprojection_px` is the RMS distance between the
corners found and the corners projected with that pose: a sheet that is not flat, printed at
the wrong scale or a wrong focal length shows there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import cv2
import numpy as np
from numpy.typing import ArrayLike

from orchestrator.design.fiducials import BOARD, DICTIONARY, Fiducial
from orchestrator.vision.camera_model import CameraPose, Intrinsics

MIN_FIDUCIALS = 2     # 8 corners: a homography and a pose, over-determined


class TableNotFound(ValueError):
    """Too few of the template's fiducials are visible to locate the table."""


@dataclass(frozen=True)
class TableView:
    """Where the camera is with respect to the table (see the module docstring)."""

    fiducials: tuple[int, ...]
    reprojection_px: float
    intrinsics: Intrinsics
    pose: CameraPose
    corners_px: dict[int, tuple[tuple[float, float], ...]]

    def to_dict(self) -> dict:
        return {"fiducials": list(self.fiducials), "reprojection_px": round(self.reprojection_px, 3),
                "intrinsics": self.intrinsics.to_dict(), "pose": self.pose.to_dict()}


def _detector() -> cv2.aruco.ArucoDetector:
    parameters = cv2.aruco.DetectorParameters()
    parameters.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_CONTOUR
    return cv2.aruco.ArucoDetector(cv2.aruco.getPredefinedDictionary(DICTIONARY), parameters)


def find_fiducials(image: np.ndarray, board: tuple[Fiducial, ...] = BOARD) -> dict[int, np.ndarray]:
    """{board id: (4, 2) corner pixels} of the board's markers seen in an RGB image."""
    gray = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY) if image.ndim == 3 else image
    corners, ids, _ = _detector().detectMarkers(gray)
    known = {f.id for f in board}
    found: dict[int, np.ndarray] = {}
    for quad, marker in zip(corners, [] if ids is None else ids.ravel(), strict=False):
        if int(marker) in known and int(marker) not in found:
            found[int(marker)] = quad.reshape(4, 2).astype(float)
    return found


def solve_pose(corners_px: Mapping[int, ArrayLike], intrinsics: Intrinsics, ids: tuple[int, ...],
               board: tuple[Fiducial, ...] = BOARD) -> CameraPose:
    """The camera pose from the corners of the fiducials `ids` (`cv2.solvePnP`, refined by
    Levenberg-Marquardt)."""
    by_id = {f.id: f for f in board}
    world = np.concatenate([by_id[i].corners() for i in ids])
    pixels = np.concatenate([np.asarray(corners_px[i], float).reshape(4, 2) for i in ids])
    ok, rvec, tvec = cv2.solvePnP(world, pixels, intrinsics.matrix, None, flags=cv2.SOLVEPNP_ITERATIVE)
    if not ok:
        raise TableNotFound("the camera pose could not be recovered from the fiducials")
    rvec, tvec = cv2.solvePnPRefineLM(world, pixels, intrinsics.matrix, None, rvec, tvec)
    return CameraPose(tuple(rvec.ravel().tolist()), tuple(tvec.ravel().tolist()))  # type: ignore[arg-type]


def locate_table(image: np.ndarray, intrinsics: Intrinsics | None = None,
                 board: tuple[Fiducial, ...] = BOARD) -> TableView:
    """The camera's view of the table (see the module docstring); `TableNotFound` with how many
    fiducials were seen."""
    found = find_fiducials(image, board)
    if len(found) < MIN_FIDUCIALS:
        seen = ", ".join(map(str, sorted(found))) or "none"
        raise TableNotFound(f"{len(found)} of the template's {len(board)} fiducials visible (ids: {seen}); "
                            f"at least {MIN_FIDUCIALS} are needed: is the sheet taped down, lit and in view?")
    by_id = {f.id: f for f in board}
    ids = tuple(sorted(found))
    world = np.concatenate([by_id[i].corners() for i in ids])
    pixels = np.concatenate([found[i] for i in ids])
    height, width = image.shape[:2]
    if intrinsics is None:
        homography, _ = cv2.findHomography(world[:, :2], pixels, 0)
        intrinsics = Intrinsics.from_homography(homography, width, height)
    pose = solve_pose(found, intrinsics, ids, board)
    error = pose.project(world, intrinsics) - pixels
    rms = math.sqrt(float((error ** 2).sum(axis=1).mean()))
    return TableView(ids, rms, intrinsics, pose,
                     {i: tuple(map(tuple, found[i].tolist())) for i in ids})
