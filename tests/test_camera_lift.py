"""The camera measures the lift (`vision.lift`): a 3 cm cube projected with the test's own pinhole
math into synthetic 320x240 frames (a grey table, the cube in red, yellow jaws in front of it)
at planted heights; the measurement must find each height within its band, report an occluded
cube as not measured, and see a cube that slipped out of the jaws on the table. And
`LiftTrack.longest_above` against hand-counted frames."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
from scipy.optimize import least_squares

from orchestrator.sim import fk
from orchestrator.vision.camera_model import CameraPose, Intrinsics, Pinhole
from orchestrator.vision.cube import coverage, hull_box
from orchestrator.vision.lift import BAND_FLOOR_M, COST_SLACK_PX, Joints, measure_lift, search_heights
from orchestrator.vision.lift_track import LiftTrack
from orchestrator.vision.table import TableView

CUBE = 0.03
WIDTH, HEIGHT, FOVY = 320, 240, 55.0
CAMERA_AT, TARGET = np.array([0.42, -0.12, 0.28]), np.array([0.21, 0.0, 0.0])
HOLDING = float(np.interp(CUBE * 0.95, fk.GAP_M, fk.GAP_PCT))   # the jaws stopped by the cube


def look_at() -> np.ndarray:
    """World-to-camera rotation (OpenCV axes: x right, y down, z forward), the test's own."""
    forward = (TARGET - CAMERA_AT) / np.linalg.norm(TARGET - CAMERA_AT)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    return np.stack([right, down, forward])


ROTATION = look_at()
FOCAL = (HEIGHT / 2) / math.tan(math.radians(FOVY) / 2)


def pinhole(points: np.ndarray) -> np.ndarray:
    """The oracle's projection: x_cam = R (X - C), u = f x / z + cx (no project code)."""
    cam = (np.asarray(points, float) - CAMERA_AT) @ ROTATION.T
    return np.stack([FOCAL * cam[:, 0] / cam[:, 2] + (WIDTH - 1) / 2,
                     FOCAL * cam[:, 1] / cam[:, 2] + (HEIGHT - 1) / 2], axis=1)


def view() -> TableView:
    rvec, _ = cv2.Rodrigues(ROTATION)
    tvec = -ROTATION @ CAMERA_AT
    return TableView((), 0.0, Intrinsics(FOCAL, WIDTH, HEIGHT, "test"),
                     CameraPose(tuple(rvec.ravel()), tuple(tvec.ravel())), {})


