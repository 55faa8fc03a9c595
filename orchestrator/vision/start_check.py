"""The start-state check: before a trial, is exactly one cube on this trial's mark, within the
pre-registered tolerance, with nothing else on the sheet, and is the camera where it was?

`check_start` measures one image of the located camera (`table.TableView`) against a mark:
- no cube-coloured blob of a cube's size: "no cube in view of camera front";
- more than one: "2 cubes in view; exactly one goes on M07"; a blob that one fitted cube leaves
  more than `MISMATCH_FRACTION` of a cube's area unexplained: two cubes touching (or in line of
  sight), or something of the cube's colour beside it;
- one cube, measured (`cube.fit_cube`): its offset from the mark in the layout frame (`dx_mm`
  forward, `dy_mm` to the robot's left, as the marks) and its yaw against the mark's, reduced
  by the cube's symmetry to (-45, 45] (`dyaw_deg`). It passes when the distance is at most
  `tolerance_mm` and the yaw at most `tolerance_deg`; nearer another mark of the layout, the
  line names that mark ("cube on M06, not on M07");
- with a reference image of the session's empty table (`reference.CameraReference`), anything
  else on the sheet: pixels that differ from the reference (`FOREIGN_LEVEL` grey levels) outside
  the cube's silhouette, more than `FOREIGN_FRACTION` of a cube's area.
`camera_moved` compares the camera pose with the reference's, both solved from the fiducials
seen in both views: more than `CAMERA_MOVE_MM` or `CAMERA_TURN_DEG` stops the session (a moved
camera invalidates every later measurement).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import cv2
import numpy as np

from orchestrator.design.fiducials import BOARD, Fiducial
from orchestrator.design.protocol import Layout, Mark
from orchestrator.vision.cube import RED, CubeColour, cube_area_px, find_blobs, fit_cube, reduce_yaw
from orchestrator.vision.table import MIN_FIDUCIALS, TableView, solve_pose

DEFAULT_TOLERANCE_MM = 5.0
DEFAULT_TOLERANCE_DEG = 10.0
CAMERA_MOVE_MM = 2.5
CAMERA_TURN_DEG = 0.5
MISMATCH_FRACTION = 0.25   # of a cube's area: a blob the fitted cube leaves that uncovered is not one cube
FOREIGN_LEVEL = 40
FOREIGN_FRACTION = 0.25


@dataclass(frozen=True)
class StartCheck:
    """One measured start state; `to_json` is `camera check --json`'s contract."""

    camera: str
    fiducials: int
    reprojection_px: float | None   # None: the table was not found
    mark: str
    cube_found: bool
    dx_mm: float | None
    dy_mm: float | None
    dyaw_deg: float | None
    passes: bool
    tolerance_mm: float
    tolerance_deg: float
    problem: str | None = None
    cubes: int = 0
    foreign_px: int = 0

    def to_json(self) -> dict:
        out = asdict(self)
        for key in ("dx_mm", "dy_mm", "dyaw_deg"):
            if out[key] is not None:
                out[key] = round(out[key], 2)
        out["reprojection_px"] = None if self.reprojection_px is None else round(self.reprojection_px, 3)
        return out

    @classmethod
    def unmeasured(cls, camera: str, mark: str | None, tolerance_mm: float, tolerance_deg: float,
                   problem: str) -> StartCheck:
        """The check when the camera could not see the table: it does not pass, and says why."""
        return cls(camera=camera, fiducials=0, reprojection_px=None, mark=mark or "", cube_found=False, dx_mm=None,
                   dy_mm=None, dyaw_deg=None, passes=False, tolerance_mm=tolerance_mm, tolerance_deg=tolerance_deg,
                   problem=problem)

    @property
    def offset_mm(self) -> tuple[float, float] | None:
        """(dx_mm, dy_mm) from the mark's centre when a cube was found, else None."""
        if self.dx_mm is None or self.dy_mm is None:
            return None
        return self.dx_mm, self.dy_mm

    @property
    def line(self) -> str:
        """What the console says: the problem, or that the cube is on its mark."""
        if self.problem:
            return self.problem
        distance = math.hypot(self.dx_mm or 0.0, self.dy_mm or 0.0)
        return (f"cube on {self.mark}: {distance:.1f} mm from its centre, turned {abs(self.dyaw_deg or 0.0):.0f} "
                f"degrees (tolerance {self.tolerance_mm:g} mm, {self.tolerance_deg:g} degrees)")


