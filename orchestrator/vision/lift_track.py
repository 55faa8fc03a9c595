"""What the front camera measured of a lift: the cube's bottom above the table per video frame,
each with its own error band, and the frames it could not measure (`LiftTrack`).

The measurement itself is `vision.lift.measure_lift`; this module is the result and the one
rule that turns it into the success test's quantity: how long the bottom stayed at or above a
height (`LiftTrack.longest_above`), as an interval that the band and the frame spacing widen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

_EPS = 1e-9


@dataclass(frozen=True)
class LiftTrack:
    """Per video frame `k`: `times_s[k]` the episode time it was taken, `bottom_m[k]` the cube
    bottom's height above the table (metres; NaN when not measured), `band_m[k]` its error band
    (calibrated so that the truth is within `bottom_m +- band_m` on 95 % of the simulator's frames
    at 320x240: 96 % and 100 % on two sets of episodes, docs/benchmarks.md; NaN when not measured), `visible[k]` whether it was measured, and `reasons[k]` why not
    ("" when measured: "occluded: 12 of 160 px of the cube's colour", ...)."""

    times_s: np.ndarray
    bottom_m: np.ndarray
    band_m: np.ndarray
    visible: np.ndarray
    reasons: tuple[str, ...]

    def __post_init__(self) -> None:
        n = len(self.times_s)
        if not (len(self.bottom_m) == len(self.band_m) == len(self.visible) == len(self.reasons) == n):
            raise ValueError("LiftTrack: times, bottoms, bands, visibility and reasons differ in length")

    @classmethod
    def unmeasured(cls, times_s, reason: str) -> LiftTrack:
        """A track of `times_s` where no frame was measured, all for `reason`."""
        times = np.asarray(times_s, dtype=float)
        nan = np.full(len(times), np.nan)
        return cls(times, nan, nan.copy(), np.zeros(len(times), bool), (reason,) * len(times))

    @property
    def low_m(self) -> np.ndarray:
        """`bottom_m - band_m` (NaN where not measured)."""
        return np.asarray(self.bottom_m, float) - np.asarray(self.band_m, float)

    @property
    def high_m(self) -> np.ndarray:
        """`bottom_m + band_m` (NaN where not measured)."""
        return np.asarray(self.bottom_m, float) + np.asarray(self.band_m, float)

    @property
    def measured_fraction(self) -> float:
        return float(np.mean(self.visible)) if len(self.visible) else 0.0

    def longest_above(self, height_m: float) -> tuple[float, float]:
        """(certainly, at most): how long the bottom stayed at or above `height_m` without a
        break. *Certainly*: the longest run of consecutive measured frames whose whole band is
        at or above the height, timed from its first frame to its last. *At most*: the longest
        run of frames whose band reaches the height or that were not measured, timed from the
        frame before it to the frame after it (the bottom may have crossed the height anywhere
        between two frames); an unmeasured frame never shortens it."""
        times = np.asarray(self.times_s, float)
        low, high = self.low_m, self.high_m
        sure = np.where(np.isnan(low), False, low >= height_m - _EPS)
        maybe = np.where(np.isnan(high), True, high >= height_m - _EPS)
        return longest_run(times, sure), longest_run(times, maybe, widen=True)

    def summary(self) -> str:
        """One line: how many frames were measured, and the highest bottom seen."""
        if not self.visible.any():
            why = self.reasons[0] if self.reasons else "no frames"
            return f"the camera measured none of {len(self.times_s)} frames ({why})"
        top = int(np.nanargmax(self.bottom_m))
        return (f"the camera measured {int(self.visible.sum())} of {len(self.times_s)} frames; highest bottom "
                f"{self.bottom_m[top] * 100:.1f} +- {self.band_m[top] * 100:.1f} cm at {self.times_s[top]:.2f} s")


def longest_run(times: np.ndarray, inside: np.ndarray, widen: bool = False) -> float:
    """Longest duration of a run of consecutive `inside` samples, timed from its first sample to
    its last; `widen`: from the sample before it to the sample after it (see
    `LiftTrack.longest_above`)."""
    best, k, n = 0.0, 0, len(times)
    while k < n:
        if not inside[k]:
            k += 1
            continue
        end = k
        while end + 1 < n and inside[end + 1]:
            end += 1
        if widen:
            start = times[k - 1] if k > 0 else times[k]
            stop = times[end + 1] if end + 1 < n else times[end]
        else:
            start, stop = times[k], times[end]
        best = max(best, float(stop - start))
        k = end + 1
    return best if math.isfinite(best) else 0.0
