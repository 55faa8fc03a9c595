"""The move to rest after a sag, on the twin's servo model in simulated time (deterministic).

A stop late in a scripted pick, then torque off (a SIGTERM, a closed terminal): the arm sags
onto the table. The next session's first move to rest used to interpolate every joint at once
from there, which drove the wrist and the closed gripper into the table: the joints it held did
not follow and the move stopped as "blocked" (seen on the twin for stops 2.5 s and 3.5 s into a
pick: a different joint each time; and, with all five arm joints, three times in a row on a
freshly provisioned machine). `rest_move.stages` lifts the shoulder first, then moves the other
arm joints, then the gripper. That still stopped, `shoulder_lift blocked` at stall torque, for a
stop half a second into a pick: the arm sagged folded, its gripper on the table beside the base,
wedged there by the tip's friction (the resumed session of tests/test_twin_sigterm.py on freshly
provisioned machines, three runs in a row). `rest_move.route` first lifts the gripper straight up
off the table, then the stages.

Here the twin's own `TwinArm` (the STS3215 loops, `sts3215.py`) and MuJoCo scene run in this
process, and `move_to_rest` runs on a simulated clock: each `sleep` steps the physics by that
long, so the outcome does not depend on the machine.
"""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.rigs import guarded_motion
from orchestrator.rigs.so101 import rest_move
from orchestrator.rigs.twin.feetech import REG

# The stop poses measured on the twin (LeRobot's degrees; gripper 0-100), 2.5 s and 3.5 s into
# a scripted pick of the cube parked out of reach, and the shipped twin profile's rest pose.
STOPS = {"2.5 s into the pick": [26, 6, 43, 79, 29, 2], "3.5 s into the pick": [26, 11, 36, 88, 29, 2],
         # read from the twin after the sag (torque off one second), a SIGTERM 0.5 s into a pick
         "0.5 s into the pick": [25.73, -47.39, 71.55, 58.55, 28.48, 22.0]}