def offset_words(dx_mm: float | None, dy_mm: float | None, dyaw_deg: float | None, mark: str) -> str:
    """'cube 7 mm left and 3 mm back of M07, turned 12 degrees' (left/right: the robot's;
    forward/back: away from / towards the robot)."""
    if dx_mm is None or dy_mm is None or dyaw_deg is None:
        return "not measured"
    parts = []
    if round(abs(dy_mm)) >= 1:
        parts.append(f"{abs(dy_mm):.0f} mm {'left' if dy_mm > 0 else 'right'}")
    if round(abs(dx_mm)) >= 1:
        parts.append(f"{abs(dx_mm):.0f} mm {'forward' if dx_mm > 0 else 'back'}")
    where = f"{' and '.join(parts)} of {mark}" if parts else f"on {mark}"
    turned = f", turned {abs(dyaw_deg):.0f} degrees" if round(abs(dyaw_deg)) >= 1 else ""
    return f"cube {where}{turned}"


def _foreign_pixels(image: np.ndarray, reference: np.ndarray, view: TableView, sheet: np.ndarray,
                    cube_masks: list[np.ndarray]) -> int:
    """Pixels of the sheet (`sheet`: its (4, 3) corners) that differ from the reference outside
    the cube blobs (dilated by 3 px: their edges and the shadow line)."""
    if reference.shape != image.shape:
        return 0
    grey = lambda im: cv2.GaussianBlur(cv2.cvtColor(im, cv2.COLOR_RGB2GRAY), (5, 5), 0)  # noqa: E731
    changed = cv2.absdiff(grey(image), grey(reference)) > FOREIGN_LEVEL
    region = np.zeros(changed.shape, np.uint8)
    cv2.fillConvexPoly(region, view.pose.project(sheet, view.intrinsics).astype(np.int32), 1)
    keep_out = np.zeros(changed.shape, np.uint8)
    for blob in cube_masks:
        keep_out |= np.asarray(cv2.dilate(blob, np.ones((7, 7), np.uint8)), np.uint8)
    return int((changed & (region > 0) & (keep_out == 0)).sum())


def check_start(image: np.ndarray, view: TableView, mark: Mark, layout: Layout, *,
                camera: str = "front", tolerance_mm: float = DEFAULT_TOLERANCE_MM,
                tolerance_deg: float = DEFAULT_TOLERANCE_DEG, colour: CubeColour = RED,
                reference: np.ndarray | None = None, sheet: np.ndarray | None = None) -> StartCheck:
    """The start state in `image` against `mark` (see the module docstring)."""
    size = layout.cube.size_m
    base: dict[str, Any] = dict(camera=camera, fiducials=len(view.fiducials), reprojection_px=view.reprojection_px,
                mark=mark.id, tolerance_mm=tolerance_mm, tolerance_deg=tolerance_deg)
    blobs = find_blobs(image, view, size, (mark.x, mark.y), colour)
    if not blobs:
        return StartCheck(**base, cube_found=False, dx_mm=None, dy_mm=None, dyaw_deg=None, passes=False,
                          problem=f"no cube in view of camera {camera} (looking for {mark.id})")
    fits = [fit_cube(blob, view, size) for blob in blobs]
    fit = min(fits, key=lambda f: math.hypot(f.x - mark.x, f.y - mark.y))
    dx, dy = 1000.0 * (fit.x - mark.x), 1000.0 * (fit.y - mark.y)
    dyaw = reduce_yaw(fit.yaw_deg - mark.yaw_deg)
    foreign = _foreign_pixels(image, reference, view, sheet, blobs) if reference is not None and sheet is not None else 0
    problem = None
    if len(blobs) > 1:
        problem = f"{len(blobs)} cubes in view of camera {camera}; exactly one goes on {mark.id}"
    elif fit.mismatch_px > MISMATCH_FRACTION * cube_area_px(view, size, fit.x, fit.y, image.shape[:2]):
        problem = (f"what camera {camera} sees near {mark.id} does not look like one cube (two cubes "
                   "touching, or something of the cube's colour beside it)")
    elif foreign > FOREIGN_FRACTION * cube_area_px(view, size, mark.x, mark.y, image.shape[:2]):
        problem = (f"something besides the cube is on the sheet ({foreign} px differ from the empty "
                   f"table); clear it before {mark.id}")
    elif math.hypot(dx, dy) > tolerance_mm or abs(dyaw) > tolerance_deg:
        problem = offset_words(dx, dy, dyaw, mark.id)
        nearest = min(layout.marks, key=lambda m: math.hypot(fit.x - m.x, fit.y - m.y))
        if nearest.id != mark.id and math.hypot(fit.x - nearest.x, fit.y - nearest.y) * 1000 <= tolerance_mm:
            problem = f"cube on {nearest.id}, not on {mark.id}"
        problem += f" (tolerance {tolerance_mm:g} mm, {tolerance_deg:g} degrees)"
    return StartCheck(**base, cube_found=True, dx_mm=dx, dy_mm=dy, dyaw_deg=dyaw, passes=problem is None,
                      problem=problem, cubes=len(blobs), foreign_px=foreign)


