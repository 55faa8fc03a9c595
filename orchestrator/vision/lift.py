"""The front camera measures the lift: the cube's bottom above the table in every video frame of
an episode, with an error band from the fit (`measure_lift` -> `lift_track.LiftTrack`).

Why a prior. One camera sees where the cube is across its line of sight to a fraction of a
pixel, but its distance only from its size in the image: at the simulator's 320x240 a 3 cm cube
is about 20 px wide, and a pixel of size is 2 cm of distance. So the cube's horizontal position
comes from elsewhere and the camera measures the height along its line of sight:
- *on the table* (the gripper not closed on it): where the cube stood when last fitted on the
  table (`cube.fit_cube`, 1-2 mm at 320x240), fitted again when it is no longer there;
- *in the jaws* (`sim.holding.closed_on_cube` on the recorded gripper): the cube keeps the
  position and orientation relative to the gripper that it had when the squeeze began
  (the gripper's pose from the recorded joints, `sim.fk.grasp_pose`, the cube's from its last
  fit on the table), except along the vertical: a cube sinks or slips in the jaws, which is
  what the joints cannot see and the camera measures.
The joints thus give only the horizontal position; the height is the camera's.

The fit. For each candidate height of the cube's centre (a coarse grid, then `FINE_STEP_M`
steps around the best), the cube (a box of the layout's size) is projected with the located
camera (`table.TableView`) and its silhouette drawn with sub-pixel coverage, as `cube.silhouette`.
The cost counts the cube-coloured pixels the silhouette leaves out (the cube cannot be there)
plus the silhouette's pixels that show the empty table as it was in the episode's first frame
(something would hide the table there). Occlusion by the jaws is the normal case: a silhouette
pixel that shows neither the cube's colour nor the unchanged table (a jaw, the arm, the cube's
former place) costs nothing, so only the cube's visible colour pixels and the table it does not
hide decide.

The band. The heights whose cost is within `COST_SLACK_PX` of the best form an interval; the band
is its larger half-width plus `BAND_FLOOR_M` (the horizontal prior's error seen along the line of
sight, the video's compression), both measured against the simulator's ground truth
(`bench/camera_lift.py`, figures in docs/benchmarks.md: the truth within the band on 85 % of
frames at 320x240; a cube that turns or shifts in the jaws leaves the horizontal prior and
carries the larger errors). An occluded jaw side widens the interval
by itself: fewer pixels decide.

Not measured (NaN, with the reason, never guessed): no cube of its colour near where it should be
(`VISIBLE_FRACTION` of its silhouette), or cube-coloured pixels the silhouette cannot explain
(`UNEXPLAINED_FRACTION`: the cube is neither in the jaws nor where it stood) and no cube standing
on the table either.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import cv2
import numpy as np
from scipy.optimize import minimize

from orchestrator.sim import fk
from orchestrator.sim.holding import closed_on_cube
from orchestrator.vision.cube import RED, SUPERSAMPLE, CubeColour, cube_area_px, find_blobs, fit_cube
from orchestrator.vision.lift_track import LiftTrack
from orchestrator.vision.table import TableView

# Set against `MUJOCO_GL=egl uv run python bench/camera_lift.py --episodes 16` (docs/benchmarks.md,
# "Two senses: the camera measures the lift"): bottom error p50 0.58 mm, p95 3.66 mm at 320x240,
# the band (p50 2.0 mm) covering 85 % of frames.
COST_SLACK_PX = 1.5        # heights within this many pixels of the best fit's cost are as good
BAND_FLOOR_M = 0.0015      # added to every band: the prior's horizontal error along the line of sight
VISIBLE_FRACTION = 0.12    # of the silhouette's area: fewer cube-coloured pixels in it is "occluded"
UNEXPLAINED_FRACTION = 0.35  # of the cube-coloured pixels near it: more outside the silhouette, wrong place
MIN_CUBE_PX = 8.0          # the cube's width in the image below which the camera cannot measure it
COARSE_STEP_M = 0.004
FINE_STEP_M = 0.0005
FINE_SPAN_M = 0.006        # the fine grid: +- this around the coarse best
MAX_BOTTOM_M = 0.20        # the highest bottom looked for
BACKGROUND_LEVEL = 30      # a pixel within this many grey levels (every channel) of the first frame is the table


@dataclass(frozen=True)
class Joints:
    """The recorded joints an episode's camera measurement leans on: step times (s), the
    measured joints (N, 6, rig units) and the commanded ones (None: not recorded)."""

    t: np.ndarray
    state: np.ndarray
    action: np.ndarray | None = None

    def at(self, times: np.ndarray, cube_size_m: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(grasp points (K, 3), gripper rotations (K, 3, 3), closed on the cube (K,)) at each
        of `times`: the last recorded step at or before it."""
        index = np.clip(np.searchsorted(np.asarray(self.t, float), np.asarray(times, float) + 1e-6, "right") - 1,
                        0, len(self.t) - 1)
        state = np.asarray(self.state, float)[index]
        command = None if self.action is None else np.asarray(self.action, float)[index, 5]
        points, rotations = fk.grasp_pose(state)
        return points, rotations, closed_on_cube(state[:, 5], cube_size_m, command)


