"""The wrist camera's sense for the `auto` rater: the cube's bottom at every step of a hold, from
the seat the wrist camera measures in each of its frames.

The wrist camera measures the cube's bottom directly (`vision.wrist_cube`: the cube's pose in the
jaws, the gripper's pose from the joints), to a fraction of a millimetre per frame (0.2 mm p95 at
640x480, 0.5 mm at 320x240), with
no per-hold bias from a horizontal prior (the front camera's, `seat`), and it follows the cube when
it slips in the jaws (up to 2 mm during a hold in the simulator). Each measured frame gives the seat
at its time (the grasp point's rise since the squeeze began less the measured bottom); at each
step of the squeeze the seat lies between those of the measured frames before and after it (it
changes slowly), so the bottom is the rise less that range, from `BELOW_M` under to `ABOVE_M` over
it; NaN at a step without a measured frame on both sides within its squeeze.

*A wedged cube.* The fit holds the cube's turn about the gripper's x and z axes near the jaws'
(`vision.wrist_cube.PRIOR_PX_PER_DEG2`: the jaws hide the corners that would show it); a cube
wedged between the hinged jaw and the fixed one turns about the gripper's y axis (nearly the
camera's line of sight) and some way about the others, which the prior then resists, so its bottom
is fitted off: on `bench/wrist_lift.py --seed 2` one cube turned 8.7 degrees about y and 1.3 about
z, fitted at 10.1 and -0.4, was fitted 1.4-2.25 mm high; in frames MuJoCo renders with cubes
turned 8-12 degrees about y and up to 2 about z and 1.5 about x, the fits (from three starts,
`vision.wrist_cube.FIRST_STARTS_DEG`) turned 8 degrees or more were off by -1.35 to +2.72 mm,
beyond any band the other fits need. A frame whose fitted turn about the gripper's y axis is `WEDGED_TURN_DEG` or more, or not
known, is *not measured* here (`wedged`); the others (*well seated*) carry `BELOW_M`-`ABOVE_M`.

The band is set from the simulator's truth on well-seated fits (`bench/wrist_lift.py` per frame
over several seeds, `bench/rater_truth.py --calibrate --wrist` per episode on the calibration
campaign: docs/benchmarks.md).
"""

from __future__ import annotations

import numpy as np

from orchestrator.judging.auto.seat import squeezes
from orchestrator.vision.wrist_cube import WristTrack

# Turned this much about y, a fit is not used: the bench's fit 1.4-2.25 mm high was turned 9.4-10.6
# degrees; fits turned 6-8 degrees were within the well-seated band on the bench (8 episodes) and
# on MuJoCo's frames (-0.35 to +1.6 mm, three starts); those turned more, -1.35 to +2.72 mm there.
WEDGED_TURN_DEG = 8.0
# Well-seated fits, measured - true: per frame held at least 2 cm up on `bench/wrist_lift.py`'s 68
# episodes (seeds 1, 3, 4 x 16, seeds 2, 5 x 10; 3109 frames; 6 episodes had a wedged frame)
# -0.32 to +1.67 mm; the highest bottom per episode on the calibration campaign (61 episodes with no
# wedged frame) +0.03 to +1.15 mm; a cube wedged 8 degrees about y and -2 about z in a frame MuJoCo
# renders, fitted at 3.7 degrees (not flagged): +1.6 mm. Each end: the largest, plus at least
# 0.25 mm, rounded up to 0.25 mm (docs/benchmarks.md; it was 2.5 mm under / 1.0 mm over with
# every fit, set by the wedged one).
BELOW_M = 0.0020   # the true bottom at most this far below a well-seated fit's
ABOVE_M = 0.00075  # ... and at most this far above it
# The band of well-seated fits on frames of a size measured apart, (width, height): (below, above).
# 640x480, the real arm's wrist camera's size (hardware/so101.example.yaml), in the simulated scene:
# measured - true per frame on the same 68 bench episodes rendered at 640x480, -0.35 to +0.65 mm
# (2941 frames; p50 0.07, p95 0.20 mm |error|); the highest bottom per episode on the calibration
# campaign recorded at 640x480, -0.06 to +0.51 mm on its 62 episodes with no wedged frame. Same rule (largest + 0.25,
# rounded up to 0.25 mm). Any other size carries `BELOW_M`-`ABOVE_M`: a band is never lent to
# frames it was not measured on (the twin's wrist camera is 320x240), nor to a real arm's camera
# (a rig's measured geometry: only the model's camera was measured).
BANDS_M: dict[tuple[int, int], tuple[float, float]] = {(640, 480): (0.0010, 0.00075)}


def band(wrist: WristTrack) -> tuple[float, float]:
    """(below, above) of `wrist`'s well-seated fits: `BANDS_M` at its frames' size with the
    model's camera, else (`BELOW_M`, `ABOVE_M`), the band measured on the smaller 320x240 frames
    (module docstring)."""
    if wrist.measured_camera:
        return BELOW_M, ABOVE_M
    return BANDS_M.get(wrist.frame_px or (0, 0), (BELOW_M, ABOVE_M))


def wedged(wrist: WristTrack) -> np.ndarray:
    """Per frame of `wrist`: its fit turned `WEDGED_TURN_DEG` or more about the gripper's y axis,
    or its turn not known (module docstring)."""
    if wrist.turn_deg is None:
        return np.ones(len(wrist.times_s), bool)
    turn = np.asarray(wrist.turn_deg, float)[:, 1]
    return ~(np.abs(turn) < WEDGED_TURN_DEG)


def wrist_bounds(t: np.ndarray, closed: np.ndarray, z: np.ndarray, wrist: WristTrack,
                 band_m: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) per step of the cube bottom by the wrist camera from its well-seated frames
    (NaN where none; module docstring); `z`: the grasp point's height per step (m); `band_m`:
    (below, above), default `band(wrist)`."""
    below, above = band(wrist) if band_m is None else band_m
    t = np.asarray(t, float)
    low, high = np.full(len(t), np.nan), np.full(len(t), np.nan)
    frame_t = np.asarray(wrist.times_s, float)
    bottom = np.where(wedged(wrist), np.nan, np.asarray(wrist.bottom_m, float))
    steps = np.searchsorted(t, frame_t + 1e-9, side="right") - 1
    for first, last in squeezes(closed):
        rise = z[first:last + 1] - z[first]
        inside = np.flatnonzero((steps >= first) & (steps <= last) & ~np.isnan(bottom))
        if not len(inside):
            continue
        at, seat = steps[inside], (z[steps[inside]] - z[first]) - bottom[inside]
        for k in range(first, last + 1):
            after = int(np.searchsorted(at, k, side="left"))
            before = after - 1 if after == len(at) or at[after] != k else after
            if before < 0 or after >= len(at):
                continue
            deep, shallow = max(seat[before], seat[after]), min(seat[before], seat[after])
            low[k], high[k] = rise[k - first] - deep - below, rise[k - first] - shallow + above
    return low, high
