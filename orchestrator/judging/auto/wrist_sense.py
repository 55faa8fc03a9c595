"""The wrist camera's sense for the `auto` rater: the cube's bottom at every step of a hold, from
the seat the wrist camera measures in each of its frames.

The wrist camera measures the cube's bottom directly (`vision.wrist_cube`: the cube's pose in the
jaws, the gripper's pose from the joints), to a fraction of a millimetre per frame at 320x240, with
no per-hold bias from a horizontal prior (the front camera's, `seat`), and it follows the cube when
it slips in the jaws (up to 2 mm during a hold in the simulator). Each measured frame gives the seat
at its time (the grasp point's rise since the squeeze began less the measured bottom); at each
step of the squeeze the seat lies between those of the measured frames before and after it (it
changes slowly), so the bottom is the rise less that range, from `BELOW_M` under to `ABOVE_M` over
it; NaN at a step without a measured frame on both sides within its squeeze.

`BELOW_M` and `ABOVE_M` are set from the simulator's truth (`bench/wrist_lift.py` per frame,
`bench/rater_truth.py --calibrate --wrist` per episode on the calibration campaign:
docs/benchmarks.md).
"""

from __future__ import annotations

import numpy as np

from orchestrator.judging.auto.seat import squeezes
from orchestrator.vision.wrist_cube import WristTrack

# On the calibration campaign (80 episodes of protocols/sim_near.yaml, seed 77120401; 79 with a
# measured frame) the wrist camera's highest bottom less physics' was -0.17 to +1.16 mm (p5 +0.06,
# p50 +0.33, p95 +0.66); per frame held at least 2 cm up, on `bench/wrist_lift.py`'s 26 episodes
# (seeds 1 and 2), measured - true was -0.44 to +2.25 mm (p95 of |error| 0.50 mm; one episode
# +1.4 to +2.25 mm). Each end: the larger, plus at least 0.25 mm, rounded up to 0.5 mm
# (docs/benchmarks.md).
BELOW_M = 0.0025   # the true bottom at most this far below the wrist camera's
ABOVE_M = 0.0010   # ... and at most this far above it


def wrist_bounds(t: np.ndarray, closed: np.ndarray, z: np.ndarray, wrist: WristTrack,
                 band_m: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) per step of the cube bottom by the wrist camera (NaN where none; module
    docstring); `z`: the grasp point's height per step (m); `band_m`: (below, above), default
    (`BELOW_M`, `ABOVE_M`)."""
    below, above = (BELOW_M, ABOVE_M) if band_m is None else band_m
    t = np.asarray(t, float)
    low, high = np.full(len(t), np.nan), np.full(len(t), np.nan)
    frame_t, bottom = np.asarray(wrist.times_s, float), np.asarray(wrist.bottom_m, float)
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