@dataclass
class _Rest:
    """Where the cube stands on the table (centre, rotation) and, in a grasp, relative to the
    gripper (`offset`, `turn`)."""

    centre: np.ndarray
    rotation: np.ndarray
    offset: np.ndarray | None = None
    turn: np.ndarray | None = None


def _corners(size_m: float) -> np.ndarray:
    h = size_m / 2.0
    return np.array([(a, b, c) for a in (-h, h) for b in (-h, h) for c in (-h, h)])


def _yaw_matrix(yaw_deg: float) -> np.ndarray:
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _coverage(pixels: np.ndarray, roi: tuple[int, int, int, int]) -> np.ndarray:
    """Sub-pixel coverage (h, w) in the region `roi` (x0, y0, w, h) of the convex hull of
    `pixels` (as `cube.silhouette`, without drawing the whole image)."""
    x0, y0, w, h = roi
    fine = (pixels - [x0, y0]) * SUPERSAMPLE + (SUPERSAMPLE - 1) / 2.0
    hull = cv2.convexHull(np.round(fine * 16).astype(np.int32))
    big = np.zeros((h * SUPERSAMPLE, w * SUPERSAMPLE), np.uint8)
    cv2.fillConvexPoly(big, hull, 255, lineType=cv2.LINE_8, shift=4)
    return cv2.resize(big, (w, h), interpolation=cv2.INTER_AREA).astype(float) / 255.0


@dataclass(frozen=True)
class HeightFit:
    """One frame's fit: the cube centre's height `z_m`, the interval of heights as good
    (`z_low_m`, `z_high_m`), the cube-coloured pixels in the silhouette (`visible_px`), those it
    leaves out (`unexplained_px`) and the silhouette's area (`area_px`)."""

    z_m: float
    z_low_m: float
    z_high_m: float
    visible_px: float
    unexplained_px: float
    area_px: float


def _region(view: TableView, shape: tuple[int, int], points: np.ndarray) -> tuple[int, int, int, int] | None:
    """The image region (x0, y0, w, h) around the projections of `points`, padded, clipped."""
    height, width = shape
    pixels = view.pose.project(points, view.intrinsics)
    x0, y0 = (int(math.floor(v)) - 3 for v in pixels.min(axis=0))
    x1, y1 = (int(math.ceil(v)) + 4 for v in pixels.max(axis=0))
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, width), min(y1, height)
    return None if x1 - x0 < 2 or y1 - y0 < 2 else (x0, y0, x1 - x0, y1 - y0)


class _Cost:
    """The fit's cost (module docstring) of a cube with corners `points` (layout frame) in
    `roi`: the cube-coloured pixels it leaves out plus the unchanged table it covers."""

    def __init__(self, colour_mask: np.ndarray, table_mask: np.ndarray, view: TableView,
                 roi: tuple[int, int, int, int]) -> None:
        x0, y0, w, h = roi
        self.view, self.roi = view, roi
        self.colour = colour_mask[y0:y0 + h, x0:x0 + w].astype(float)
        self.table = table_mask[y0:y0 + h, x0:x0 + w].astype(float)

    def cover(self, points: np.ndarray) -> np.ndarray:
        return _coverage(self.view.pose.project(points, self.view.intrinsics), self.roi)

    def __call__(self, points: np.ndarray) -> float:
        cover = self.cover(points)
        return float((self.colour * (1.0 - cover)).sum() + (self.table * cover).sum())


