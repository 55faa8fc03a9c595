"""The `auto` rater's wrist sense: an episode's recorded wrist video measured by
`vision.wrist_cube.measure_in_jaws` on a sample of its held frames, or why it could not be
(`wrist_track`).

Which frames. It fits the frames taken while the jaws are closed on the cube with the grasp point
risen at least `seat.MIN_RISE_M` since the squeeze began (the cube clear of the table) and, when
the success height is given, only those where the height is in question: the joints' bottom
(the rise less the seat, `rater.SEAT_LOW_M`-`SEAT_HIGH_M`) within `QUESTION_M` of the height,
with one frame more on each side of each such run (the seat at a step is read from the frames
around it: `wrist_sense`). Elsewhere the joints alone settle the height by more than the wrist
camera's widest band, so its fit could only narrow an interval that is already wholly on one side.
Each fit costs some 35 ms of CPU, so the rater measures the wrist video only for the episodes the
front camera and the joints leave unsure (`rater.rate_file`). The video's frame times
are the time series' `frame_t.wrist` (the recorder's); a frame belongs to the last step at or
before it. The camera's mount and intrinsics (`vision.wrist_geometry`) are those the rig recorded
beside the video (`cameras.json`'s `wrist` entry: the rig profile's `cameras.wrist.geometry`,
measured by `orchestrator camera calibrate-wrist`; `recorded_geometry`), else, for an episode
recorded in the simulated scene (the simulated rig and the twin, whose wrist camera is the
model's), the simulated SO-101's (`sim.fk`); a real arm's episode without a recorded geometry has
no wrist sense.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from orchestrator.judging.auto.camera import decoded_frames
from orchestrator.judging.auto.seat import MIN_RISE_M, squeezes
from orchestrator.sim import fk
from orchestrator.sim.holding import closed_on_cube
from orchestrator.vision.wrist_cube import WristTrack, measure_in_jaws
from orchestrator.vision.wrist_geometry import WristGeometry, parse_geometry

CAMERA = "wrist"
# The height is in question at a step where the joints' bottom range reaches within this of it:
# more than the wrist camera's widest band (`wrist_sense.BELOW_M`), so a frame the fit could
# move across the height is fitted.
QUESTION_M = 0.003


def recorded_wrist(series: Path) -> Path:
    """The wrist video of the episode whose time series is `series` (`run/recording.py`'s layout)."""
    series = Path(series)
    return series.parent.parent.parent / "videos" / series.parent.name / f"{CAMERA}.mp4"


def recorded_geometry(poses: Path) -> WristGeometry | None:
    """The wrist camera's geometry the rig recorded in an episode's `cameras.json` (`poses`), or
    None: no file, no `wrist` entry with a `geometry`, or one that does not validate."""
    import json

    from orchestrator.core.errors import BadInput

    try:
        record = json.loads(Path(poses).read_text()).get(CAMERA)
        return parse_geometry(record["geometry"], str(poses)) if isinstance(record, dict) and "geometry" in record else None
    except (OSError, ValueError, AttributeError, BadInput):
        return None


def in_question(height_m: float, seat_m: tuple[float, float]) -> tuple[float, float]:
    """The grasp point's rise (m, low, high) at which the success height `height_m` is in question
    for a seat known to lie in `seat_m` (low, high; `rater.SEAT_LOW_M`, `SEAT_HIGH_M`): the joints'
    bottom (the rise less the seat) within `QUESTION_M` of the height."""
    return height_m + seat_m[0] - QUESTION_M, height_m + seat_m[1] + QUESTION_M


def sample(t: np.ndarray, closed: np.ndarray, z: np.ndarray, frame_t: np.ndarray,
           rise_m: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each frame's step, closed at each frame, the frames to fit) for steps `t` with `closed`
    on the cube and the grasp point's height `z`; with `rise_m` (`in_question`), only the frames
    whose rise is in it and one either side (module docstring)."""
    steps = np.clip(np.searchsorted(t, np.asarray(frame_t, float) + 1e-9, side="right") - 1, 0, len(t) - 1)
    at_frame = np.asarray(closed, bool)[steps]
    wanted = np.zeros(len(steps), bool)
    for first, last in squeezes(closed):
        inside = np.flatnonzero((steps >= first) & (steps <= last) & at_frame)
        rise = z[steps[inside]] - z[first]
        keep = rise >= MIN_RISE_M - 1e-12
        if rise_m is not None:
            keep &= (rise >= rise_m[0]) & (rise <= rise_m[1])
            near = keep.copy()                                             # one frame more on each side
            near[1:] |= keep[:-1]
            near[:-1] |= keep[1:]
            keep = near
        wanted[inside[keep]] = True
    return steps, at_frame, wanted


def wrist_track(video: Path | None, series: dict[str, np.ndarray], cube_size_m: float,
                rise_m: tuple[float, float] | None = None,
                geometry: WristGeometry | None = None) -> tuple[WristTrack | None, str]:
    """(the wrist camera's track, "") or (None, why there is none: no video, unreadable, no frame
    held high enough, none measured); with `rise_m` (`in_question`), fitted only where the height
    is in question (`sample`); `geometry`: the camera's (default the simulated SO-101's)."""
    if video is None or not Path(video).is_file():
        return None, "no wrist video"
    times = np.asarray(series.get(f"frame_t.{CAMERA}", ()), float)
    t, state = np.asarray(series["t"], float), np.asarray(series["state"], float)
    if not len(times) or not len(t):
        return None, "no wrist frame times"
    action = series.get("action")
    closed = closed_on_cube(state[:, 5], cube_size_m, None if action is None else np.asarray(action, float)[:, 5])
    steps, at_frame, wanted = sample(t, closed, fk.grasp_point(state)[:, 2], times, rise_m)
    if not wanted.any():
        return None, "no wrist frame with the cube held high enough" + ("" if rise_m is None else " and its height in question")
    try:
        frames = decoded_frames(Path(video), wanted)
    except Exception as exc:  # noqa: BLE001 - any decoding failure is the same "unreadable"
        return None, f"the wrist video cannot be decoded ({type(exc).__name__})"
    if len(frames) != len(times):
        return None, f"the time series has {len(times)} wrist frame times for the video's {len(frames)} frames"
    track = measure_in_jaws(frames, times, state[steps], at_frame, cube_size_m, wanted, geometry=geometry)
    if not track.visible.any():
        return None, next((r for r in track.reasons if r.startswith(("occluded", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"))),
                          "no wrist frame measured")
    return track, ""
