"""A grasp held at full grip trips the gripper's overload protection, as on a real STS3215
, and what the orchestrator does then: an expected gripper trip during
a grasp is a recorded safety event, not a servo alarm that aborts the trial, unless it persists
(`rigs/servo_alarms.AlarmWatch`)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from orchestrator.rigs.so101.servo_alarms import GRIPPER_TRIP_EVENT, AlarmWatch, ServoAlarm
from support.campaign_files import SHIPPED_TWIN_RIG, TWIN_GRASP_MARK_XY, with_max_relative_target, without_cameras
from support.twin_time import wait_physics
from support.wirelog import WireLog

MOTORS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


class FeetechMotorsBus:
    """A stand-in with the registers AlarmWatch reads (its class name is what servo_alarms checks)."""

    def __init__(self, status: dict[str, int], goal: int, present: int):
        self.motors = {m: SimpleNamespace(id=i) for i, m in enumerate(MOTORS, 1)}
        self.values = {"Status": {m: status.get(m, 0) for m in MOTORS}, "Torque_Enable": {m: 1 for m in MOTORS},
                       "Goal_Position": {"gripper": goal}, "Present_Position": {"gripper": present}}

    def sync_read(self, name, motors=None, normalize=True, num_retry=0):
        values = self.values[name]
        return {m: values[m] for m in (motors or values)}


def _robot(status, goal=2018, present=2300):
    return SimpleNamespace(bus=FeetechMotorsBus(status, goal, present), config=SimpleNamespace(num_read_retries=0))


@pytest.mark.off_clock
def test_a_gripper_trip_while_squeezing_is_an_event_and_anything_else_aborts():
    watch = AlarmWatch()
    squeezing = _robot({"gripper": 32}, goal=2018, present=2300)   # held 282 ticks open by the cube
    watch.check(squeezing)
    watch.check(squeezing)
    assert watch.take_events() == [GRIPPER_TRIP_EVENT] and watch.take_events() == []
    with pytest.raises(ServoAlarm, match=r"gripper \(id 6\): overload"):
        watch.check(_robot({"gripper": 32}, goal=2300, present=2300))   # opened, still tripped: persists
    with pytest.raises(ServoAlarm, match=r"elbow_flex \(id 3\): overload"):
        watch.check(_robot({"elbow_flex": 32}))
    with pytest.raises(ServoAlarm, match="overheating"):
        watch.check(_robot({"gripper": 32 | 4}))
    watch.check(_robot({}))                                          # no alarm: nothing happens
    assert watch.take_events() == []


@pytest.mark.off_clock
def test_a_gripper_trip_that_clears_as_the_jaws_arrive_is_no_alarm_one_that_persists_is():
    """The race a loaded host widens: both Status reads show the gripper's protection while the
    jaws still open toward their goal, then the goal and present reads find them arrived (no
    longer squeezing) and the protection cleared. That is no alarm; the same reads with the
    protection still set on the read after them is one (positive control)."""

    class Clearing(FeetechMotorsBus):
        def __init__(self, statuses):
            super().__init__({}, goal=2300, present=2300)
            self.statuses = list(statuses)
            self.status_reads = 0

        def sync_read(self, name, motors=None, normalize=True, num_retry=0):
            if name == "Status":
                self.status_reads += 1
                self.values["Status"]["gripper"] = self.statuses.pop(0) if self.statuses else 0
            return super().sync_read(name, motors, normalize, num_retry)

    Clearing.__name__ = "FeetechMotorsBus"   # what servo_alarms checks

    def robot(statuses):
        return SimpleNamespace(bus=Clearing(statuses), config=SimpleNamespace(num_read_retries=0))

    cleared = robot([32, 32, 0])
    AlarmWatch().check(cleared, expect_torque=False)
    assert cleared.bus.status_reads == 3
    with pytest.raises(ServoAlarm, match=r"gripper \(id 6\): overload"):
        AlarmWatch().check(robot([32, 32, 32]), expect_torque=False)


def test_a_scripted_grasp_held_5_s_trips_the_gripper_protection_and_the_trial_goes_on(tmp_path):
    """The scripted pick on the twin, a 10 s episode: the gripper closes on the cube at 4.1-5.0 s
    and holds it to the end (5 s at full grip: LeRobot's Overload_Torque 25 %, Protection_Time
    2 s). The wire log shows the gripper's Status bit 5 from 2-3.5 s after the grip; the
    episode ends normally, the cube lifted (20 % Protective_Torque still holds a 30 g cube), the
    trip recorded as the `gripper_overload_protection` event; opening the gripper clears it."""
    from orchestrator.design.protocol import Cube, Mark
    from orchestrator.policies.base import EpisodeContext
    from orchestrator.policies.scripted import T_CLOSE, ScriptedPickPolicy
    from orchestrator.rigs.factory import make_rig
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.client import start_twin
    from orchestrator.run.control_loop import run_episode
    from orchestrator.run.recording import EpisodeRecorder

    fps, log_path = 15, tmp_path / "wire.jsonl"
    # the squeeze this test is about is the gripper's goal far past the cube: the shipped profile's
    # max_relative_target (3, doctor's 90 deg/s at 30 fps) keeps the goal 3 of 0-100 past where the
    # jaws are, near the protection's threshold; 10 (150 deg/s at this test's 15 fps) squeezes fully
    profile = tmp_path / "so101_twin.yaml"
    # and no cameras: the assertions are the bus's and the physics' (two 320x240 renders at 30 fps
    # for the 10 s episode, and the render process's start, saved)
    profile.write_text(without_cameras(with_max_relative_target(SHIPPED_TWIN_RIG.read_text(), 10.0)))
    with start_twin(load_rig(profile), wire_log=log_path) as twin:
        rig = make_rig(twin.rig)
        rig.connect()
        try:
            # the cube clear of the gripper at rest, however far the arm sagged before torque came on
            # (tests/test_rest_clearance.py: at (0.16, 0) it started inside the gripper, was thrown out
            # on a loaded machine, and the jaws landed on it)
            mark = Mark(id="M01", x=TWIN_GRASP_MARK_XY[0], y=TWIN_GRASP_MARK_XY[1])
            context = EpisodeContext(mark=mark, cube=Cube(), seed=0, fps=fps, duration_s=10.0, task="")
            recorder = EpisodeRecorder(tmp_path / "c", "ep", {}, fps, fps, realtime=True)
            rig.prepare_layout(context.mark, context.cube, 0)
            policy = ScriptedPickPolicy(aim_noise_mm=0)
            policy.reset(context)
            t0 = time.time()
            facts, _ = run_episode(rig, policy, context, recorder)
            recorder.discard()
            t_end = time.time()
            for _ in range(15):                  # the policy opens the gripper: the load goes
                rig.act({**{k: v for k, v in rig.observe(with_images=False).items() if k.endswith(".pos")},
                         "gripper.pos": 40.0})
                wait_physics(twin, 1 / fps)
            wait_physics(twin, 0.3)
            after_rest = rig.robot.bus.sync_read("Status", normalize=False, num_retry=3)
        finally:
            rig.disconnect()
    log = WireLog.read(log_path)
    gripper_status = [(line["t"] - t0, line["data"][0]) for line in log.packets
                      if line["dir"] == "out" and line["id"] == 6 and line["addr"] == 65 and line["inst"] == "SYNC_READ"
                      and t0 <= line["t"] <= t_end]
    tripped = [t for t, value in gripper_status if value & 32]
    assert len(gripper_status) >= 20, gripper_status          # the orchestrator reads Status every 5 steps
    assert tripped, gripper_status
    # it cannot trip before Protection_Time after the grip starts, and it does within ~1.5 s of that
    assert T_CLOSE[0] + 2.0 <= tripped[0] <= T_CLOSE[1] + 3.5, (tripped[0], gripper_status)
    assert all(value & 32 for t, value in gripper_status if t > tripped[0] + 0.1)  # held to the end
    assert facts.physics_success, facts
    # the twin's physics sends its progress ladder with the facts: every stage, in order
    times = [facts.ladder[stage] for stage in ("reached", "grasped", "lifted", "held")]
    assert None not in times and times == sorted(times), facts.ladder
    # ... and its longest hold (the physics label's note): a success is a hold of the default test's 1 s at least
    assert facts.longest_hold_s is not None and facts.longest_hold_s >= 1.0 - 1e-9, facts
    assert GRIPPER_TRIP_EVENT in facts.safety_events, facts.safety_events
    assert after_rest == dict.fromkeys(MOTORS, 0)
