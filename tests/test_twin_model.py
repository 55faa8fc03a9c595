"""The twin's STS3215s where a real arm fails, stepped in simulated time (no process, no wall
clock): a stall against a hand in the twin's record, Unloading_Condition's overload bit (the
joint goes limp, Status bit 5 latched until a power cycle), and a calibration error that puts
the reset's grasp beside where it was planned, after the session's first pick has hovered.

The twin's own `TwinArm` (its servo loops and MuJoCo scene) runs in this process; registers are
written as the bus would (`_written`), goals computed with LeRobot's own degree-to-tick formula
(`(ticks - mid) * 360 / 4095`, the shipped calibration's mid), not the twin's conversion."""

from __future__ import annotations

import math

import numpy as np
import pytest

from orchestrator.rigs.twin.feetech import REG

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
KEYS = [f"{j}.pos" for j in JOINTS]
REST = [0, -94, 91, 50, 0, 30]
STALL_NM = 2.94            # the 12 V STS3215's stall torque (datasheet: 30 kg.cm)
ELBOW = 2


class SteppedTwin:
    """The twin's servos and scene, one physics step at a time."""

    def __init__(self, cal_error: dict[str, float] | None = None):
        from orchestrator.design.protocol import Cube, Mark
        from orchestrator.rigs.profile import RigProfile
        from orchestrator.rigs.sim import SimRig
        from orchestrator.rigs.twin.arm import TwinArm, shipped_calibration

        profile = RigProfile.model_validate({"robot": {"type": "sim_so101"}, "cameras": {},
                                             "rest_pose": dict(zip(KEYS, REST, strict=True))})
        self.sim = SimRig(profile, fps=30)
        self.sim.place_cube(Mark(id="parked", x=0.30, y=0.22), Cube())
        self.sim.go_to_rest()
        self.arm = TwinArm(self.sim)
        self.cal = shipped_calibration()
        for name, deg in (cal_error or {}).items():
            self.arm.set_calibration_error(JOINTS.index(name), deg)
        for i in range(6):
            self.write(i, "Torque_Enable", 1)

    def write(self, i: int, name: str, value: int) -> None:
        self.arm.servo(i).put(name, value)
        self.arm._written(i + 1, REG[name][0], REG[name][1])

    def read(self, i: int, name: str) -> int:
        self.arm._refresh(i + 1)
        return self.arm.servo(i).get(name)

    def run(self, seconds: float) -> None:
        for _ in range(round(seconds / self.arm.dt)):
            self.arm.step()

    def goal(self, row) -> None:
        """Goal_Position of every servo for LeRobot's units (degrees; gripper 0-100), by LeRobot's formula."""
        for i, name in enumerate(JOINTS):
            c = self.cal[name]
            if name == "gripper":
                ticks = c["range_min"] + float(row[i]) / 100.0 * (c["range_max"] - c["range_min"])
            else:
                ticks = (c["range_min"] + c["range_max"]) / 2 + float(row[i]) * 4095 / 360
            self.write(i, "Goal_Position", int(round(ticks)))

    def follow(self, rows, fps: int = 30) -> None:
        for row in rows:
            self.goal(row)
            self.run(1.0 / fps)

    def grasp_site(self) -> np.ndarray:
        model, data = self.sim.model, self.sim.data
        return data.site_xpos[model.site("grasp").id].copy()


def _push_elbow(twin: SteppedTwin, ahead_deg: float) -> None:
    """A hand holds the elbow where it is; its goal goes `ahead_deg` further."""
    twin.arm.hold({"elbow_flex": None})
    twin.write(ELBOW, "Goal_Position", twin.read(ELBOW, "Present_Position") + round(ahead_deg * 4095 / 360))


# ------------------------------------------------------------------ stalls