FOLDED = "0.5 s into the pick"
REST = [0, -94, 91, 50, 0, 30]
KEYS = [f"{j}.pos" for j in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")]


class Blocked(Exception):
    def __init__(self, joints):
        super().__init__(joints)
        self.joints = joints


class SimulatedArm:
    """The twin's servos and scene, stepped by a simulated clock."""

    def __init__(self, stop_pose: list[float]):
        from orchestrator.design.protocol import Cube, Mark
        from orchestrator.rigs.profile import RigProfile
        from orchestrator.rigs.sim import SimRig
        from orchestrator.rigs.twin.arm import TwinArm

        profile = RigProfile.model_validate({"robot": {"type": "sim_so101"}, "cameras": {},
                                             "rest_pose": dict(zip(KEYS, REST, strict=True))})
        self.sim = SimRig(profile, fps=30)
        self.sim.place_cube(Mark(id="parked", x=0.30, y=0.22), Cube())
        self.sim._set_arm(np.array(stop_pose, dtype=float))
        self.arm = TwinArm(self.sim)
        self.now = 0.0
        self.goal_writes = 0

    def sleep(self, seconds: float) -> None:
        for _ in range(max(1, round(seconds / self.arm.dt))):
            self.arm.step()
        self.now += max(1, round(seconds / self.arm.dt)) * self.arm.dt

    def _write(self, i: int, name: str, value: int) -> None:
        self.arm.servo(i).put(name, value)
        self.arm._written(i + 1, REG[name][0], REG[name][1])

    def torque_on(self) -> None:
        for i in range(6):
            self._write(i, "Torque_Enable", 1)

    def read(self) -> dict[str, float]:
        self.sleep(0.004)   # a sync read of six servos takes a few milliseconds on the bus
        return dict(zip(KEYS, (float(v) for v in self.sim.joint_positions()), strict=True))

    def write(self, goal: dict[str, float]) -> None:
        self.goal_writes += 1
        q = self.sim.units.from_rig(np.array([goal[k] for k in KEYS]))
        for i in range(6):
            self._write(i, "Goal_Position", int(round(self.arm.rad_to_ticks(i, float(q[i])))))


class SimulatedClock:
    """`time` for rest_move: perf_counter is the arm's simulated time, sleep steps its physics."""

    def __init__(self, arm: SimulatedArm):
        self.arm = arm

    def perf_counter(self) -> float:
        return self.arm.now

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.arm.sleep(seconds)


def _sag_then_move(monkeypatch, stop_pose, targets) -> tuple[SimulatedArm, dict[str, float]]:
    """Torque off at `stop_pose`, 3 s of sag, torque on (as LeRobot's connect leaves it), then
    the move to rest through each of `targets(rest, here)` in turn; returns the arm and the pose."""
    arm = SimulatedArm(stop_pose)
    arm.sleep(3.0)   # torque off (the twin powers up limp): the arm sags
    arm.torque_on()
    monkeypatch.setattr(guarded_motion, "time", SimulatedClock(arm))
    rest = dict(zip(KEYS, map(float, REST), strict=True))
    for target in targets(rest, arm.read()):
        rest_move.move_to_rest(arm.read, arm.write, target, speed_deg_s=45.0, fps=30, settle_s=1.0,
                               tolerance_deg=2.0, check=lambda: None, watch=lambda: None, blocked=Blocked)
    return arm, arm.read()


@pytest.mark.parametrize("stop", list(STOPS))
def test_after_a_sag_on_the_table_the_move_reaches_rest(monkeypatch, stop):
    arm, here = _sag_then_move(monkeypatch, STOPS[stop], rest_move.route)
    assert arm.goal_writes > 30   # the move ran (about 3 s of it at 30 Hz)
    far = {k: round(here[k] - r, 1) for k, r in zip(KEYS, REST, strict=True) if abs(here[k] - r) > 2.0}
    assert far == {}, f"not at rest after the staged move from the stop {stop}: {far}"


@pytest.mark.parametrize("stop", list(STOPS))
def test_positive_control_every_joint_at_once_is_blocked_by_the_table(monkeypatch, stop):
    """The old move (one stage: every joint toward rest at once) from the same sag stops as
    blocked: the case the staging fixes is real in this model, not a lucky pass."""
    with pytest.raises(Blocked):
        _sag_then_move(monkeypatch, STOPS[stop], lambda rest, here: [rest])


def test_positive_control_the_shoulder_first_is_wedged_when_the_arm_sagged_folded(monkeypatch):
    """Without the lift off the table, the stages alone from the folded sag: the shoulder is
    held at stall torque by the gripper's contact with the table."""
    with pytest.raises(Blocked) as stopped:
        _sag_then_move(monkeypatch, STOPS[FOLDED], rest_move.stages)
    assert stopped.value.joints == ["shoulder_lift"]


def test_the_route_lifts_the_gripper_straight_up_only_when_the_arm_lies_near_the_table():
    from orchestrator.sim.kinematics import arm_kinematics

    kinematics = arm_kinematics()
    rest = dict(zip(KEYS, map(float, REST), strict=True))

    def lowest_and_tip(pose):
        q = kinematics.units.from_rig(np.array([pose[k] for k in KEYS]))
        return kinematics.lowest_point_m(q), kinematics.fk(q)[0]

    here = dict(zip(KEYS, map(float, STOPS[FOLDED]), strict=True))
    low, tip = lowest_and_tip(here)
    assert low < 0.001   # it lies on the table
    targets = rest_move.route(rest, here)
    lift = targets[:rest_move.LIFT_STEPS]
    assert targets[rest_move.LIFT_STEPS:] == rest_move.stages(rest, lift[-1])
    heights = []
    for i, waypoint in enumerate(lift, start=1):
        assert waypoint["gripper.pos"] == here["gripper.pos"]
        waypoint_low, waypoint_tip = lowest_and_tip(waypoint)
        assert np.allclose(waypoint_tip[:2], tip[:2], atol=0.002)              # straight up...
        assert waypoint_tip[2] - tip[2] == pytest.approx(rest_move.LIFT_M * i / rest_move.LIFT_STEPS, abs=0.002)
        heights.append(waypoint_low)
    assert heights == sorted(heights) and heights[-1] > low + 0.02             # ...and off the table
    assert len(heights) == rest_move.LIFT_STEPS
    clear = dict(zip(KEYS, [20.0, -30.0, 40.0, 60.0, 0.0, 30.0], strict=True))   # 5 cm above the table
    assert lowest_and_tip(clear)[0] > 0.04
    assert rest_move.route(rest, clear) == rest_move.stages(rest, clear)   # the stages alone
    assert rest_move.NEAR_TABLE_M < lowest_and_tip(rest)[0] < 0.03         # rest is low, but clear
    assert rest_move.route(rest, dict(rest)) == [rest]                      # at rest: nothing to lift
    assert rest_move.lift_off_table({k: here[k] for k in KEYS[:5]}) == []   # a joint unread: no lift


def test_the_stages_lift_the_shoulder_first_and_move_the_gripper_last():
    rest = dict(zip(KEYS, map(float, REST), strict=True))
    here = dict(zip(KEYS, map(float, STOPS["2.5 s into the pick"]), strict=True))
    first, second, third = rest_move.stages(rest, here)
    assert first == {**here, "shoulder_lift.pos": rest["shoulder_lift.pos"]}
    assert second == {**rest, "gripper.pos": here["gripper.pos"]}
    assert third == rest
    assert rest_move.stages(rest, dict(rest)) == [rest]   # at rest already: one stage, nothing moves
    near = {**rest, "elbow_flex.pos": 80.0}
    assert rest_move.stages(rest, near) == [rest]          # only the middle group moves: one stage
