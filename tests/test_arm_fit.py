"""A checkpoint and a profile checked against the arm, in-process on plain numbers
(`policies.arm_fit`, `hardware_checks.target_speed_refusal`): each refusal one line with its flag;
the cases on the twin, through `doctor` and `run`, are in test_arm_fit_twin.py."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from orchestrator.policies.arm_fit import (
    arm_fit_refusals,
    first_action_refusal,
    units_refusal,
    warm_up_refusal,
)
from orchestrator.rigs.so101.hardware_checks import target_speed_refusal

KEYS = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "wrist_roll.pos", "gripper.pos"]
# An SO-101's calibrated ranges in degrees (the gripper 0-100), as the twin's calibration gives them.
RANGES = {"shoulder_pan": (-110.0, 110.0), "shoulder_lift": (-100.0, 100.0), "elbow_flex": (-97.0, 97.0),
          "wrist_flex": (-95.0, 95.0), "wrist_roll": (-160.0, 160.0), "gripper": (0.0, 100.0)}
REST = dict(zip(KEYS, [0.0, -94.0, 90.0, 50.0, 0.0, 30.0], strict=True))
WHERE = "policy checkpoint ./ckpt"


def rig(units: str = "degrees") -> SimpleNamespace:
    return SimpleNamespace(joint_units=units, calibrated_range=lambda motor: RANGES[motor])


def stats(mean, std, lo=None, hi=None) -> dict:
    out = {"mean": np.array(mean, float), "std": np.array(std, float)}
    if lo is not None:
        out |= {"min": np.array(lo, float), "max": np.array(hi, float)}
    return out


# Statistics of a pick-and-place recording in degrees (the shape of LeRobot's SO-101 datasets:
# every joint moves tens of degrees, the gripper opens and closes on its 0-100).
DEGREES = stats([2, -60, 70, 60, 5, 15], [12, 18, 17, 9, 8, 12],
                [-40, -100, 10, 20, -30, 0], [45, 0, 97, 95, 40, 45])
RADIANS = stats([0] * 6, [0.5] * 6, [-1.6] * 6, [1.6] * 6)   # the issue's: mean 0, std 0.5, range +-1.6


def test_statistics_in_radians_are_refused_in_one_line_naming_std_span_and_the_gripper():
    line = units_refusal({"observation.state": (RADIANS, KEYS), "action": (RADIANS, KEYS)}, rig(), WHERE)
    assert line is not None and line.startswith(f"{WHERE}: its statistics are not in the rig's units (degrees")
    assert "observation.state: the arm's largest std is 0.5 (under 2), the arm's largest span is 3.2 (under 10), " \
           "the gripper spans 3.2 of its 0-100 (under 10)" in line
    assert "; action: " in line and line.endswith("pass --allow-policy-units to run it anyway")
    # the range with its margin alone passes them: +-1.6 lies inside every joint's, the gripper's too
    assert all(lo - 10 < -1.6 and 1.6 < hi + 10 for lo, hi in RANGES.values())


def test_statistics_of_a_recording_in_degrees_pass_and_the_gripper_is_checked_apart():
    assert units_refusal({"observation.state": (DEGREES, KEYS), "action": (DEGREES, KEYS)}, rig(), WHERE) is None
    still_gripper = {k: v.copy() for k, v in DEGREES.items()}
    still_gripper["min"][5], still_gripper["max"][5] = 0.0, 1.5    # the gripper never opened
    line = units_refusal({"action": (still_gripper, KEYS)}, rig(), WHERE)
    assert line is not None and "action: the gripper spans 1.5 of its 0-100" in line and "the arm's" not in line
    # mean and std only (no min/max): the gripper's span is 4 std, the arm's std decides
    assert units_refusal({"action": (stats([0] * 6, [40] * 6), KEYS)}, rig(), WHERE) is None
    line = units_refusal({"action": (stats([0] * 6, [0.5] * 6), KEYS)}, rig(), WHERE)
    assert line is not None and "largest std is 0.5" in line and "gripper spans 2" in line


def test_statistics_outside_the_calibrated_range_are_refused():
    wide = stats([0] * 6, [40] * 6, [-170] * 5 + [0], [170] * 5 + [100])
    line = units_refusal({"observation.state": (wide, KEYS)}, rig(), WHERE)
    assert line is not None and "shoulder_pan.pos spans [-170.0, 170.0] against the calibrated [-110.0, 110.0]" in line
    assert "wrist_roll.pos" not in line   # -170 lies within 10 % of wrist_roll's 320-degree span


def test_a_warm_up_action_that_is_not_finite_is_refused():
    assert warm_up_refusal(dict(REST), WHERE) is None
    line = warm_up_refusal({**REST, "elbow_flex.pos": math.nan}, WHERE)
    assert line == (f"{WHERE}: its warm-up action is not finite (elbow_flex.pos=nan): every trial would abort at its "
                    "first step; pass --allow-nan-warm-up to run it anyway")


def test_a_first_action_far_from_the_start_pose_names_the_joint_and_the_distance():
    near = {k: v + 12 for k, v in REST.items()}
    assert first_action_refusal(near, REST, "the profile's rest_pose", "degrees", WHERE) is None
    zeros = dict.fromkeys(KEYS, 0.0)     # what a checkpoint in radians asks for: the all-zero pose
    line = first_action_refusal(zeros, REST, "the profile's rest_pose", "degrees", WHERE)
    assert line == (f"{WHERE}: its first action at the episode's start pose (the profile's rest_pose) puts "
                    "shoulder_lift 94 degrees from it (bound 30): the first steps would drive the arm toward 0.0 "
                    "at max_relative_target per step; pass --allow-far-first-action to run it anyway")
    # the gripper apart: 45 of its 0-100 is within its bound, 60 is not
    assert first_action_refusal({**REST, "gripper.pos": 75.0}, REST, "x", "degrees", WHERE) is None
    line = first_action_refusal({**REST, "gripper.pos": 90.0}, REST, "x", "degrees", WHERE)
    assert line is not None and "puts gripper 60 of the gripper's 0-100 from it (bound 50)" in line


class FakePolicy:
    """What `arm_fit_refusals` reads of a loaded policy; counts its first-action passes."""

    where = WHERE

    def __init__(self, statistics, warmup, first):
        self._statistics, self.warmup_action, self._first, self.first_calls = statistics, warmup, first, 0

    def statistics(self):
        return self._statistics

    def first_action(self, pose):
        self.first_calls += 1
        return self._first


def test_one_refusal_per_checkpoint_its_first_cause_and_each_flag_passes_its_own():
    radians = {"observation.state": (RADIANS, KEYS), "action": (RADIANS, KEYS)}
    zeros = dict.fromkeys(KEYS, 0.0)
    policy = FakePolicy(radians, {**REST, "gripper.pos": math.nan}, zeros)
    refusals = [arm_fit_refusals(policy, rig(), REST, "the profile's rest_pose", allowed)
                for allowed in ((), {"policy_units"}, {"policy_units", "nan_warm_up"},
                                {"policy_units", "nan_warm_up", "first_action_far"})]
    assert [len(r) for r in refusals] == [1, 1, 1, 0]
    assert [r[0].rsplit("pass ", 1)[1] for r in refusals[:3]] == [
        "--allow-policy-units to run it anyway", "--allow-nan-warm-up to run it anyway",
        "--allow-far-first-action to run it anyway"]
    assert policy.first_calls == 1      # computed only once the cheaper checks pass, and not when allowed
    fitting = FakePolicy({"observation.state": (DEGREES, KEYS), "action": (DEGREES, KEYS)}, dict(REST), dict(REST))
    assert arm_fit_refusals(fitting, rig(), REST, "the profile's rest_pose") == []
    assert arm_fit_refusals(fitting, rig(), None, "") == [] and fitting.first_calls == 1   # no pose: not asked


def speed_rig(mrt, units="degrees", calibration=None):
    bus = SimpleNamespace(motors=dict.fromkeys(RANGES), calibration=calibration or {})
    return SimpleNamespace(config=SimpleNamespace(max_relative_target=mrt), robot=SimpleNamespace(bus=bus),
                           joint_units=units)


def test_max_relative_target_is_bounded_by_a_speed_at_the_protocols_fps():
    (line,) = target_speed_refusal(speed_rig(1000.0), 15)
    assert line == ("robot.max_relative_target 1000 lets a policy drive a joint at up to 15000 degrees per "
                    "second at 15 fps, above the 90 allowed; set it to 6.0 or less, "
                    "or pass --allow-fast-max-relative-target")
    (line,) = target_speed_refusal(speed_rig(10.0), 30)     # the old shipped profile at 30 fps: 300 deg/s
    assert "up to 300 degrees per second at 30 fps" in line and "set it to 3.0 or less" in line
    assert target_speed_refusal(speed_rig(3.0), 30) == [] and target_speed_refusal(speed_rig(6.0), 15) == []
    assert target_speed_refusal(speed_rig(None), 30) == []   # no bound at all: its own refusal
    # per joint, the gripper's 0-100 apart (no angle)
    assert target_speed_refusal(speed_rig({"shoulder_pan": 3.0, "gripper": 50.0}), 30) == []
    (line,) = target_speed_refusal(speed_rig({"shoulder_pan": 3.0, "elbow_flex": 4.0}), 30)
    assert "drive elbow_flex at up to 120 degrees per second" in line


def test_max_relative_target_in_minus_100_to_100_units_is_converted_by_the_calibrated_span():
    half_turn = {m: SimpleNamespace(range_min=0, range_max=2048) for m in RANGES}   # 180 degrees = 200 units
    (line,) = target_speed_refusal(speed_rig(5.0, "-100..100", half_turn), 30)     # 4.5 degrees a step
    assert "at up to 135 degrees per second at 30 fps" in line and "set it to 3.3 or less" in line
    assert target_speed_refusal(speed_rig(3.0, "-100..100", half_turn), 30) == []     # 81 deg/s