def test_a_hand_held_joint_shows_its_stall_in_the_record_with_its_length_and_load():
    """The elbow held by a hand with its goal 20 degrees on pushes at the stall torque (2.94 N m,
    100 %) and does not move: the twin's record shows one stall on the elbow from the goal's
    write until the hand lets go and the goal is set back (1.0 s, to the 20 ms the gears take to
    cross their play), and none on
    any other joint. A goal 1 degree on (0.65 N m of the 0.0588 N m a tick loop, plus the
    forearm's weight) is no stall (positive control: the definition is 'at its limit', not 'held')."""
    twin = SteppedTwin()
    twin.run(1.0)                                        # settle at rest
    assert twin.arm.stalls.finished == [] and max(twin.arm.stalls.seconds_now(twin.arm.t_s)) == 0.0
    start = twin.arm.t_s
    _push_elbow(twin, 20.0)
    twin.run(1.0)
    during = twin.arm.stalls.seconds_now(twin.arm.t_s)
    twin.arm.hold({})
    twin.write(ELBOW, "Goal_Position", twin.read(ELBOW, "Present_Position"))
    twin.run(0.5)
    stalls = twin.arm.stalls.finished
    assert len(stalls) == 1, stalls
    (stall,) = stalls
    play = 0.03     # the servo first crosses its 1 degree of backlash (~20 ms at full torque)
    assert stall.joint == "elbow_flex" and stall.servo == 3
    assert 0 <= stall.start_s - start <= play and stall.seconds == pytest.approx(1.0, abs=play), stall
    assert stall.load_nm == pytest.approx(STALL_NM, rel=0.01) and stall.load_pct == pytest.approx(100, abs=1)
    assert during[ELBOW] == pytest.approx(1.0, abs=play) and sum(during) == during[ELBOW]
    assert not twin.arm.latched.any()                    # 1 s: under Protection_Time (2 s)

    control = SteppedTwin()
    control.run(1.0)
    _push_elbow(control, 1.0)
    control.run(1.0)
    assert control.arm.stalls.finished == [] and max(control.arm.stalls.seconds_now(control.arm.t_s)) == 0.0
    assert 0.3 < abs(control.arm.loops[ELBOW].torque_nm) < 0.9 * STALL_NM, control.arm.loops[ELBOW].torque_nm


# ------------------------------------------------------------------ Unloading_Condition

def test_unloading_condition_overload_bit_makes_the_joint_limp_and_latches_until_a_power_cycle():
    """Unloading_Condition 44 (the factory's: bit 5, overload, set) on the elbow pushing against a
    hand: after Protection_Time (200: 2 s) of load over Overload_Torque (80 %) the servo unloads:
    Torque_Enable reads 0, Status 32; the hand lets go and for a second the elbow's motor
    applies no torque at all (the scene's actuator input, MuJoCo's `ctrl`) while the elbow turns
    by itself (limp: gravity moves it).
    Torque_Enable 1 is refused until the arm's power is cycled; then Status is 0 and torque on
    holds. Positive control: Unloading_Condition 12 (bit 5 clear) trips too but keeps torque on,
    limited to Protective_Torque (20 %), and the bit goes when the load does."""
    twin = SteppedTwin()
    twin.run(1.0)
    assert twin.read(ELBOW, "Unloading_Condition") == 44 and twin.read(5, "Unloading_Condition") == 12
    _push_elbow(twin, 20.0)
    twin.run(1.9)
    before = (twin.read(ELBOW, "Torque_Enable"), twin.read(ELBOW, "Status"))
    twin.run(0.2)
    tripped = (twin.read(ELBOW, "Torque_Enable"), twin.read(ELBOW, "Status"), twin.arm.loops[ELBOW].torque_nm)
    left_at = twin.read(ELBOW, "Present_Position")
    twin.arm.hold({})
    actuator = twin.arm.act[ELBOW]
    pushed = 0.0
    for _ in range(round(1.0 / twin.arm.dt)):
        twin.arm.step()
        pushed = max(pushed, abs(float(twin.sim.data.ctrl[actuator])))
    turned = abs(twin.read(ELBOW, "Present_Position") - left_at) * 360 / 4095
    twin.write(ELBOW, "Torque_Enable", 1)                # LeRobot's torque on: refused
    twin.run(0.5)
    refused = (twin.read(ELBOW, "Torque_Enable"), twin.read(ELBOW, "Status"), bool(twin.arm.torque_on[ELBOW]))
    twin.arm.power_cycle()
    cycled = twin.read(ELBOW, "Status")
    twin.write(ELBOW, "Torque_Enable", 1)
    here = twin.read(ELBOW, "Present_Position")
    twin.run(0.5)
    assert before == (1, 0), before
    assert tripped == (0, 32, 0.0), tripped
    assert pushed == 0.0 and turned > 2.0, (pushed, turned)   # limp
    assert refused == (0, 32, False), refused
    assert cycled == 0 and twin.read(ELBOW, "Torque_Enable") == 1
    assert abs(twin.read(ELBOW, "Present_Position") - here) < 40
    events = [e["event"] for e in twin.arm.take_events() if "event" in e]
    assert events == ["overload_unload", "power_cycle"], events

    control = SteppedTwin()
    control.write(ELBOW, "Unloading_Condition", 12)
    control.run(1.0)
    _push_elbow(control, 20.0)
    control.run(2.1)
    limited = (control.read(ELBOW, "Torque_Enable"), control.read(ELBOW, "Status"),
               abs(control.arm.loops[ELBOW].torque_nm))
    control.arm.hold({})
    control.write(ELBOW, "Goal_Position", control.read(ELBOW, "Present_Position"))
    control.run(0.5)
    assert limited[:2] == (1, 32) and limited[2] <= 0.2 * STALL_NM + 1e-6, limited
    assert control.read(ELBOW, "Status") == 0 and not control.arm.latched.any()