REST_SHADOW_HALF_WIDTH_M = 0.045   # the folded arm's half width about its plane at rest (y = 0)


def in_rest_shadow(fiducial: Fiducial, layout: Layout) -> bool:
    """Whether the arm at rest may hide `fiducial` from a camera facing the robot: a marker of the
    row nearer the base than every mark, within `REST_SHADOW_HALF_WIDTH_M` of the arm's plane
    (y = 0). The folded arm stands over the base there, and the simulator's and the twin's front
    camera see the near row's middle marker behind it."""
    return fiducial.x < min(m.x for m in layout.marks) and abs(fiducial.y) < REST_SHADOW_HALF_WIDTH_M


def reference_problem(image: np.ndarray, view: TableView, layout: Layout, sheet: np.ndarray,
                      camera: str = "front", colour: CubeColour = RED) -> str | None:
    """Why `image` cannot be stored as the session's reference of the empty table, or None: a
    fiducial of the template outside the arm's rest shadow (`in_rest_shadow`) not seen (covered:
    by the arm sagged over the sheet, a hand, a cube), or a blob of the cube's colour and size on the sheet (`sheet`: its (4, 3) corners
    in the layout frame). A reference with either makes every later check compare against it:
    "something besides the cube is on the sheet", or a camera that "cannot tell whether it moved"."""
    outside = [f.id for f in BOARD if not in_rest_shadow(f, layout)]
    missing = sorted(set(outside) - set(view.fiducials))
    if missing:
        return (f"camera {camera} sees {len(set(outside) & set(view.fiducials))} of the template's {len(outside)} "
                f"fiducials outside the arm's rest shadow (not {', '.join(map(str, missing))}): the arm (sagged over "
                "the sheet?), a hand or a cube covers them; the reference needs every one: put the arm at rest, "
                "clear the sheet, then check again")
    x_lo, x_hi = float(sheet[:, 0].min()), float(sheet[:, 0].max())
    y_lo, y_hi = float(sheet[:, 1].min()), float(sheet[:, 1].max())
    centre = (sum(m.x for m in layout.marks) / len(layout.marks), sum(m.y for m in layout.marks) / len(layout.marks))
    for blob in find_blobs(image, view, layout.cube.size_m, centre, colour):
        fit = fit_cube(blob, view, layout.cube.size_m)
        if x_lo <= fit.x <= x_hi and y_lo <= fit.y <= y_hi:
            near = min(layout.marks, key=lambda m: math.hypot(fit.x - m.x, fit.y - m.y))
            return (f"a cube is in view of camera {camera} (near {near.id}): the reference is the empty table; "
                    "take the cube off the sheet, then check again")
    return None


def camera_moved(reference: TableView, now: TableView, camera: str = "front") -> str | None:
    """One line when the camera moved beyond `CAMERA_MOVE_MM` / `CAMERA_TURN_DEG` since the
    reference view; None when it is where it was."""
    common = tuple(sorted(set(reference.fiducials) & set(now.fiducials)))
    if len(common) < MIN_FIDUCIALS:
        return (f"camera {camera} sees {len(common)} of the fiducials it saw in its reference (the arm or "
                "something else covers them, or the camera moved): it cannot tell whether it moved")
    # Both poses from the same fiducials: a marker covered in one view (the arm at rest) changes
    # how well the pose is determined, not where the camera is.
    before = solve_pose(reference.corners_px, reference.intrinsics, common)
    after = solve_pose(now.corners_px, now.intrinsics, common)
    moved_mm, turned_deg = before.difference(after)
    if moved_mm <= CAMERA_MOVE_MM and turned_deg <= CAMERA_TURN_DEG:
        return None
    return moved_line(camera, moved_mm, turned_deg)


def moved_line(camera: str, moved_mm: float, turned_deg: float) -> str:
    """The refusal of a moved camera, each figure with the digits that show it against its limit
    (`against_limit`: "turned 0.54 degrees (limits ..., 0.5 degrees)", never "turned 0.5")."""
    return (f"camera {camera} moved {against_limit(moved_mm, CAMERA_MOVE_MM)} mm and turned "
            f"{against_limit(turned_deg, CAMERA_TURN_DEG)} degrees since its reference (limits {CAMERA_MOVE_MM:g} mm, "
            f"{CAMERA_TURN_DEG:g} degrees): put it back, or check the camera again with `orchestrator camera check` "
            "and start a new session")


def against_limit(value: float, limit: float, digits: int = 1, most: int = 4) -> str:
    """`value` with `digits` decimals, more (up to `most`) while that would print a value above
    `limit` as the limit or less: 0.54 against 0.5 is "0.54", 1.23 against 2.5 is "1.2"."""
    text = f"{value:.{digits}f}"
    while value > limit and float(text) <= limit and digits < most:
        digits += 1
        text = f"{value:.{digits}f}"
    return text
