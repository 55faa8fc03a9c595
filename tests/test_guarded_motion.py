"""The one guarded motion (rigs/guarded_motion.py) in the cube reset, through LeRobot's real stack on
the twin's servos in simulated time (`fakes/twin_bus.py`: the twin's STS3215 loops and MuJoCo
scene in this process, behind scservo_sdk's serial port; nothing on the wall clock).

The reset's motions used to be open-loop (`ArmMotion.follow` called `rig.act()` once a step:
the stop key and LeRobot's `max_relative_target` of 10 degrees, nothing else). Measured on the
twin with LeRobot's stack: a hand holding the elbow 2.8 s into a reset pick left its goal 10 degrees ahead
and the servo at stall for 2.1 s, and nothing stopped; an overload on shoulder_lift was first
read 7.95 s after it. Here the same two events, with what the bus carried and what the servos
did as the oracle (goal ticks against present ticks at each write, the loops' torque)."""

from __future__ import annotations

import numpy as np
import pytest

from fakes.twin_bus import twin_rig
from orchestrator.rigs.device_fault import DeviceFault
from orchestrator.rigs.profile import STATE_KEYS
from orchestrator.rigs.twin.arm import TICKS_PER_DEG
from orchestrator.run.motion import ArmMotion, MotionStopped
from orchestrator.run.operator_protocol import AutoOperator
from orchestrator.run.reset import RESETTING

FPS = 30
CUBE = (0.20, 0.06, 0.0)
MARK = (0.20, -0.06, 0.0)
LEAD_DEG = 5.0            # guarded_motion.MAX_LEAD_DEG, a literal: the old code has no such module
FOLLOW_S = 0.3            # guarded_motion.FOLLOW_S
FAULT_TO_HOLD_S = 0.2     # the rule: an alarm is read within 5 steps and the arm held


class Operator(AutoOperator):
    """Does `act()` once the twin's clock passes `at` (checked at every step of the motion, as the
    stop key is); keeps the messages and the confirmations."""

    def __init__(self, twin, at: float, act):
        super().__init__(say=lambda text: None)
        self.twin, self.at, self.act, self.fired_at = twin, at, act, None
        self.messages, self.confirms, self.checks = [], [], 0

    def check_stop(self):
        self.checks += 1
        if self.fired_at is None and self.twin.now >= self.at:
            self.fired_at = self.twin.now
            self.act()

    def message(self, text):
        self.messages.append(text)

    def confirm_move(self, what):
        self.confirms.append((self.twin.now, what))


def _reset_path(rig):
    from orchestrator.policies.pick_place import pick_and_place_path

    here = rig.observe(with_images=False)
    path = pick_and_place_path(np.array([here[k] for k in STATE_KEYS]), CUBE, MARK, 0.03, FPS)
    return [{k: float(v) for k, v in zip(STATE_KEYS, row, strict=True)} for row in path]


def _leads(twin, since=0.0):
    leads = twin.goal_leads_deg(since)
    assert len(leads) >= 100, len(leads)   # the motion wrote goals, many per joint
    return leads


@pytest.fixture
def arm(tmp_path, monkeypatch):
    rig, twin = twin_rig(tmp_path, monkeypatch, cube_xy=CUBE[:2])   # the cube where the path picks it
    yield rig, twin
    rig.disconnect()


def test_a_hand_on_the_elbow_during_a_reset_pick_stops_it_within_the_blocked_rule(arm):
    rig, twin = arm
    start = twin.now
    op = Operator(twin, start + 2.8, lambda: twin.hold("elbow_flex"))   # as measured on the twin: the lift next
    path = _reset_path(rig)
    with pytest.raises(MotionStopped):   # the caller asks what next (run/reset_stop.py)
        ArmMotion(rig, op).follow(path, RESETTING, FPS)
    stopped_at = twin.now
    assert op.fired_at is not None and op.confirms == []
    worst = max(lead for _, _, lead in _leads(twin, start))
    assert worst <= LEAD_DEG + 0.2, f"a goal {worst:.1f} degrees from where its joint was"
    assert any("elbow_flex blocked" in m for m in op.messages), op.messages
    # the elbow pushed against the hand at most the blocked rule's 0.3 s (and a step or two)
    assert twin.stall_s()["elbow_flex"] <= FOLLOW_S + 0.1, twin.stalls
    assert stopped_at < start + len(path) / FPS   # stopped in the pick, the path not run on
    held = twin.goals[-1]
    assert all(abs(g - held[2][i]) <= 2 for i, g in held[1].items())   # the last goal: hold where it is