# ------------------------------------------------------------------ calibration error and the hover

def _grasp_rows(hover_s: float):
    """The reset's path from rest to a cube at (0.25, 0.0) up to the grasp, and the index where the
    hover (if any) begins."""
    from orchestrator.policies import pick_place as pp

    path = pp.pick_and_place_path(np.array(REST, float), (0.25, 0.0, 0.0), (0.20, 0.10, 0.0), 0.03, 30,
                                  hover_s=hover_s)
    to_above = round(pp.TO_ABOVE_S * 30)
    down = round(pp.DOWN_S * 30)
    return path, to_above, to_above + round(hover_s * 30) + down


def test_the_first_pick_hovers_above_the_cube_before_it_descends():
    """`hover_s` adds that many seconds of one pose, the jaws open above the cube, between the
    move there and the descent; without it the descent follows at once."""
    from orchestrator.policies import pick_place as pp

    hovering, to_above, _ = _grasp_rows(pp.HOVER_S)
    plain, _, _ = _grasp_rows(0.0)
    n = round(pp.HOVER_S * 30)
    assert n >= 30 and len(hovering) == len(plain) + n
    above = hovering[to_above - 1]
    assert np.allclose(hovering[to_above:to_above + n], above, atol=1e-9)
    assert np.abs(hovering[to_above + n] - above).max() > 0.01       # the descent starts after it
    assert np.abs(plain[to_above] - plain[to_above - 1]).max() > 0.01  # without: at once
    assert np.array_equal(hovering[to_above + n:], plain[to_above:])


def _rotation_m(point: np.ndarray, anchor: np.ndarray, axis: np.ndarray, deg: float) -> float:
    """How far `point` moves when turned `deg` about the line through `anchor` along `axis`:
    2 r sin(deg / 2), r its distance from the line."""
    p = point - anchor
    r = float(np.linalg.norm(p - np.dot(p, axis) * axis))
    return 2 * r * math.sin(math.radians(abs(deg)) / 2)


