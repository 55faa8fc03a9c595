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

The fit. For each candidate height of the cube's centre (coarse to fine, `search_heights`: every
12 mm, every 4 mm around the best, then `FINE_STEP_M` steps around that best as far as the heights
as good reach), the cube (a box of the layout's size) is projected with the located camera
(`table.TableView`) and its silhouette drawn with sub-pixel coverage, as `cube.silhouette`, only in
its own box (`cube.hull_boxes`). Only the frames the jaws are closed on are read, and the colour
and table masks are computed only in the region the fit looks at.
The cost counts the cube-coloured pixels the silhouette leaves out (the cube cannot be there)
plus the silhouette's pixels that show the empty table as it was in the episode's first frame
(something would hide the table there). Occlusion by the jaws is the normal case: a silhouette
pixel that shows neither the cube's colour nor the unchanged table (a jaw, the arm, the cube's
former place) costs nothing, so only the cube's visible colour pixels and the table it does not
hide decide.

The band. The heights whose cost is within `COST_SLACK_PX` of the best form an interval; the band
is its larger half-width plus `BAND_FLOOR_M` (the horizontal prior's error seen along the line of
sight, the video's compression), the floor calibrated against the simulator's ground truth so
that the truth is within the band on 95 % of frames (`bench/camera_lift.py`, figures in
docs/benchmarks.md: 96 % of the calibration episodes' frames at 320x240, 100 % of another seed's);
a cube that turns or shifts in the jaws leaves the horizontal prior and carries the larger
errors, which the floor is sized for. An occluded jaw side widens the interval by itself: fewer
pixels decide.

Not measured (NaN, with the reason, never guessed): no cube of its colour near where it should be
(`VISIBLE_FRACTION` of its silhouette), or cube-coloured pixels the silhouette cannot explain
(`UNEXPLAINED_FRACTION`: the cube is neither in the jaws nor where it stood) and no cube standing
on the table either.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain, islice

import cv2
import numpy as np

from orchestrator.sim import fk
from orchestrator.sim.holding import closed_on_cube
from orchestrator.vision.camera_model import Pinhole
from orchestrator.vision.cube import (
    RED,
    CubeColour,
    coverage,
    cube_area_px,
    draw,
    find_blobs,
    fit_cube,
    fixed_point,
    hull_box,
    hull_boxes,
)
from orchestrator.vision.lift_track import LiftTrack
from orchestrator.vision.table import TableView

# Set against `MUJOCO_GL=egl uv run python bench/camera_lift.py --episodes 16 --sizes 320x240` (docs/benchmarks.md,
# "Two senses: the camera measures the lift"): bottom error p50 0.58 mm, p95 3.66 mm at 320x240. The
# floor is calibrated there (seed 1: the p95 of the error less the fit's own half-interval was
# 2.66 mm; 3 mm, the next 0.5 mm step, covers 96.2 % of the 1186 held frames) and checked on other
# episodes (`--episodes 10 --seed 2`: 100 % of 759 frames).
COST_SLACK_PX = 1.5        # heights within this many pixels of the best fit's cost are as good
BAND_FLOOR_M = 0.003       # added to every band: the prior's horizontal error along the line of sight
VISIBLE_FRACTION = 0.12    # of the silhouette's area: fewer cube-coloured pixels in it is "occluded"
UNEXPLAINED_FRACTION = 0.35  # of the cube-coloured pixels near it: more outside the silhouette, wrong place
MIN_CUBE_PX = 8.0          # the cube's width in the image below which the camera cannot measure it
FINE_STEP_M = 0.0005       # the heights tried are steps of this from 4 mm below the table
COARSE_STEPS = (24, 8)     # the coarse search's two grids (12 mm, then 4 mm), in FINE_STEP_M
FINE_SPAN_M = 0.006        # the fine grid: at most +- this around the coarse best
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


@dataclass(frozen=True)
class _Frame:
    """One frame as the fits read it: its cube-coloured pixels and the unchanged table (pixels
    within `BACKGROUND_LEVEL` of the first frame, away from the cube's place there, not of the
    cube's colour), computed only in the regions a fit looks at."""

    image: np.ndarray
    reference: np.ndarray      # the first frame, int16
    known_red: np.ndarray      # the cube's place in the first frame, dilated
    colour: CubeColour

    @property
    def shape(self) -> tuple[int, int]:
        return self.image.shape[0], self.image.shape[1]

    def masks(self, roi: tuple[int, int, int, int]) -> tuple[np.ndarray, np.ndarray]:
        """(cube-coloured, unchanged table) as floats (0 or 1) in the region `roi` (x0, y0, w, h)."""
        x0, y0, w, h = roi
        cut = (slice(y0, y0 + h), slice(x0, x0 + w))
        colour = self.colour.mask(self.image[cut])
        changed = np.abs(self.image[cut].astype(np.int16) - self.reference[cut]).max(axis=2)
        table = (changed <= BACKGROUND_LEVEL) & ~self.known_red[cut] & (colour == 0)
        return colour.astype(float), table.astype(float)


def _region(camera: Pinhole, shape: tuple[int, int], points: np.ndarray) -> tuple[int, int, int, int] | None:
    """The image region (x0, y0, w, h) around the projections of `points`, padded, clipped."""
    height, width = shape
    pixels = camera.project(points)
    x0, y0 = (int(math.floor(v)) - 3 for v in pixels.min(axis=0))
    x1, y1 = (int(math.ceil(v)) + 4 for v in pixels.max(axis=0))
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, width), min(y1, height)
    return None if x1 - x0 < 2 or y1 - y0 < 2 else (x0, y0, x1 - x0, y1 - y0)