def fit_height(colour_mask: np.ndarray, table_mask: np.ndarray, view: TableView, size_m: float,
               xy: np.ndarray, rotation: np.ndarray) -> HeightFit | None:
    """The height of a cube of side `size_m` whose centre is above `xy` (layout frame) with
    `rotation`, from the cube-coloured pixels (`colour_mask`) and the unchanged table
    (`table_mask`) of one frame (see the module docstring). None: the cube's column is out of
    the image."""
    local = _corners(size_m) @ rotation.T
    base = np.array([xy[0], xy[1], 0.0]) + local
    lowest = -float(local[:, 2].min())          # centre height at which the bottom touches the table
    z_grid = np.arange(lowest - 0.004, lowest + MAX_BOTTOM_M, COARSE_STEP_M)
    roi = _region(view, colour_mask.shape, np.concatenate([base + [0, 0, z_grid[0]], base + [0, 0, z_grid[-1]]]))
    if roi is None:
        return None
    cost = _Cost(colour_mask, table_mask, view, roi)
    best = float(z_grid[int(np.argmin([cost(base + [0.0, 0.0, z]) for z in z_grid]))])
    fine = np.arange(best - FINE_SPAN_M, best + FINE_SPAN_M + FINE_STEP_M / 2, FINE_STEP_M)
    fine = fine[fine >= z_grid[0]]
    costs = np.array([cost(base + [0.0, 0.0, z]) for z in fine])
    k = int(np.argmin(costs))
    good = costs <= costs[k] + COST_SLACK_PX
    lo = hi = k
    while lo > 0 and good[lo - 1]:
        lo -= 1
    while hi + 1 < len(fine) and good[hi + 1]:
        hi += 1
    cover = cost.cover(base + [0.0, 0.0, float(fine[k])])
    return HeightFit(float(fine[k]), float(fine[lo]), float(fine[hi]), float((cost.colour * cover).sum()),
                     float((cost.colour * (1.0 - cover)).sum()), float(cover.sum()))


def refit_on_table(colour_mask: np.ndarray, table_mask: np.ndarray, view: TableView, size_m: float,
                   rest: _Rest) -> _Rest:
    """Where the cube stands now, near `rest`, with the jaws around it: (x, y, yaw) on the table
    by the fit's cost (Nelder-Mead from `rest`), for the squeeze's first frame (the closing jaw
    pushes the cube against the other)."""
    local = _corners(size_m)
    around = rest.centre + np.array([[dx, dy, 0.0] for dx in (-0.02, 0.02) for dy in (-0.02, 0.02)])
    roi = _region(view, colour_mask.shape, np.concatenate([c + local for c in around]))
    if roi is None:
        return rest
    cost = _Cost(colour_mask, table_mask, view, roi)
    yaw0 = math.degrees(math.atan2(rest.rotation[1, 0], rest.rotation[0, 0]))

    def at(p: np.ndarray) -> np.ndarray:
        return np.array([p[0], p[1], size_m / 2.0]) + local @ _yaw_matrix(p[2]).T

    start = np.array([rest.centre[0], rest.centre[1], yaw0])
    simplex = np.array([start, start + [0.003, 0, 0], start + [0, 0.003, 0], start + [0, 0, 8.0]])
    result = minimize(lambda p: cost(at(p)), start, method="Nelder-Mead",
                      options={"xatol": 2e-4, "fatol": 0.05, "initial_simplex": simplex, "maxiter": 150})
    x, y, yaw = (float(v) for v in result.x)
    return _Rest(np.array([x, y, size_m / 2.0]), _yaw_matrix(yaw))


def _start(frame: np.ndarray, view: TableView, size_m: float, colour: CubeColour) -> _Rest | None:
    """The cube standing on the table in `frame` (the largest cube-coloured blob), or None."""
    centre = view.pose.ray_to_plane(((view.intrinsics.width - 1) / 2, (view.intrinsics.height - 1) / 2),
                                    0.0, view.intrinsics)
    blobs = find_blobs(frame, view, size_m, (float(centre[0]), float(centre[1])), colour)
    if not blobs:
        return None
    fit = fit_cube(blobs[0], view, size_m)
    if fit.mismatch_px > 0.25 * cube_area_px(view, size_m, fit.x, fit.y, frame.shape[:2]):
        return None
    return _Rest(np.array([fit.x, fit.y, size_m / 2.0]), _yaw_matrix(fit.yaw_deg))


def cube_width_px(view: TableView, size_m: float, at: np.ndarray) -> float:
    """How wide (pixels) a cube standing at `at` looks: whether this camera can measure it."""
    return math.sqrt(cube_area_px(view, size_m, float(at[0]), float(at[1]),
                                  (view.intrinsics.height, view.intrinsics.width)))