def test_a_calibration_offset_at_the_shoulder_moves_the_grasp_by_the_rotation_it_makes():
    """`calibration_offset_deg` on shoulder_lift: during the first pick's hover the jaws stand
    where the correct arm's are turned that many degrees about the shoulder_lift axis (MuJoCo's
    own anchor and axis: 2 r sin(1.5 deg), about 1.2 cm for 3 degrees), both ways. At the grasp,
    planned 5 mm above the table: -3 degrees leaves the jaws that far above and behind it (the
    cube missed); +3 degrees would put them 1 cm into the table, which stops them: the grasp
    point then moves less than half its rotation (the scripted grasp meets the calibration
    error, as on a real arm)."""
    from orchestrator.policies import pick_place as pp

    rows, to_above, grasp_at = _grasp_rows(pp.HOVER_S)
    sites = {}
    for deg in (0.0, 3.0, -3.0):
        twin = SteppedTwin({"shoulder_lift": deg} if deg else None)
        twin.follow(rows[:to_above + 15])                # half the hover
        hover = twin.grasp_site()
        twin.follow(rows[to_above + 15:grasp_at])
        twin.run(0.5)
        sites[deg] = (hover, twin.grasp_site())
        if not deg:
            j = twin.sim.model.joint("shoulder_lift").id
            anchor, axis = twin.sim.data.xanchor[j].copy(), twin.sim.data.xaxis[j].copy()
    hover_m = _rotation_m(sites[0.0][0], anchor, axis, 3.0)
    grasp_m = _rotation_m(sites[0.0][1], anchor, axis, 3.0)
    assert 0.01 < hover_m < 0.02 and 0.01 < grasp_m < 0.02, (hover_m, grasp_m)
    for deg in (3.0, -3.0):
        moved = float(np.linalg.norm(sites[deg][0] - sites[0.0][0]))
        assert moved == pytest.approx(hover_m, rel=0.15), (deg, moved, hover_m)
    above = sites[-3.0][1] - sites[0.0][1]
    assert float(np.linalg.norm(above)) == pytest.approx(grasp_m, rel=0.15) and above[2] > 0.008, (above, grasp_m)
    into_table = float(np.linalg.norm(sites[3.0][1] - sites[0.0][1]))
    assert into_table < grasp_m / 2, (into_table, grasp_m)


def test_a_calibration_offset_fault_is_checked_and_holds_from_the_start():
    """`calibration_offset_deg` takes a servo and degrees (within 30), no step: it is there from
    the twin's start (`FaultPlan.from_start`) and never fires as a one-shot fault."""
    from orchestrator.rigs.twin.fault_plan import FaultPlan, fault_problems

    good = {"kind": "calibration_offset_deg", "servo": "shoulder_lift", "deg": -3}
    assert fault_problems([good]) == []
    bad = [{"kind": "calibration_offset_deg", "servo": "shoulder_lift", "deg": 45},
           {"kind": "calibration_offset_deg", "servo": "shoulder_lift", "deg": 2, "at_step": 3},
           {"kind": "calibration_offset_deg", "deg": 2}]
    problems = fault_problems(bad)
    assert problems == ["twin: fault 1: deg must be a number of degrees between -30 and 30",
                        "twin: fault 2 (calibration_offset_deg): unknown field at_step",
                        "twin: fault 3 (calibration_offset_deg): missing servo"], problems
    plan = FaultPlan([good, {"kind": "overload", "servo": 2}])
    plan.begin_episode()
    assert plan.from_start() == [good]
    assert [f["kind"] for f in plan.due()] == ["overload"] and plan.due() == []


def test_a_stall_line_round_trips_through_the_wire_log(tmp_path):
    """A recorded stall as the twin's wire log writes it and the tests' reader finds it."""
    from orchestrator.rigs.twin.stalls import Stall
    from orchestrator.rigs.twin.wire_log import WireLog as Writer
    from support.wirelog import WireLog

    writer = Writer(tmp_path / "w.jsonl")
    writer.line(Stall("elbow_flex", 3, 2.0, 0.45, 2.94, 100.0).line(1000.0))
    writer.line(Stall("gripper", 6, 3.0, 0.1, 1.7, 58.0, ongoing=True).line(1000.0))
    writer.line({"t": 1004.0, "event": "power_cycle", "servo": [1, 2, 3, 4, 5, 6]})
    writer.close()
    log = WireLog.read(tmp_path / "w.jsonl")
    assert log.stalls(0.3) == [{"t": 1002.0, "event": "stall", "joint": "elbow_flex", "servo": 3, "s": 0.45,
                                "load_nm": 2.94, "load_pct": 100.0, "ongoing": False}]
    assert [s["joint"] for s in log.stalls()] == ["elbow_flex", "gripper"] and len(log.events()) == 3