def cube_corners(centre: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    h = CUBE / 2
    local = np.array([(a, b, c) for a in (-h, h) for b in (-h, h) for c in (-h, h)])
    return centre + local @ rotation.T


def frame(centre: np.ndarray | None, rotation: np.ndarray | None = None, jaws: float = 0.0,
          cover_all: bool = False) -> np.ndarray:
    """A 320x240 frame: grey table, the cube's hull in red, a yellow jaw over `jaws` of its width
    (from its left), or a yellow block over all of it."""
    image = np.full((HEIGHT, WIDTH, 3), (200, 196, 188), np.uint8)
    if centre is None:
        return image
    pixels = pinhole(cube_corners(centre, np.eye(3) if rotation is None else rotation))
    hull = cv2.convexHull(np.round(pixels * 16).astype(np.int32))
    cv2.fillConvexPoly(image, hull, (215, 38, 31), lineType=cv2.LINE_AA, shift=4)
    x0, y0 = pixels.min(axis=0)
    x1, y1 = pixels.max(axis=0)
    if jaws:
        cv2.rectangle(image, (int(x0) - 2, int(y0) - 6), (int(x0 + jaws * (x1 - x0)), int(y1) + 6), (230, 200, 20), -1)
    if cover_all:
        cv2.rectangle(image, (int(x0) - 4, int(y0) - 4), (int(x1) + 4, int(y1) + 4), (230, 200, 20), -1)
    return image


def pose_at(target: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Joint degrees (5) putting the grasp point at `target` (least squares on `fk`)."""
    solved = least_squares(lambda q: fk.grasp_point(np.append(q, 0.0)[None])[0] - target, start, xtol=1e-12)
    assert np.linalg.norm(solved.fun) < 1e-4
    return solved.x


START = np.array([0.0, 20.0, 20.0, 60.0, 0.0])
TABLE_SPOT = np.array([0.20, 0.01, CUBE / 2])


def episode(heights: list[float | None], *, jaws: float = 0.3, occluded: tuple[int, ...] = (),
            fallen_from: int | None = None):
    """Frames and joints: frame 0 open, the cube on the table; frame 1 closed on it there; frames
    2.. lifted so that the cube bottom is at `heights[k]` (None: the cube dropped on the table
    while the joints keep the jaws closed and lifted)."""
    q0 = pose_at(TABLE_SPOT, START)
    grasp0, rot0 = fk.grasp_pose(np.append(q0, 0.0)[None])
    frames, states, actions, truth = [frame(TABLE_SPOT)], [np.append(q0, 60.0)], [np.append(q0, 60.0)], [0.0]
    frames.append(frame(TABLE_SPOT, jaws=jaws))
    states.append(np.append(q0, HOLDING))
    actions.append(np.append(q0, 0.0))
    truth.append(0.0)
    for k, bottom in enumerate(heights, start=2):
        lifted = 0.05 if bottom is None else bottom
        q = pose_at(TABLE_SPOT + [0.0, 0.0, lifted], q0)
        grasp, rot = fk.grasp_pose(np.append(q, 0.0)[None])
        turn = rot[0] @ rot0[0].T
        centre = grasp[0] + turn @ (TABLE_SPOT - grasp0[0]) + [0.0, 0.0, (bottom if bottom is not None else 0) - lifted]
        if bottom is None:
            centre, turn = TABLE_SPOT.copy(), np.eye(3)
        frames.append(frame(centre, turn, jaws=jaws, cover_all=k in occluded))
        states.append(np.append(q, HOLDING))
        actions.append(np.append(q, 0.0))
        truth.append(centre[2] - CUBE / 2 * np.abs(turn[2]).sum())   # the bottom corner's height
    times = np.arange(len(frames)) / 15.0
    return frames, Joints(times, np.array(states), np.array(actions)), np.array(truth)


def test_planted_heights_are_measured_within_their_band():
    heights = [0.030, 0.036, 0.040, 0.044, 0.050]
    frames, joints, truth = episode(heights)
    track = measure_lift(frames, joints.t, view(), CUBE, joints)
    assert track.reasons[0].startswith("not in the jaws") and np.isnan(track.bottom_m[0])
    assert track.visible[1:].all(), track.reasons
    error = np.abs(track.bottom_m[1:] - truth[1:])
    assert len(error) == 6 and (error <= track.band_m[1:]).all(), (error, track.band_m)
    # the fit's own interval (the band less its calibrated floor) is narrow on clean frames
    assert error.max() < 0.0015 and (track.band_m[1:] - BAND_FLOOR_M).max() < 0.0025


def test_an_occluded_cube_is_not_measured_and_not_guessed():
    heights = [0.045, 0.045, 0.045]
    frames, joints, _ = episode(heights, occluded=(3,))
    track = measure_lift(frames, joints.t, view(), CUBE, joints)
    assert np.isnan(track.bottom_m[3]) and not track.visible[3]
    assert track.reasons[3].startswith("occluded")
    assert track.visible[2] and track.visible[4]            # the positive control: the same height, in view
    assert track.bottom_m[4] == pytest.approx(0.045, abs=track.band_m[4])


def test_a_cube_slipped_out_of_the_jaws_is_seen_on_the_table():
    frames, joints, truth = episode([0.045, None, None])
    track = measure_lift(frames, joints.t, view(), CUBE, joints)
    assert track.visible[2:].all(), track.reasons
    assert track.bottom_m[2] == pytest.approx(0.045, abs=track.band_m[2])   # positive control: held high
    assert (np.abs(track.bottom_m[3:]) <= track.band_m[3:]).all()           # then on the table
    assert (track.high_m[3:] < 0.04).all()


def test_a_camera_too_coarse_for_the_cube_says_so():
    frames, joints, _ = episode([0.045])
    small = [cv2.resize(f, (48, 36), interpolation=cv2.INTER_AREA) for f in frames]
    coarse = TableView((), 0.0, Intrinsics(FOCAL * 48 / WIDTH, 48, 36, "test"), view().pose, {})
    track = measure_lift(small, joints.t, coarse, CUBE, joints)
    assert not track.visible.any() and "px wide" in track.reasons[0]


def test_longest_above_counts_frames_and_widens_by_the_gaps():
    t = np.arange(8) * 0.1
    bottom = np.array([0.0, 0.045, 0.046, 0.047, np.nan, 0.048, 0.039, 0.0])
    band = np.where(np.isnan(bottom), np.nan, 0.002)
    track = LiftTrack(t, bottom, band, ~np.isnan(bottom), tuple("" if b == b else "occluded" for b in bottom))
    sure, most = track.longest_above(0.04)
    assert sure == pytest.approx(0.2)             # frames 1-3: 0.1 s to 0.3 s
    # frames 1-6 may be above (6: 0.039 + 0.002; 4: unmeasured), from frame 0 to frame 7
    assert most == pytest.approx(0.7)
    assert LiftTrack.unmeasured(t, "no video").longest_above(0.04) == (0.0, pytest.approx(0.7))
    with pytest.raises(ValueError):
        LiftTrack(t, bottom[:3], band, ~np.isnan(bottom), ("",) * 8)


def test_the_fits_projection_is_the_pinhole():
    points = np.array([[0.2, 0.0, 0.0], [0.25, 0.05, 0.04], [0.15, -0.05, 0.1]])
    camera = Pinhole.of(view().pose, view().intrinsics)
    assert np.allclose(camera.project(points), pinhole(points), atol=1e-9)
    # any leading shape: a stack of candidate cubes at once
    assert np.allclose(camera.project(np.stack([points, points + 0.01])),
                       np.stack([pinhole(points), pinhole(points + 0.01)]), atol=1e-9)


def test_a_silhouette_drawn_in_its_own_box_is_the_one_drawn_in_the_whole_region():
    pixels = pinhole(cube_corners(TABLE_SPOT + [0.0, 0.0, 0.02], np.eye(3))) + [0.3, 0.7]
    region = (0, 0, WIDTH, HEIGHT)
    whole = coverage(pixels, region)
    assert 300 < whole.sum() < 2000                              # a cube's worth of pixels
    box = hull_box(pixels, region)
    assert box is not None and box[2] * box[3] < whole.size / 20
    x0, y0, w, h = box
    inside = np.zeros_like(whole)
    inside[y0:y0 + h, x0:x0 + w] = coverage(pixels, box)
    assert np.array_equal(inside, whole)
    # positive control: a box that cuts the hull's first full column loses coverage
    assert coverage(pixels, (x0 + 3, y0, w - 3, h)).sum() < whole.sum() - 1
    # clipped to a region the hull only partly meets; None when they do not meet
    half = (0, 0, int(pixels[:, 0].mean()), HEIGHT)
    cut = hull_box(pixels, half)
    assert cut is not None and cut[0] + cut[2] == half[2]
    assert hull_box(pixels, (0, 0, 20, 20)) is None


@pytest.mark.parametrize("seed", range(6))
def test_the_coarse_to_fine_search_finds_the_exhaustive_grids_best_and_run(seed):
    """A cost that falls as the silhouette nears the cube (a basin as wide as a cube) with pixel
    noise: the search must return what trying every step of the old grid would."""
    rng = np.random.default_rng(seed)
    last, truth = 400, rng.uniform(10, 390)
    noise = rng.uniform(0, 1.2, last + 1)
    cost = np.minimum(np.abs(np.arange(last + 1) - truth), 60.0) * 0.6 + noise
    tried: list[float] = []

    def costs(steps: np.ndarray) -> np.ndarray:
        tried.extend(steps)
        return cost[steps.astype(int)]

    best, lo, hi = search_heights(costs, last)
    coarse = np.arange(0, last + 1, 8)
    centre = int(coarse[np.argmin(cost[coarse])])
    window = np.arange(max(centre - 12, 0), min(centre + 12, last) + 1)
    k = int(window[np.argmin(cost[window])])
    good = cost <= cost[k] + COST_SLACK_PX
    first, end = k, k
    while first - 1 >= window[0] and good[first - 1]:
        first -= 1
    while end + 1 <= window[-1] and good[end + 1]:
        end += 1
    assert (best, lo, hi) == (k, first, end)
    assert abs(best - truth) <= 4
    assert len(set(tried)) < 60                     # the old grids tried 51 + 25


def test_frames_the_jaws_are_not_closed_on_are_never_read():
    frames, joints, _ = episode([0.040, 0.045])
    # a second open frame before the squeeze: no fit reads it, so it may be None
    longer = Joints(np.arange(len(frames) + 1) / 15.0, np.vstack([joints.state[:1], joints.state]),
                    np.vstack([joints.action[:1], joints.action]))
    whole = measure_lift([frames[0], *frames], longer.t, view(), CUBE, longer)
    assert not whole.visible[:2].any() and whole.visible[2:].all(), whole.reasons
    lazy = measure_lift([frames[0], None, *frames[1:]], longer.t, view(), CUBE, longer)
    assert np.array_equal(lazy.bottom_m, whole.bottom_m, equal_nan=True)
    assert np.array_equal(lazy.band_m, whole.band_m, equal_nan=True)
    with pytest.raises(ValueError, match="frame 3"):    # positive control: a frame the jaws are closed on is read
        measure_lift([frames[0], None, frames[1], None, *frames[3:]], longer.t, view(), CUBE, longer)
