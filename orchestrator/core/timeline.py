"""The frame shown at episode time t: one rule for the judge's player and the dataset export.

Each recorded frame carries the episode time of the control step at which it was taken (the
recorder writes it into the video's timestamps and the time series' `frame_t.<camera>`). At
time t the frame shown is the last one taken at or before t, so a camera slower than the
control loop holds its frame until the next, a dropped frame leaves the previous one on
screen, and no frame is ever shown before it was taken. Numpy only: the judge's install needs
nothing more.
"""

from __future__ import annotations

import numpy as np

# Frame times come back from the video rounded to its 1 ms time base and from the time series
# as floats: a step at t shows the frame stamped t even after rounding or float error.
FRAME_TIME_EPS_S = 1e-6


def frame_shown_at(frame_times, t):
    """Index of the frame shown at episode time `t` (a number, or an array of them): the last
    frame whose time is <= t; the first frame before it starts."""
    index = np.searchsorted(np.asarray(frame_times, dtype=float), np.asarray(t, dtype=float) + FRAME_TIME_EPS_S,
                            side="right") - 1
    return np.clip(index, 0, None) if np.ndim(index) else max(int(index), 0)
