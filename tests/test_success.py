"""The physical lift-and-hold test on scripted trajectories (no simulator)."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.sim.success import LiftHoldTracker

DT = 1.0 / 210.0   # the simulated rig's physics step at 30 fps


def evaluate(samples, min_height_m: float = 0.04, hold_s: float = 1.0) -> LiftHoldTracker:
    """Feed `(t, bottom_height_m, fixed_jaw, moving_jaw)` samples to a tracker, as the rig does."""
    tracker = LiftHoldTracker(min_height_m=min_height_m, hold_s=hold_s)
    for t, h, a, b in samples:
        tracker.update(t, h, bool(a), bool(b))
    return tracker


def lift_profile(height_m: float, hold_s: float, *, jaws=(True, True), rise_s: float = 1.0,
                 total_s: float = 12.0, start_s: float = 2.0):
    """Cube rests, rises linearly to `height_m`, stays there `hold_s`, then is put back down."""
    samples = []
    for t in np.arange(0.0, total_s, DT):
        if t < start_s:
            h = 0.0
        elif t < start_s + rise_s:
            h = height_m * (t - start_s) / rise_s
        elif t < start_s + rise_s + hold_s:
            h = height_m
        else:
            h = 0.0
        grasped = start_s <= t < start_s + rise_s + hold_s
        samples.append((float(t), h, grasped and jaws[0], grasped and jaws[1]))
    return samples


def test_lifted_3cm_fails():
    tracker = evaluate(lift_profile(0.03, 5.0), min_height_m=0.04, hold_s=1.0)
    assert not tracker.success
    assert tracker.max_lift_m == pytest.approx(0.03, abs=1e-6)
    assert tracker.time_to_success_s is None


def test_4cm_for_0_9s_fails():
    tracker = evaluate(lift_profile(0.04, 0.9), min_height_m=0.04, hold_s=1.0)
    assert not tracker.success
    assert tracker.longest_hold_s == pytest.approx(0.9, abs=2 * DT)


def test_4cm_for_1_1s_passes():
    tracker = evaluate(lift_profile(0.04, 1.1), min_height_m=0.04, hold_s=1.0)
    assert tracker.success
    # The hold begins when the cube reaches 4 cm (t = 3.0 s) and completes 1 s later.
    assert tracker.time_to_success_s == pytest.approx(4.0, abs=2 * DT)
    assert tracker.max_lift_m == pytest.approx(0.04, abs=1e-6)


@pytest.mark.parametrize("jaws", [(True, False), (False, True), (False, False)])
def test_one_jaw_only_fails(jaws):
    tracker = evaluate(lift_profile(0.06, 3.0, jaws=jaws), min_height_m=0.04, hold_s=1.0)
    assert not tracker.success
    assert tracker.max_lift_m == pytest.approx(0.06, abs=1e-6)


def test_hold_must_be_continuous():
    """Two 0.6 s holds separated by a moment without the moving jaw do not add up."""
    samples = []
    for t in np.arange(0.0, 2.3, DT):
        moving = not (1.6 <= t < 1.7)
        samples.append((float(t), 0.05 if t >= 1.0 else 0.0, t >= 1.0, t >= 1.0 and moving))
    assert not evaluate(samples, 0.04, 1.0).success
    # The same without the gap succeeds.
    samples = [(t, h, a, a) for t, h, a, _ in samples]
    assert evaluate(samples, 0.04, 1.0).success


def test_success_latches_and_reset_clears():
    tracker = LiftHoldTracker(0.04, 1.0)
    for t, h, a, b in lift_profile(0.05, 2.0):
        tracker.update(t, h, a, b)
    assert tracker.success  # the cube was put back down afterwards: success stays
    tracker.reset()
    assert not tracker.success and tracker.max_lift_m == 0.0 and tracker.time_to_success_s is None
