"""One rater, two senses: the front camera's lift (`vision.lift_track.LiftTrack`) and the joints'
grasp (`rater`), combined into one verdict that says which sense decided (`combine`).

Definitions, per recorded control step while the jaws are closed on the cube (the joints'
`closed_on_cube`, and the step read before the command that ends a squeeze: `rater.grip`; the success test
needs the cube held, and only the joints see the grip):
- the joints' interval for the cube bottom's height: the grasp point's rise since the squeeze
  began less the seat, the seat anywhere in `SEAT_LOW_M`-`SEAT_HIGH_M` (`rater`);
- the camera's: its measured bottom +- its band, at the frames before and after the step (the
  union of the two: the cube may have moved anywhere between two frames); none when either frame
  was not measured (occluded, out of view: the camera then says nothing, it never guesses);
- the pooled interval (`seat.pooled_bounds`, where the camera measured enough frames of the
  squeeze): the rise less the seat measured over the whole hold (the median of rise - the
  camera's bottom), from `seat.BELOW_M` under to `seat.ABOVE_M` over it: every frame of the hold counts, not only the worst;
- a pooled seat outside the joints' seat range (`seat.set_aside`: the camera sees the whole hold
  shifted, or the cube really sits outside it, slipping) is not used, and the label is then the
  joints' own sure verdict, unless it is a success while the camera sees the cube lower than the
  joints allow (a slip looks like that) and does not itself say success: then `unsure`, saying so;
- the wrist camera's interval (`wrist_sense.wrist_bounds`: the rise less the seat it measured in the
  frames around the step; only where the rater measured the wrist video), one more interval in the
  intersection, and the joints' narrowed by it where the pooled seat is set aside;
- the senses *disagree* when, for at least `CONFLICT_S`, one sense's whole interval is at or above
  the success height and another's is below it (the cube slipped in the jaws: the joints say
  high, the camera sees it drop; or the seat is outside its assumed range). The verdict is then
  `unsure`, naming them;
- otherwise the combined interval is their intersection. As with the joints alone (`rater`),
  success needs the hold with the combined interval's lower end at or above the height, less
  `HOLD_EARLY_S`, to reach `hold_s`, failure its upper end's hold, plus `HOLD_LATE_S`, to stay
  below `hold_s`; between the two, `unsure`.
Not closed on the cube counts as not held (height 0) for every sense.

Which sense decided: each sense's own verdict is computed as well (the camera's with the joints'
grip, and with no upper limit where it saw nothing); `decided_by` names the senses whose own
verdict is the combined one ("camera", "joints", "camera and joints"), or "camera with joints"
when only their intersection decides.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from orchestrator.core.timeline import frame_shown_at
from orchestrator.judging.auto.seat import Pooled
from orchestrator.vision.lift_track import LiftTrack, longest_run

_EPS = 1e-9
CONFLICT_S = 0.1   # the senses must contradict each other this long (two frames at 15 fps) to disagree


@dataclass(frozen=True)
class Combined:
    """Both senses' verdict: `label` ("success", "failure", "unsure"), the certain hold (s), the
    highest bottom the camera measured while held (m), the reason line, `decided_by`, and the
    possible hold (s; the certain and possible holds before the hold's bands)."""

    label: str
    hold_s: float
    top_m: float
    reason: str
    decided_by: str
    possible_s: float = 0.0


def camera_bounds(t: np.ndarray, lift: LiftTrack) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of the camera's interval at each step time `t` (NaN: not measured), the
    union of the frames before and after the step."""
    if not len(lift.times_s):
        nan = np.full(len(t), np.nan)
        return nan, nan.copy()
    before = np.asarray(frame_shown_at(lift.times_s, t), int)
    after = np.minimum(before + 1, len(lift.times_s) - 1)
    after = np.where(np.asarray(lift.times_s)[before] >= t - 1e-9, before, after)
    low, high = lift.low_m, lift.high_m
    return np.minimum(low[before], low[after]), np.maximum(high[before], high[after])


def _verdict(t: np.ndarray, low: np.ndarray, high: np.ndarray, min_height_m: float,
             hold_s: float, bands: tuple[float, float]) -> tuple[str, float, float]:
    """("success" | "failure" | "unsure", the certain hold, the possible hold) of the held
    height's interval (`low`, `high`; 0 when not held); `bands`: (how much shorter, how much
    longer) the true hold can be than the certain and the possible hold (`rater.HOLD_EARLY_S`,
    `rater.HOLD_LATE_S`)."""
    early_s, late_s = bands
    sure = longest_run(t, low >= min_height_m - _EPS)
    maybe = longest_run(t, high >= min_height_m - _EPS)
    if sure - early_s >= hold_s - _EPS:
        return "success", sure, maybe
    if maybe + late_s < hold_s - _EPS:
        return "failure", sure, maybe
    return "unsure", sure, maybe


def _conflict(t: np.ndarray, closed: np.ndarray, low: np.ndarray, high: np.ndarray, height: float) -> int | None:
    """The first step of a contradiction lasting `CONFLICT_S` (one sense's interval wholly at or
    above `height` and another's wholly below: the combined `low` >= it > `high`), or None."""
    with np.errstate(invalid="ignore"):
        split = closed & (low >= height) & (high < height)
    start = None
    for k in range(len(t)):
        if not split[k]:
            start = None
            continue
        start = k if start is None else start
        if t[k] - t[start] >= CONFLICT_S - _EPS:
            return start
    return None


def _interval(low: np.ndarray, high: np.ndarray, k: int) -> str:
    return f"{low[k] * 100:.1f}-{high[k] * 100:.1f} cm"


def _disagree(t: np.ndarray, k: int, senses: dict[str, tuple[np.ndarray, np.ndarray]], min_height_m: float) -> str:
    pooled = senses.get("pooled")
    over = "" if pooled is None or np.isnan(pooled[0][k]) else \
        f", with the seat the camera measured over the hold {_interval(*pooled, k)}"
    wrist = senses.get("wrist")
    over += "" if wrist is None or np.isnan(wrist[0][k]) else f", the wrist camera {_interval(*wrist, k)}"
    return (f"unsure: the camera and the joints disagree at {t[k]:.2f} s: the camera sees the cube bottom at "
            f"{_interval(*senses['camera'], k)}, the joints put it at {_interval(*senses['joints'], k)}{over} "
            f"(success height {min_height_m * 100:g} cm)")


# long-function: combine: the senses' intervals, their disagreement, the verdicts of each and of all,
# and the reason line, read in the order of the module docstring.
def combine(t: np.ndarray, closed: np.ndarray, j_low: np.ndarray, j_high: np.ndarray, lift: LiftTrack,
            min_height_m: float, hold_s: float, bands: tuple[float, float], moved: bool,
            pooled: Pooled | None = None, wrist: tuple[np.ndarray, np.ndarray] | None = None) -> Combined:
    """The verdict of both senses (module docstring): step times `t`, the joints' `closed` on
    the cube and their interval for the bottom's height (`j_low`, `j_high`, the seat's range:
    `rater.joint_bottoms`) per step, the camera's `lift`, the hold's bands (`_verdict`), and the
    bottom with the seat pooled over the hold (`seat.Pooled`; where its seat is set aside it is not
    used, and a label needs the camera's and the joints' own verdicts to agree); `wrist`: the
    bottom with the seat the wrist camera measured over the hold (`wrist_sense`; NaN where none),
    one more interval in the intersection, and the joints' narrowed by it where the front camera's
    seat is set aside."""
    aside = np.zeros(len(t), bool) if pooled is None else closed & pooled.aside
    c_low, c_high = camera_bounds(t, lift)
    c_low = np.where(closed, c_low, np.nan)
    c_high = np.where(closed, c_high, np.nan)
    senses = {"joints": (j_low, j_high), "camera": (c_low, c_high)}
    if pooled is not None:
        senses["pooled"] = (np.where(closed & ~aside, pooled.low, np.nan), np.where(closed & ~aside, pooled.high, np.nan))
    if wrist is not None:
        senses["wrist"] = (np.where(closed, wrist[0], np.nan), np.where(closed, wrist[1], np.nan))
    low = np.where(closed, np.fmax.reduce([lo for lo, _ in senses.values()]), 0.0)
    high = np.where(closed, np.fmin.reduce([hi for _, hi in senses.values()]), 0.0)
    first = _conflict(t, closed, low, high, min_height_m - _EPS)
    seen = closed & ~np.isnan(c_low)
    top = float(np.nanmax(np.where(seen, np.asarray(c_low + c_high) / 2, np.nan), initial=0.0)) if seen.any() else 0.0
    if first is not None:
        return Combined("unsure", 0.0, top, _disagree(t, first, senses, min_height_m), "")
    label, sure, maybe = _verdict(t, low, high, min_height_m, hold_s, bands)
    joints = _verdict(t, j_low, j_high, min_height_m, hold_s, bands)[0]
    if wrist is not None:   # the joints' interval narrowed by the wrist camera's seat
        joints = _verdict(t, np.fmax(j_low, senses["wrist"][0]), np.fmin(j_high, senses["wrist"][1]),
                          min_height_m, hold_s, bands)[0]
    camera = _verdict(t, np.where(closed, np.nan_to_num(c_low, nan=0.0), 0.0),
                      np.where(closed, np.nan_to_num(c_high, nan=np.inf), 0.0), min_height_m, hold_s, bands)[0]
    measured = f"camera measured {int(seen.sum())} of {int(closed.sum())} held steps"
    if pooled is not None and not np.isnan(senses["pooled"][0][closed]).all():
        measured += ", seat pooled over the hold"
    if wrist is not None and not np.isnan(senses["wrist"][0][closed]).all():
        measured += ", the wrist camera's seat"
    if pooled is not None and aside.any():   # (aside is all False without a pooled seat)
        deep = bool((aside & pooled.deep).any())
        if joints == "unsure" or (joints == "success" and deep and camera != "success"):
            seat = float(np.nanmedian(np.where(aside, pooled.seat, np.nan)))
            reason = (f"unsure: the camera and the joints disagree: the seat the camera measured over the hold, "
                      f"{seat * 1000:.1f} mm, is outside the joints' range, and alone the camera says {camera}, "
                      f"the joints {joints} ({measured})")
            return Combined("unsure", sure, top, reason, "", maybe)
        label = joints                        # the joints' own verdict, which a shifted camera cannot overturn
    if label == "unsure":
        reason = (f"unsure: held {sure:.2f}-{maybe:.2f} s with the cube bottom >= {min_height_m * 100:g} cm by the "
                  f"camera and the joints together ({measured}; the true hold {bands[0]:g} s shorter to {bands[1]:g} s "
                  f"longer): the band straddles {hold_s:g} s")
        return Combined("unsure", sure, top, reason, "", maybe)
    by_joints = "joints with the wrist camera" if wrist is not None and not np.isnan(senses["wrist"][0][closed]).all() \
        else "joints"
    agreeing = [name for name, own in (("camera", camera), (by_joints, joints)) if own == label]
    decided = " and ".join(agreeing) if agreeing else "camera with joints"
    if label == "success":
        reason = f"held {sure:.2f} s with the cube bottom >= {min_height_m * 100:g} cm ({decided}; {measured})"
    elif not closed.any():
        reason = f"the gripper never closed on a cube-sized object ({decided})"
    else:
        reason = (f"held at most {maybe:.2f} s with the cube bottom >= {min_height_m * 100:g} cm ({decided}; "
                  f"{measured}; highest {top * 100:.1f} cm by the camera)")
    if not moved and label == "failure":
        reason = f"the arm never moved ({decided})"
    return Combined(label, sure, top, reason, decided, maybe)
