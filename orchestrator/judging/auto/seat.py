"""The seat measured over the whole hold: the two senses' errors pooled where both see the cube.

The joints give the grasp point's rise since the squeeze began; the cube's bottom is that rise less
the *seat* (how far the cube sank in the jaws: 3-7 mm, `rater.SEAT_LOW_M`-`SEAT_HIGH_M`). The seat
stays put while the cube is held, so every frame in which the camera measures the bottom is one
sample of it (rise - the camera's bottom), and their median over the squeeze is a far tighter
estimate than any one frame: the joints' rise is exact to the encoders' steps, the camera's
per-frame noise averages out, and what is left is the error the camera makes for the whole hold
(the cube turned in the jaws, the horizontal prior off).

Definition, per squeeze (a run of steps *closed on the cube*), over the camera's measured frames
taken during it with the rise at least `MIN_RISE_M` (the cube clear of the table, its seat
settled): with at least `MIN_FRAMES` such frames the seat is their median, and the bottom at each
step of the squeeze is its rise less that seat, from `BELOW_M` under it to `ABOVE_M` over it (the
camera's errors are not symmetric: it sees the held cube slightly high); with fewer, the squeeze
gets no pooled interval (NaN). `BELOW_M` and `ABOVE_M` are measured against the simulator's truth
on a calibration campaign that is not the one the rater's figures are reported on
(docs/benchmarks.md).

A cube slipping in the jaws has no single seat: its pooled bottom is wrong late in the hold, and
there the camera's own frames (which `two_senses` intersects with it) leave no overlap: the rater
abstains.
"""

from __future__ import annotations

import numpy as np

# The cube clear of the table (its bottom at least ~15 mm up at the deepest seat) before a frame
# counts as a sample of the seat; below it the cube may still rest on or drag along the table.
MIN_RISE_M = 0.020
# At least this many measured frames (0.5 s at the recorder's 15 fps front camera) in the squeeze.
MIN_FRAMES = 8
# The pooled bottom's error band: the pooled highest bottom less the simulator's highest bottom
# over the calibration campaign's episodes with a pooled seat ranged from -0.45 to +2.19 mm (36
# episodes so far); each end rounded up to 0.5 mm with at least 0.25 mm to spare (its command and
# figures: docs/benchmarks.md, "the automatic rater").
BELOW_M = 0.0025   # the true bottom at most this far below the pooled one
ABOVE_M = 0.0010   # ... and at most this far above it


def squeezes(closed: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) step of every run of consecutive closed steps."""
    runs, start = [], None
    for k, inside in enumerate(np.asarray(closed, bool)):
        if inside and start is None:
            start = k
        if not inside and start is not None:
            runs.append((start, k - 1))
            start = None
    if start is not None:
        runs.append((start, len(closed) - 1))
    return runs


def seat_samples(t: np.ndarray, rise: np.ndarray, first: int, last: int, frame_t: np.ndarray,
                 bottom: np.ndarray) -> np.ndarray:
    """The seat samples (rise - the camera's bottom, m) of the squeeze from step `first` to `last`:
    each measured frame (`bottom` not NaN) taken at a step of it where the rise is at least
    `MIN_RISE_M` (a frame belongs to the last step at or before its time)."""
    frame_t, bottom = np.asarray(frame_t, float), np.asarray(bottom, float)
    steps = np.searchsorted(t, frame_t + 1e-9, side="right") - 1
    inside = (steps >= first) & (steps <= last) & ~np.isnan(bottom)
    steps, bottom = steps[inside], bottom[inside]
    keep = rise[steps] >= MIN_RISE_M
    return rise[steps[keep]] - bottom[keep]


def pooled_bounds(t: np.ndarray, closed: np.ndarray, z: np.ndarray, frame_t: np.ndarray, bottom: np.ndarray,
                  band_m: tuple[float, float] = (BELOW_M, ABOVE_M)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, seat) per step: the pooled bottom's interval and the seat it used (NaN outside a
    squeeze with a pooled seat; module docstring). `z`: the grasp point's height per step (m),
    `frame_t`, `bottom`: the camera's frame times and measured bottoms; `band_m`: (below, above)."""
    t = np.asarray(t, float)
    low, high, seat = (np.full(len(t), np.nan) for _ in range(3))
    for first, last in squeezes(closed):
        rise = np.full(len(t), -np.inf)
        rise[first:last + 1] = z[first:last + 1] - z[first]
        samples = seat_samples(t, rise, first, last, frame_t, bottom)
        if len(samples) < MIN_FRAMES:
            continue
        at = float(np.median(samples))
        pooled = np.maximum(rise[first:last + 1] - at, 0.0)
        low[first:last + 1], high[first:last + 1] = pooled - band_m[0], pooled + band_m[1]
        seat[first:last + 1] = at
    return low, high, seat
