"""One rater, two senses (`judging.auto.two_senses`): planted lifts around the success height
where the camera and the joints agree, where only one of them can tell, and where they disagree
both ways; an occluded cube (the camera says nothing and the joints decide or nobody does); a cube
slipping out of the jaws' edge (the camera sees it drop while the joints say held: never a
success); and the fallback to the joints alone when there is no front video."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.judging.auto.rater import SEAT_HIGH_M, SEAT_LOW_M, rate, rate_file
from orchestrator.sim import fk
from orchestrator.vision.lift_track import LiftTrack
from support.poses import pose_at

CUBE, HEIGHT, HOLD = 0.03, 0.04, 1.0
HOLDING = float(np.interp(CUBE * 0.95, fk.GAP_M, fk.GAP_PCT))
T = np.arange(150) / 30.0                     # 5 s at 30 Hz
SPOT = np.array([0.2, 0.0, CUBE / 2])


GRASP = pose_at(SPOT)


def joints(rise_m: float, held_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Squeeze from step 10, the grasp point `rise_m` up from step 30 for `held_steps`, then the
    gripper opens (the command first)."""
    lifted = pose_at(SPOT + [0.0, 0.0, rise_m])
    state = np.tile(np.append(GRASP, HOLDING), (len(T), 1))
    state[30:30 + held_steps, :5] = lifted
    action = state.copy()
    action[10:30 + held_steps, 5] = 0.0
    state[30 + held_steps:, 5] = action[30 + held_steps:, 5] = 60.0   # open
    return state, action


def track(bottom_of_t, band: float = 0.001, hidden=()) -> LiftTrack:
    """A camera track at 15 fps with the planted bottom (metres, a function of time)."""
    times = np.arange(0, T[-1] + 1e-9, 1 / 15)
    bottom = np.array([bottom_of_t(t) for t in times], float)
    for k in hidden:
        bottom[k] = np.nan
    bands = np.where(np.isnan(bottom), np.nan, band)
    return LiftTrack(times, bottom, bands, ~np.isnan(bottom),
                     tuple("occluded: 3 of 200 px" if np.isnan(b) else "" for b in bottom))


def lifted_between(start_s: float, end_s: float, bottom_m: float):
    return lambda t: bottom_m if start_s - 1e-9 <= t < end_s - 1e-9 else 0.0


def label(verdict) -> str:
    return "unsure" if verdict.unsure else ("success" if verdict.success else "failure")


MID_SEAT = (SEAT_LOW_M + SEAT_HIGH_M) / 2


def test_both_senses_agree_and_say_so():
    state, action = joints(HEIGHT + SEAT_HIGH_M + 0.008, 60)               # joints: high, 2 s
    high = rate(T, state, CUBE, HEIGHT, HOLD, action, track(lifted_between(1.0, 3.0, 0.05)))
    assert label(high) == "success" and high.decided_by == "camera and joints"
    assert "camera and joints" in high.reason
    state, action = joints(HEIGHT + SEAT_LOW_M - 0.008, 60)                # joints: low
    low = rate(T, state, CUBE, HEIGHT, HOLD, action, track(lifted_between(1.0, 3.0, 0.033)))
    assert label(low) == "failure" and low.decided_by == "camera and joints"


def test_the_camera_decides_where_the_joints_band_straddles():
    state, action = joints(HEIGHT + MID_SEAT, 60)                          # the seat band straddles 4 cm
    alone = rate(T, state, CUBE, HEIGHT, HOLD, action)
    assert label(alone) == "unsure"                                        # today's rater abstains
    above = rate(T, state, CUBE, HEIGHT, HOLD, action, track(lifted_between(1.0, 3.0, 0.0415)))   # seat 3.5 mm
    below = rate(T, state, CUBE, HEIGHT, HOLD, action, track(lifted_between(1.0, 3.0, 0.0385)))   # seat 6.5 mm
    assert (label(above), above.decided_by) == ("success", "camera")
    assert (label(below), below.decided_by) == ("failure", "camera")
    assert "(camera;" in above.reason and "(camera;" in below.reason


def test_disagreement_either_way_is_unsure_and_names_both():
    state, action = joints(HEIGHT + SEAT_HIGH_M + 0.008, 60)               # joints: certainly high
    camera_low = rate(T, state, CUBE, HEIGHT, HOLD, action, track(lifted_between(1.0, 3.0, 0.030)))
    state2, action2 = joints(HEIGHT + SEAT_LOW_M - 0.008, 60)              # joints: certainly low
    camera_high = rate(T, state2, CUBE, HEIGHT, HOLD, action2, track(lifted_between(1.0, 3.0, 0.050)))
    for verdict in (camera_low, camera_high):
        assert label(verdict) == "unsure" and verdict.decided_by == ""
        assert "the camera and the joints disagree" in verdict.reason
    assert "camera sees the cube bottom at 2.9-3.1 cm" in camera_low.reason
    assert "camera sees the cube bottom at 4.9-5.1 cm" in camera_high.reason