def _unchanged(frame: np.ndarray, reference: np.ndarray, known_red: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Pixels showing the table (or whatever was behind) as in the first frame, away from the
    cube's place there and not of the cube's colour."""
    return (np.abs(frame.astype(np.int16) - reference).max(axis=2) <= BACKGROUND_LEVEL) & ~known_red & (mask == 0)


def _judge(fit: HeightFit | None) -> str:
    """Why a fit is not a measurement ("" when it is)."""
    if fit is None:
        return "the cube's place is out of the camera's view"
    if fit.visible_px < VISIBLE_FRACTION * fit.area_px:
        return f"occluded: {fit.visible_px:.0f} of {fit.area_px:.0f} px of the cube's colour where it should be"
    if fit.unexplained_px > UNEXPLAINED_FRACTION * (fit.visible_px + fit.unexplained_px):
        return (f"{fit.unexplained_px:.0f} px of the cube's colour outside the fitted cube: it is neither where the "
                "jaws hold it nor standing where it was")
    return ""


def measure_lift(frames: Iterable[np.ndarray], times_s: np.ndarray, view: TableView, size_m: float,
                 joints: Joints, colour: CubeColour = RED) -> LiftTrack:
    """The cube bottom's height in each of `frames` (RGB, taken at `times_s`) where the jaws are
    closed on it (the others: NaN, "not in the jaws"), see the module docstring. The first frame
    must show the cube standing on the table (an episode's start)."""
    times = np.asarray(times_s, dtype=float)
    points, rotations, closed = joints.at(times, size_m)
    bottoms, bands = np.full(len(times), np.nan), np.full(len(times), np.nan)
    reasons = ["not in the jaws (the gripper is not closed on it): not measured"] * len(times)
    iterator = iter(frames)
    first = next(iterator, None)
    if first is None:
        return LiftTrack.unmeasured(times, "no frames")
    first = np.asarray(first)
    rest = _start(first, view, size_m, colour)
    if rest is None:
        return LiftTrack.unmeasured(times, "no cube standing on the table in the first frame")
    if (width := cube_width_px(view, size_m, rest.centre)) < MIN_CUBE_PX:
        return LiftTrack.unmeasured(times, f"the cube is {width:.0f} px wide in this camera's image (at least "
                                           f"{MIN_CUBE_PX:g} needed)")
    state = _State(first.astype(np.int16), cv2.dilate(colour.mask(first), np.ones((5, 5), np.uint8)) > 0, rest)
    for k, frame in enumerate([first, *iterator][:len(times)]):
        if not closed[k]:
            state.rest.offset = None
            continue
        mask = colour.mask(np.asarray(frame))
        unchanged = _unchanged(np.asarray(frame), state.reference, state.known_red, mask)
        fit, lowest = state.fit(k, mask, unchanged, view, size_m, points[k], rotations[k], np.asarray(frame), colour)
        reasons[k] = _judge(fit)
        if not reasons[k] and fit is not None:
            bottoms[k] = fit.z_m - lowest
            bands[k] = max(fit.z_m - fit.z_low_m, fit.z_high_m - fit.z_m) + BAND_FLOOR_M
    return LiftTrack(times, bottoms, bands, ~np.isnan(bottoms), tuple(reasons))


@dataclass
class _State:
    """What `measure_lift` carries from frame to frame: the first frame, the cube's place in it,
    and where the cube stands or how it sits in the jaws (`rest`)."""

    reference: np.ndarray
    known_red: np.ndarray
    rest: _Rest

    def fit(self, k: int, mask: np.ndarray, unchanged: np.ndarray, view: TableView, size_m: float,
            point: np.ndarray, rotation: np.ndarray, frame: np.ndarray,
            colour: CubeColour) -> tuple[HeightFit | None, float]:
        """The height fit of frame `k` in the jaws at (`point`, `rotation`), and the centre's
        height above the bottom of the cube as it sits."""
        rest = self.rest
        if rest.offset is None:                  # the squeeze begins: the cube stands where the jaws pushed it
            found = _start(frame, view, size_m, colour)
            if found is not None and np.linalg.norm(found.centre - rest.centre) < 0.03:
                rest.centre, rest.rotation = found.centre, found.rotation
            moved = refit_on_table(mask, unchanged, view, size_m, rest)
            rest.centre, rest.rotation = moved.centre, moved.rotation
            rest.offset = rotation.T @ (rest.centre - point)
            rest.turn = rotation.T @ rest.rotation
        assert rest.turn is not None
        centre, turned = point + rotation @ rest.offset, rotation @ rest.turn
        fit = fit_height(mask, unchanged, view, size_m, centre[:2], turned)
        if _judge(fit).startswith(tuple("0123456789")):   # colour outside the cube: fallen on the table?
            found = _start(frame, view, size_m, colour)
            if found is not None:
                fit = fit_height(mask, unchanged, view, size_m, found.centre[:2], found.rotation)
                return fit, size_m / 2.0
        return fit, size_m / 2.0 * float(np.abs(turned[2]).sum())