class _Cost:
    """The fit's cost (module docstring) in the region `roi` of a cube whose corners project to
    `pixels`: the cube-coloured pixels it leaves out plus the unchanged table it covers. Summed
    as all the region's cube-coloured pixels plus (table - colour) x coverage under the
    silhouette, so that the silhouette is drawn only in its own box (`cube.hull_boxes`)."""

    def __init__(self, frame: _Frame, roi: tuple[int, int, int, int]) -> None:
        self.roi = roi
        self.colour, table = frame.masks(roi)
        self.weight = table - self.colour
        self.total = float(self.colour.sum())

    def _cut(self, box: tuple[int, int, int, int]) -> tuple[slice, slice]:
        x, y, w, h = box
        return slice(y - self.roi[1], y - self.roi[1] + h), slice(x - self.roi[0], x - self.roi[0] + w)

    def many(self, pixels: np.ndarray) -> np.ndarray:
        """The cost of each of M cubes whose corners project to `pixels` (M, 8, 2)."""
        fixed, out = fixed_point(pixels), np.full(len(pixels), self.total)
        for m, box in enumerate(hull_boxes(pixels, self.roi)):
            if box is not None:
                out[m] += float((self.weight[self._cut(box)] * draw(fixed[m], box)).sum()) / 255.0
        return out

    def whole(self, pixels: np.ndarray) -> float:
        """The same cost drawn over the whole region and summed in the order the refit on the
        table was measured with (`refit_on_table`): the cost is flat between pixel steps, and
        Nelder-Mead's choices among equal costs follow the last bits of the sums, which moved a
        squeeze's start by up to 3 mm on one of 26 benchmark episodes when summed in the box."""
        cover = coverage(pixels, self.roi)
        return float((self.colour * (1.0 - cover)).sum() + ((self.weight + self.colour) * cover).sum())

    def seen(self, pixels: np.ndarray) -> tuple[float, float, float]:
        """(cube-coloured pixels under the silhouette, those outside it, the silhouette's area)."""
        box = hull_box(pixels, self.roi)
        if box is None:
            return 0.0, self.total, 0.0
        cover = coverage(pixels, box)
        inside = float((self.colour[self._cut(box)] * cover).sum())
        return inside, self.total - inside, float(cover.sum())


_UP = np.array([0.0, 0.0, 1.0])