def test_an_occluded_cube_leaves_the_joints_to_decide_or_nobody():
    always = range(75)                                                     # every frame
    state, action = joints(HEIGHT + SEAT_HIGH_M + 0.008, 60)
    hidden = rate(T, state, CUBE, HEIGHT, HOLD, action, track(lifted_between(1.0, 3.0, 0.05), hidden=always))
    assert label(hidden) == "success" and hidden.decided_by == "joints"    # the camera saw nothing
    assert "camera measured 0 of" in hidden.reason
    state, action = joints(HEIGHT + MID_SEAT, 60)
    unsure = rate(T, state, CUBE, HEIGHT, HOLD, action, track(lifted_between(1.0, 3.0, 0.0415), hidden=always))
    assert label(unsure) == "unsure"                                       # nothing invented
    seen = rate(T, state, CUBE, HEIGHT, HOLD, action, track(lifted_between(1.0, 3.0, 0.0415)))
    assert label(seen) == "success"                                        # positive control: in view


def test_a_cube_slipping_from_the_jaws_edge_is_never_a_success():
    state, action = joints(HEIGHT + SEAT_HIGH_M + 0.008, 60)               # the joints: held high 2 s

    def slipping(t: float) -> float:
        if t < 1.05 or t > 2.95:
            return 0.0
        return max(0.0, 0.05 - 0.04 * (t - 1.3)) if t > 1.3 else 0.05      # slides down from 1.3 s

    joints_alone = rate(T, state, CUBE, HEIGHT, HOLD, action)
    assert label(joints_alone) == "success"                                # what the joints alone say
    verdict = rate(T, state, CUBE, HEIGHT, HOLD, action, track(slipping))
    assert not verdict.success and label(verdict) == "unsure"
    assert "disagree" in verdict.reason
    held = rate(T, state, CUBE, HEIGHT, HOLD, action, track(lifted_between(1.0, 3.0, 0.05)))
    assert label(held) == "success"                                        # positive control: no slip


def test_no_front_video_falls_back_to_the_joints_and_says_so(tmp_path):
    state, action = joints(HEIGHT + SEAT_HIGH_M + 0.008, 60)
    series = tmp_path / "episodes" / "ep_1" / "timeseries.npz"
    series.parent.mkdir(parents=True)
    np.savez(series, t=T, state=state, action=action)
    verdict = rate_file(series, CUBE, HEIGHT, HOLD)
    assert label(verdict) == "success" and verdict.decided_by == "joints"
    assert verdict.reason.startswith("joints only (no front video): held")
    assert verdict.camera == "no front video"
    bad = tmp_path / "videos" / "ep_1" / "front.mp4"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a video")
    damaged = rate_file(series, CUBE, HEIGHT, HOLD)
    assert damaged.reason.startswith("joints only (the front video cannot be decoded")


@pytest.mark.parametrize("rise", [HEIGHT + MID_SEAT, HEIGHT + SEAT_HIGH_M + 0.008])
def test_the_joints_alone_verdict_is_unchanged_without_a_camera(rise):
    state, action = joints(rise, 60)
    verdict = rate(T, state, CUBE, HEIGHT, HOLD, action)
    assert verdict.camera == "" and not verdict.reason.startswith("joints only")
    assert verdict.decided_by == ("" if verdict.unsure else "joints")


def noisy(start_s: float, end_s: float, bottom_m: float, noise_m: float):
    """A lift the camera sees with per-frame noise +noise, 0, -noise in turn (median: the truth)."""
    def at(t: float) -> float:
        if not start_s - 1e-9 <= t < end_s - 1e-9:
            return 0.0
        return bottom_m + noise_m * (1 - round(t * 15) % 3)
    return at


