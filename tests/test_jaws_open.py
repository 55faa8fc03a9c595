"""A hold lasts to the step read before the command that ends it (`sim.holding.squeezed_when_read`):
the control loop observes, then acts, so that step's gripper reading was taken while the squeeze
was still commanded. Planted gripper readings (the squeeze ended by the command to open, by the
jaws shutting on nothing, by a loosened command that leaves the jaws still), and planted holds both
sides of the 1 s test through the `auto` rater, with the joints alone and with the camera, each with
a positive control where the jaws had already moved (the hold then ends a step earlier, as before)."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.judging.auto.rater import HOLD_LATE_S, SEAT_HIGH_M, rate
from orchestrator.sim import fk
from orchestrator.sim.holding import STILL_PCT, squeezed_when_read
from orchestrator.vision.lift_track import LiftTrack
from support.poses import pose_at

CUBE, HEIGHT, HOLD = 0.03, 0.04, 1.0
HOLDING = float(np.interp(CUBE * 0.95, fk.GAP_M, fk.GAP_PCT))    # the jaws stopped by the cube
T = np.arange(150) / 30.0                                          # 5 s at 30 Hz
SPOT = np.array([0.2, 0.0, CUBE / 2])
LIFT_STEP = 30


GRASP = pose_at(SPOT)
HIGH = pose_at(SPOT + [0.0, 0.0, HEIGHT + SEAT_HIGH_M + 0.005])    # high enough at the deepest seat


def test_the_step_read_under_the_squeeze_holds_and_no_later_one():
    """Oracle: the expected arrays written out by hand."""
    closed = np.array([0, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0], bool)
    squeeze = 18.0
    reading = np.array([40, 20, squeeze, squeeze, squeeze + STILL_PCT / 2, squeeze, squeeze + 3.0,
                        squeeze, squeeze, squeeze - 3.0, squeeze], float)
    expected = np.array([0, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0], bool)
    # the first squeeze: the step after it, its reading within STILL_PCT of the squeeze's, holds;
    # the next, as still, does not (its reading came under the new command). The second: the jaws
    # shut past the squeeze at step 9 (the cube gone), and a later reading back at the squeeze's
    # never revives a hold.
    assert squeezed_when_read(closed, reading).tolist() == expected.tolist()
    loosened = squeezed_when_read(closed, np.full(len(closed), squeeze))      # the jaws never move
    assert loosened.tolist() == [0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0]
    assert not squeezed_when_read(np.zeros(5, bool), np.full(5, squeeze)).any()   # no squeeze, no hold
    assert squeezed_when_read(np.ones(3, bool), np.zeros(3)).all()                 # squeezed to the end
    assert squeezed_when_read(np.zeros(0, bool), np.zeros(0)).shape == (0,)
    assert 0.0 < STILL_PCT < 2.94                  # under the smallest first opening step measured


def joints(held_steps: int, jaws_moved_at_command: bool) -> tuple[np.ndarray, np.ndarray]:
    """Squeeze from step 10, the grasp point high from step 30 for `held_steps` squeezed steps, then
    the command to open at the next step (the arm still up); the measured gripper still at the
    squeeze at that step (its reading comes before the command) unless `jaws_moved_at_command`,
    and open from the step after."""
    state = np.tile(np.append(GRASP, HOLDING), (len(T), 1))
    command = LIFT_STEP + held_steps
    state[LIFT_STEP:command + 2, :5] = HIGH
    action = state.copy()
    action[10:command, 5] = 0.0
    action[command:, 5] = 60.0
    state[command + 1:, 5] = 60.0
    if jaws_moved_at_command:
        state[command, 5] = HOLDING + 3.0
    return state, action


def camera(held_steps: int) -> LiftTrack:
    """The front camera at 15 fps seeing the cube 5 mm above the height while squeezed, and
    nothing after the squeeze (the camera measures only frames the jaws are closed on)."""
    times = np.arange(0, T[-1] + 1e-9, 1 / 15)
    up = (times >= LIFT_STEP / 30 - 1e-9) & (times < (LIFT_STEP + held_steps) / 30 - 1e-9)
    squeezed = times >= 10 / 30 - 1e-9
    bottom = np.where(up, HEIGHT + 0.005, np.where(squeezed & (times < (LIFT_STEP + held_steps) / 30), 0.0, np.nan))
    band = np.where(np.isnan(bottom), np.nan, 0.002)
    return LiftTrack(times, bottom, band, ~np.isnan(bottom),
                     tuple("not in the jaws" if np.isnan(b) else "" for b in bottom))


def label(verdict) -> str:
    return "unsure" if verdict.unsure else ("success" if verdict.success else "failure")


@pytest.mark.parametrize("with_camera", [False, True], ids=["joints", "camera and joints"])
def test_planted_holds_both_sides_of_the_test(with_camera):
    """30 squeezed steps high are a certain hold of 0.967 s; the command's step, whose reading
    shows the jaws still on the cube, makes it 1.000 s: a success. The positive control (the
    jaws already moved at the command's step) is the old rule's `unsure`. 29 steps stay under
    1 s either way (`unsure`), and 20 steps are a failure either way."""
    cases = {  # held steps, the jaws moved at the command -> label, certain hold (s)
        (30, False): ("success", 1.0),
        (30, True): ("unsure", 29 / 30),
        (29, False): ("unsure", 29 / 30),
        (29, True): ("unsure", 28 / 30),
        (20, False): ("failure", 20 / 30),
        (20, True): ("failure", 19 / 30),
    }
    for (steps, moved), (expected, hold_s) in cases.items():
        state, action = joints(steps, moved)
        lift = camera(steps) if with_camera else None
        verdict = rate(T, state, CUBE, HEIGHT, HOLD, action, lift)
        assert label(verdict) == expected, (steps, moved, verdict)
        if expected != "unsure":
            assert verdict.longest_hold_s == pytest.approx(hold_s, abs=1e-6), (steps, moved, verdict)
        if with_camera and expected != "unsure":     # the camera measured the hold and agrees
            assert "camera measured" in verdict.reason and verdict.decided_by, verdict
    assert len(cases) == 6 and 28 / 30 + HOLD_LATE_S >= HOLD           # the unsure ones are inside the band


def test_the_trace_reads_the_same_hold():
    """`rater.trace` (what `orchestrator view` and the progress ladder read) counts the command's
    step while the jaws are still shut, as `rate` does; not once they moved (the control)."""
    from orchestrator.judging.auto.rater import trace

    shut, moved = (trace(T, state, CUBE, HEIGHT, action) for state, action in (joints(30, False), joints(30, True)))
    assert shut["closed"][LIFT_STEP + 30] == 1.0 and moved["closed"][LIFT_STEP + 30] == 0.0
    assert shut["hold_s"].max() == pytest.approx(1.0) and moved["hold_s"].max() == pytest.approx(29 / 30)


def test_a_loosened_command_ends_the_hold_however_still_the_jaws():
    """20 squeezed steps high, then the command loosened to the jaws' own reading (no squeeze, no
    opening) with the arm up for 2 s more: the jaws stand still, the cube may slide out. One step
    is credited (0.667 s: a failure), never the 2 s of still jaws (a success); the control squeezes
    on through them (a success)."""
    state, action = joints(20, False)
    command = LIFT_STEP + 20
    state[command:command + 60, :5] = HIGH
    state[command:command + 60, 5] = HOLDING
    loosened = action.copy()
    loosened[command:command + 60, 5] = HOLDING                                # equal to the reading
    squeezing = action.copy()
    squeezing[command:command + 60, 5] = 0.0
    verdicts = {name: rate(T, state, CUBE, HEIGHT, HOLD, act) for name, act in
                (("loosened", loosened), ("squeezing", squeezing))}
    assert label(verdicts["loosened"]) == "failure", verdicts
    assert verdicts["loosened"].longest_hold_s == pytest.approx(20 / 30)
    assert label(verdicts["squeezing"]) == "success", verdicts