def test_positive_control_the_same_path_without_a_hand_runs_to_its_end(arm):
    """The path itself is followed (no block, every goal within the lead), so the stop above is the hand's."""
    rig, twin = arm
    op = Operator(twin, float("inf"), lambda: None)
    path = _reset_path(rig)
    ArmMotion(rig, op).follow(path, RESETTING, FPS)
    assert op.confirms == [] and not any("blocked" in m for m in op.messages), op.messages
    assert max(lead for _, _, lead in _leads(twin)) <= LEAD_DEG + 0.2
    end = {k: path[-1][k] for k in STATE_KEYS if k != "gripper.pos"}
    here = twin.degrees()
    assert max(abs(here[k] - v) for k, v in end.items()) < 3.0, (here, end)
    assert len(path) / FPS <= twin.now <= len(path) / FPS + 3.0   # the path's own pace, not slower
    x, y, *_ = twin.sim.cube_pose()
    assert abs(x - MARK[0]) < 0.015 and abs(y - MARK[1]) < 0.015, (x, y)   # picked, carried and put down


def test_an_overload_during_a_reset_carry_is_read_within_5_steps_and_holds_the_arm(arm):
    rig, twin = arm
    start = twin.now
    op = Operator(twin, start + 5.0, lambda: twin.overload("shoulder_lift"))   # carrying, across the table
    with pytest.raises(DeviceFault) as fault:
        ArmMotion(rig, op).follow(_reset_path(rig), RESETTING, FPS)
    assert "shoulder_lift" in str(fault.value) and "overload" in str(fault.value)
    fired = op.fired_at
    after = [(t, goals, present) for t, goals, present in twin.goals if t > fired]
    held = [t for t, goals, present in after if all(abs(g - present[s]) <= 2 for s, g in goals.items())]
    assert held, "no hold (goal := present) written after the overload"
    assert held[0] - fired <= FAULT_TO_HOLD_S, f"fault to hold {held[0] - fired:.3f} s"
    moves = [t for t, goals, present in after if t < held[0]]
    assert len(moves) <= 5, f"{len(moves)} goals written after the overload before the hold"
    assert [t for t, _, _ in after if t > held[0]] == []
    assert op.checks > 100   # the stop key was read all along (one per step)


def test_goals_more_than_the_lead_ahead_would_be_seen():
    """The oracle: a goal 10 degrees from its joint reads as 10 degrees (ticks, not the code's units)."""
    from fakes.twin_bus import InProcessTwin

    twin = InProcessTwin.__new__(InProcessTwin)
    twin.goals = [(1.0, {3: 2000 + round(10 * TICKS_PER_DEG)}, {3: 2000})]
    ((_, joint, lead),) = twin.goal_leads_deg()
    assert joint == "elbow_flex" and lead == pytest.approx(10.0, abs=0.05)


def test_a_late_status_reply_is_not_told_as_every_servo_losing_its_torque(tmp_path, monkeypatch):
    """The hold watcher (`LeRobotRig.servo_problems`) reads Status, then Torque_Enable. A Status
    read that timed out on a loaded machine and was retried leaves the late reply (six 1-byte
    packets, 0) in the buffer; taken as the Torque_Enable answer it said "torque off by itself (a
    reset or a brown-out)" for all six while every register read 1. Simulated time: the twin
    answers the first Status read twice, as the late reply and the retry's."""
    from orchestrator.rigs.twin.feetech import INST_SYNC_READ, REG

    rig, twin = twin_rig(tmp_path, monkeypatch)
    answer, doubled = twin.arm.chain.handle, []

    def late_reply(packet: bytes) -> bytes:
        reply = answer(packet)
        if packet[4] == INST_SYNC_READ and packet[5] == REG["Status"][0] and not doubled:
            doubled.append(reply)
            return reply + reply
        return reply

    monkeypatch.setattr(twin.arm.chain, "handle", late_reply)
    assert twin.arm.registers_now()["torque"] == [1] * 6        # the servos' own registers: all on
    assert rig.servo_problems() == [] and doubled               # the late reply was there, and not told
    twin.arm.release(2)                                          # a real reset of the elbow: still told
    assert rig.servo_problems() == ["elbow_flex (id 3): torque off by itself (a reset or a brown-out)"]
    rig.disconnect()