def test_the_seat_pooled_over_the_hold_decides_lifts_near_the_height_both_ways():
    """Lifts 0.5 mm beyond the pooled band (BELOW_M above, ABOVE_M below the success height), with a seat the joints'
    band cannot place (their interval straddles 4 cm) and a camera whose every frame straddles it
    too (noise 3 mm, band 1 mm wider than noise + margin): the pooled seat (the median over the hold's 30 frames) decides
    both ways; with fewer than MIN_FRAMES frames seen the rater abstains (positive control: the
    same lifts), and the two senses alone abstain on the same data."""
    from orchestrator.judging.auto.seat import ABOVE_M, BELOW_M, MIN_FRAMES

    margin = max(BELOW_M, ABOVE_M) + 0.0005
    assert SEAT_LOW_M + 0.0002 < SEAT_HIGH_M - margin                       # the joints straddle below
    cases = {"success": (HEIGHT + BELOW_M + 0.0005, SEAT_LOW_M + 0.0002),
             "failure": (HEIGHT - ABOVE_M - 0.0005, SEAT_HIGH_M - 0.0002)}
    for expected, (bottom, seat) in cases.items():
        state, action = joints(bottom + seat, 60)                            # held 2 s, from 1 s
        assert label(rate(T, state, CUBE, HEIGHT, HOLD, action)) == "unsure"  # the joints alone
        seen = track(noisy(1.0, 3.0, bottom, 0.003), band=0.003 + margin + 0.001)
        verdict = rate(T, state, CUBE, HEIGHT, HOLD, action, seen)
        assert label(verdict) == expected, (expected, verdict.reason)
        assert verdict.decided_by == "camera with joints" and "seat pooled over the hold" in verdict.reason
        lifted = [k for k in range(len(seen.times_s)) if 1.0 - 1e-9 <= seen.times_s[k] < 3.0 - 1e-9]
        few = track(noisy(1.0, 3.0, bottom, 0.003), band=0.003 + margin + 0.001, hidden=lifted[MIN_FRAMES - 1:])
        assert label(rate(T, state, CUBE, HEIGHT, HOLD, action, few)) == "unsure", expected
    assert len(cases) == 2


def test_the_hold_band_is_one_sided_with_the_camera_too():
    """The true hold ends after the command to open, never before: a hold of exactly hold_s (31
    steps at 30 Hz) is a success, one a step short is unsure, one more than HOLD_LATE_S short a
    failure; with the camera and the joints both sure of the height."""
    from orchestrator.judging.auto.rater import HOLD_LATE_S

    high = HEIGHT + SEAT_HIGH_M + 0.008
    steps = {31: "success", 30: "unsure", 31 - round(HOLD_LATE_S * 30) - 1: "failure"}
    for held, expected in steps.items():
        state, action = joints(high, held)
        seen = track(lifted_between(1.0, 1.0 + held / 30, high - MID_SEAT))
        verdict = rate(T, state, CUBE, HEIGHT, HOLD, action, seen)
        assert label(verdict) == expected, (held, verdict.reason)
    assert len(steps) == 3


def test_a_camera_shifted_for_the_whole_hold_is_not_believed():
    """A camera that sees the whole hold shifted (its pooled seat outside the joints' 3-7 mm: on
    the calibration campaign, a cube turned in the jaws) is not used for the height: a lift
    ABOVE_M + 0.5 mm under the success height that the shifted camera puts 2.5 mm over it (seat
    1 mm) is `unsure`, not the success the camera's frames alone would give (as before the check);
    the same lift seen where it is (seat 5 mm) is a failure (positive control); and where the camera's and the
    joints' own verdicts agree (held 0.5 s only, the camera shifted) the label stands."""
    from orchestrator.judging.auto.seat import ABOVE_M

    bottom, seat = HEIGHT - ABOVE_M - 0.0005, 0.005
    state, action = joints(bottom + seat, 60)
    assert label(rate(T, state, CUBE, HEIGHT, HOLD, action)) == "unsure"               # the joints straddle
    shifted = track(lifted_between(1.0, 3.0, bottom + seat - 0.001), band=0.001)     # seat 1 mm
    verdict = rate(T, state, CUBE, HEIGHT, HOLD, action, shifted)
    assert label(verdict) == "unsure", verdict.reason
    assert "the seat the camera measured over the hold, 1.0 mm, is outside the joints' range" in verdict.reason
    assert "alone the camera says success, the joints unsure" in verdict.reason
    true = rate(T, state, CUBE, HEIGHT, HOLD, action, track(lifted_between(1.0, 3.0, bottom), band=0.001))
    assert label(true) == "failure", true.reason                                      # positive control
    state, action = joints(HEIGHT + SEAT_HIGH_M + 0.008, 15)                           # held 0.5 s
    short = rate(T, state, CUBE, HEIGHT, HOLD, action,
                 track(lifted_between(1.0, 1.5, HEIGHT + SEAT_HIGH_M + 0.007), band=0.001))   # seat 1 mm
    assert label(short) == "failure" and short.decided_by == "camera and joints", short.reason
    state, action = joints(0.035 + 0.005, 60)                                          # bottom 3.5 cm, seat 5 mm
    high = rate(T, state, CUBE, HEIGHT, HOLD, action, track(lifted_between(1.0, 3.0, 0.0395), band=0.001))
    assert label(high) == "failure" and high.decided_by == "joints", high.reason        # a slip never looks high