def search_heights(costs: Callable[[np.ndarray], np.ndarray], last: int) -> tuple[int, int, int]:
    """The best height and the run of heights as good around it, as steps of `FINE_STEP_M` from
    the lowest candidate (0 .. `last`): (best, first, last of the run). `costs` gives the fit's
    cost at an array of steps. Coarse to fine: every `COARSE_STEPS[0]`, then every
    `COARSE_STEPS[1]` within two of those around the best, then every step within
    `FINE_SPAN_M` of that best, evaluated outwards from it only as far as the run of costs
    within `COST_SLACK_PX` of the least reaches (a lower cost found on the way restarts the walk
    from it). Each stage's best lies within half a step of the true cost's minimum when the cost
    falls as the silhouette overlaps the cube's pixels, which it does over a cube's height."""
    known: dict[int, float] = {}

    def best_of(steps: list[int]) -> int:
        todo = [i for i in steps if i not in known]
        if todo:
            known.update(zip(todo, (float(c) for c in costs(np.array(todo, float))), strict=True))
        return min(steps, key=lambda i: (known[i], i))

    wide, narrow = COARSE_STEPS
    best = best_of(list(range(0, last + 1, wide)))
    best = best_of([i for i in range(best - 2 * narrow, best + 2 * narrow + 1, narrow) if 0 <= i <= last])
    span = int(round(FINE_SPAN_M / FINE_STEP_M))
    low_end, high_end = max(best - span, 0), best + span
    k = best_of(list(range(max(best - narrow // 2, low_end), min(best + narrow // 2, high_end) + 1)))
    while True:
        lo, hi = k, k
        while lo - 1 >= low_end and best_of([lo - 1, k]) == k and known[lo - 1] <= known[k] + COST_SLACK_PX:
            lo -= 1
        while hi + 1 <= high_end and best_of([hi + 1, k]) == k and known[hi + 1] <= known[k] + COST_SLACK_PX:
            hi += 1
        lower = min((i for i in known if low_end <= i <= high_end), key=lambda i: (known[i], i))
        if lower == k:
            return k, lo, hi
        k = lower


def fit_height(frame: _Frame, camera: Pinhole, size_m: float, xy: np.ndarray,
               rotation: np.ndarray) -> HeightFit | None:
    """The height of a cube of side `size_m` whose centre is above `xy` (layout frame) with
    `rotation`, from one frame's cube-coloured pixels and unchanged table (see the module
    docstring). None: the cube's column is out of the image."""
    local = _corners(size_m) @ rotation.T
    base = np.array([xy[0], xy[1], 0.0]) + local
    z0 = -float(local[:, 2].min()) - 0.004      # 4 mm below the centre's height with the bottom on the table
    last = int(round(MAX_BOTTOM_M / FINE_STEP_M))
    roi = _region(camera, frame.shape, np.concatenate([base + _UP * z0, base + _UP * (z0 + last * FINE_STEP_M)]))
    if roi is None:
        return None
    cost = _Cost(frame, roi)

    def costs(steps: np.ndarray) -> np.ndarray:
        heights = z0 + steps * FINE_STEP_M
        return cost.many(camera.project(base[None] + heights[:, None, None] * _UP))

    k, lo, hi = search_heights(costs, last)
    visible, unexplained, area = cost.seen(camera.project(base + _UP * (z0 + k * FINE_STEP_M)))
    return HeightFit(z0 + k * FINE_STEP_M, z0 + lo * FINE_STEP_M, z0 + hi * FINE_STEP_M, visible, unexplained, area)


def refit_on_table(frame: _Frame, camera: Pinhole, size_m: float, rest: _Rest) -> _Rest:
    """Where the cube stands now, near `rest`, with the jaws around it: (x, y, yaw) on the table
    by the fit's cost (Nelder-Mead from `rest`), for the squeeze's first frame (the closing jaw
    pushes the cube against the other)."""
    local = _corners(size_m)
    around = rest.centre + np.array([[dx, dy, 0.0] for dx in (-0.02, 0.02) for dy in (-0.02, 0.02)])
    roi = _region(camera, frame.shape, np.concatenate([c + local for c in around]))
    if roi is None:
        return rest
    cost = _Cost(frame, roi)
    yaw0 = math.degrees(math.atan2(rest.rotation[1, 0], rest.rotation[0, 0]))

    def at(p: np.ndarray) -> np.ndarray:
        return camera.project(np.array([p[0], p[1], size_m / 2.0]) + local @ _yaw_matrix(p[2]).T)

    start = np.array([rest.centre[0], rest.centre[1], yaw0])
    simplex = np.array([start, start + [0.003, 0, 0], start + [0, 0.003, 0], start + [0, 0, 8.0]])
    from scipy.optimize import minimize  # here: the module's readers need no fit (0.35 s of import)
    result = minimize(lambda p: cost.whole(at(p)), start, method="Nelder-Mead",
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


def measure_lift(frames: Iterable[np.ndarray | None], times_s: np.ndarray, view: TableView, size_m: float,
                 joints: Joints, colour: CubeColour = RED) -> LiftTrack:
    """The cube bottom's height in each of `frames` (RGB, taken at `times_s`) where the jaws are
    closed on it (the others: NaN, "not in the jaws"), see the module docstring. The first frame
    must show the cube standing on the table (an episode's start). Only the first frame and those
    the jaws are closed on (`Joints.at`) are read: the others may be None."""
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
    state = _State(first.astype(np.int16), cv2.dilate(colour.mask(first), np.ones((5, 5), np.uint8)) > 0, rest,
                   Pinhole.of(view.pose, view.intrinsics))
    for k, image in enumerate(islice(chain([first], iterator), len(times))):
        if not closed[k]:
            state.rest.offset = None
            continue
        if image is None:
            raise ValueError(f"frame {k} is None, but the jaws are closed on the cube there: it must be read")
        frame = _Frame(np.asarray(image), state.reference, state.known_red, colour)
        fit, lowest = state.fit(frame, view, size_m, points[k], rotations[k])
        reasons[k] = _judge(fit)
        if not reasons[k] and fit is not None:
            bottoms[k] = fit.z_m - lowest
            bands[k] = max(fit.z_m - fit.z_low_m, fit.z_high_m - fit.z_m) + BAND_FLOOR_M
    return LiftTrack(times, bottoms, bands, ~np.isnan(bottoms), tuple(reasons))


@dataclass
class _State:
    """What `measure_lift` carries from frame to frame: the first frame, the cube's place in it,
    where the cube stands or how it sits in the jaws (`rest`), and the located camera."""

    reference: np.ndarray
    known_red: np.ndarray
    rest: _Rest
    camera: Pinhole

    def fit(self, frame: _Frame, view: TableView, size_m: float, point: np.ndarray,
            rotation: np.ndarray) -> tuple[HeightFit | None, float]:
        """The height fit of `frame` in the jaws at (`point`, `rotation`), and the centre's
        height above the bottom of the cube as it sits."""
        rest = self.rest
        if rest.offset is None:                  # the squeeze begins: the cube stands where the jaws pushed it
            found = _start(frame.image, view, size_m, frame.colour)
            if found is not None and np.linalg.norm(found.centre - rest.centre) < 0.03:
                rest.centre, rest.rotation = found.centre, found.rotation
            moved = refit_on_table(frame, self.camera, size_m, rest)
            rest.centre, rest.rotation = moved.centre, moved.rotation
            rest.offset = rotation.T @ (rest.centre - point)
            rest.turn = rotation.T @ rest.rotation
        assert rest.turn is not None
        centre, turned = point + rotation @ rest.offset, rotation @ rest.turn
        fit = fit_height(frame, self.camera, size_m, centre[:2], turned)
        if _judge(fit).startswith(tuple("0123456789")):   # colour outside the cube: fallen on the table?
            found = _start(frame.image, view, size_m, frame.colour)
            if found is not None:
                fit = fit_height(frame, self.camera, size_m, found.centre[:2], found.rotation)
                return fit, size_m / 2.0
        return fit, size_m / 2.0 * float(np.abs(turned[2]).sum())
