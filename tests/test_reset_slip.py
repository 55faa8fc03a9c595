"""The rig's measured slip model of the arm's reset (rigs/reset_slip.py) and how a session's
landing bias starts from it (run/reset.py, `LandingBias`): the model's geometry against
hand-computed values, the first try's correction with no history, the session's own misses
taking over, and the profile section's validation. Pure: no simulator."""

from __future__ import annotations

import math

import pytest

from orchestrator.core.errors import BadInput
from orchestrator.rigs.profile import load_rig
from orchestrator.rigs.reset_slip import ResetSlip, turned_against_radius_deg
from orchestrator.run.reset import PRIOR_WEIGHT, LandingBias
from support.repo import REPO


@pytest.mark.parametrize("x, y, yaw, turned", [
    (0.2, 0.0, 30.0, 30.0), (0.2, 0.0, 50.0, -40.0), (0.0, 0.2, 100.0, 10.0), (0.2, 0.2, 0.0, 45.0),
])
def test_the_cubes_turn_is_measured_against_the_line_from_the_base(x, y, yaw, turned):
    assert turned_against_radius_deg(x, y, yaw) == pytest.approx(turned)


def test_the_modelled_miss_is_along_and_across_the_line_from_the_base_to_the_mark():
    slip = ResetSlip(far_mm=(3.0, -1.0), across_mm_per_swing_deg=-0.1, across_mm_per_yaw_deg=0.2, near_mm=(2.0, 0.5))
    # straight ahead, picked straight ahead and square: along is +x, across +y (the robot's left)
    assert slip.expected_m("far", (0.25, 0.0, 0.0), (0.2, 0.0)) == pytest.approx((0.003, -0.001))
    # the mark 45 degrees to the left, picked straight ahead (swing +45) turned 10 degrees
    across = -1.0 - 0.1 * 45 + 0.2 * 10
    c = math.cos(math.radians(45))
    assert slip.expected_m("far", (0.25, 0.0, 10.0), (0.2, 0.2)) == pytest.approx(((3 * c - across * c) / 1000,
                                                                                  (3 * c + across * c) / 1000))
    assert slip.expected_m("near", (0.2, 0.01, 0.0), (0.2, 0.0)) == pytest.approx((0.002, 0.0005))
    assert slip.expected_m("from hand", (0.2, 0.0, 0.0), (0.2, 0.0)) == (0.0, 0.0)


def test_a_sessions_first_try_aims_against_the_model_then_its_own_misses_take_over():
    slip = ResetSlip(far_mm=(3.0, 0.0))
    pick, mark = (0.25, 0.0, 0.0), (0.2, 0.0)
    bias = LandingBias(slip)
    assert bias.correction("far", pick, mark) == pytest.approx((-0.003, 0.0))      # no history: the model
    assert LandingBias().correction("far", pick, mark) == (0.0, 0.0)               # the control: no model, nothing
    assert bias.correction("from hand") == (0.0, 0.0)                              # a kind the model leaves out
    # This session's cubes land 2 mm beyond the model's miss: one landing moves the aim not at
    # all (the model counts as PRIOR_WEIGHT misses of none), more than PRIOR_WEIGHT take over.
    landed = 0.005
    for n in range(1, PRIOR_WEIGHT + 2):
        aimed = bias.correction("far", pick, mark)
        bias.learn("far", (landed + aimed[0], 0.0), aimed, pick, mark)
        after = bias.correction("far", pick, mark)[0]
        assert after == pytest.approx(-0.003 if n < PRIOR_WEIGHT else -0.005 if n > PRIOR_WEIGHT else -0.004), n
    assert len(bias.misses["far"]) == PRIOR_WEIGHT + 1
    bias.learn("far", (0.040, 0.0), (0.0, 0.0), pick, mark)                      # a dropped cube: not learned
    assert len(bias.misses["far"]) == PRIOR_WEIGHT + 1


def test_the_simulators_profile_carries_its_measured_model_and_names_the_command():
    slip = load_rig(REPO / "hardware" / "sim.yaml").profile.reset_slip
    assert slip is not None and slip.far_mm[0] > 1.0 and "bench/reset_short.py --calibrate" in slip.measured
    assert load_rig(REPO / "hardware" / "so101_twin.yaml").profile.reset_slip is None   # not measured there


def test_a_misspelt_reset_slip_key_is_one_located_line(tmp_path):
    rig = tmp_path / "rig.yaml"
    rig.write_text((REPO / "hardware" / "sim.yaml").read_text().split("reset_slip:")[0]
                   + "reset_slip: {far: [1, 2]}\n")
    with pytest.raises(BadInput) as raised:
        load_rig(rig)
    assert str(rig) in str(raised.value) and "reset_slip" in str(raised.value) and "far" in str(raised.value)
