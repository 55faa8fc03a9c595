"""The twin's STS3215s as their memory table describes them: each register
behaviour read or written through LeRobot's `FeetechMotorsBus` (LeRobot's SOFollower and
scservo_sdk, unchanged).

The servos' behaviour is checked on the twin's own servos and scene in this process, on a
simulated clock (`tests/fakes/twin_bus.py`: the same `TwinArm` answers the same packets as the
twin's process does, and a wait steps its physics), so what a servo did in a span does not depend
on the machine's load: each such test has a fresh arm as LeRobot's connect leaves it, and carries
`off_clock` (it starts nothing on the wall clock). What only the twin's process does (its start
with the profile's calibration and EEPROM, its adapter latency on the pseudo-terminal) runs on a
started twin."""

from __future__ import annotations

import contextlib
import time

import pytest

from orchestrator.rigs.twin import sts3215
from support.campaign_files import servo_rig
from support.repo import REPO
from support.twin_time import wait_physics

SHIPPED_TWIN_RIG = REPO / "hardware" / "so101_twin.yaml"
TICKS_PER_DEG = 4095 / 360


def _stepped_arm(folder, monkeypatch, supply_v: float = 12.0):
    """(twin, bus, rig): LeRobot's stack connected to the twin's servos in this process
    (`fakes.twin_bus.InProcessTwin`; `twin.advance(s)` runs `s` of its physics)."""
    from fakes.twin_bus import twin_rig

    rig, twin = twin_rig(folder, monkeypatch, supply_v=supply_v)
    return twin, rig.robot.bus, rig


@pytest.fixture
def arm(tmp_path, monkeypatch):
    twin, bus, rig = _stepped_arm(tmp_path, monkeypatch)
    try:
        yield twin, bus, rig
    finally:
        rig.disconnect()


def _raw(bus, name: str, motor: str) -> int:
    return int(bus.read(name, motor, normalize=False, num_retry=3))


@contextlib.contextmanager
def _torque_off(bus, motor: str | None = None):
    """LeRobot's `bus.torque_disabled()` (Torque_Enable 0 and Lock 0, then 1 and 1)."""
    motors = [motor] if motor else list(bus.motors)
    for m in motors:
        _w(bus, "Torque_Enable", m, 0)
        _w(bus, "Lock", m, 0)
    yield
    for m in motors:
        _w(bus, "Torque_Enable", m, 1)
        _w(bus, "Lock", m, 1)


def _w(bus, name: str, motor: str, value: int) -> None:
    bus.write(name, motor, value, normalize=False, num_retry=3)


def _settle(twin, bus, motor: str, seconds: float = 1.0) -> int:
    """Present_Position after `seconds` of the twin's physics."""
    twin.advance(seconds)
    return _raw(bus, "Present_Position", motor)


def _raise_upper_arm(twin, bus) -> int:
    """Shoulder lift to horizontal (the most gravity load), elbow straight: the goal in ticks."""
    here = {m: _raw(bus, "Present_Position", m) for m in ("shoulder_lift", "elbow_flex", "wrist_flex")}
    mid = {"shoulder_lift": (921 + 3201) // 2, "elbow_flex": (928 + 3136) // 2, "wrist_flex": (972 + 3138) // 2}
    goal = {"shoulder_lift": mid["shoulder_lift"] - round(20 * TICKS_PER_DEG), "elbow_flex": mid["elbow_flex"],
            "wrist_flex": mid["wrist_flex"]}
    for k in range(1, 41):   # 2 s, as a policy would move it
        bus.sync_write("Goal_Position", {m: round(here[m] + (goal[m] - here[m]) * k / 40) for m in goal},
                       normalize=False)
        twin.advance(0.05)
    twin.advance(1.0)
    return goal["shoulder_lift"]


# ------------------------------------------------------------------ position loop

@pytest.mark.off_clock
def test_stiffness_follows_p_coefficient(arm):
    """The upper arm held horizontal sags under its own weight by load / stiffness: at
    P_Coefficient 8 the stiffness is half of P 16's 0.0588 N m a tick (a real STS3215: 20-30
    ticks at 1.47 N m; the Menagerie actuator's 1.53 N m a tick would sag under a tick);
    P 64 sags an eighth of P 8."""
    twin, bus, rig = arm
    _w(bus, "P_Coefficient", "shoulder_lift", 8)
    goal = _raise_upper_arm(twin, bus)
    sag8 = goal - _raw(bus, "Present_Position", "shoulder_lift")
    load8 = twin.arm.loops[1].torque_nm
    _w(bus, "P_Coefficient", "shoulder_lift", 64)
    sag64 = goal - _settle(twin, bus, "shoulder_lift")
    assert abs(load8) > 0.25, load8                        # it holds real weight
    assert abs(load8) / abs(sag8) == pytest.approx(sts3215.KP_NM_PER_TICK_AT_P16 / 2, rel=0.25), (load8, sag8)
    assert abs(sag64) <= abs(sag8) / 4, (sag8, sag64)


@pytest.mark.off_clock
def test_acceleration_is_a_ramp(arm):
    """Acceleration 254 (LeRobot's: 25,400 ticks/s^2) reaches 45 degrees of pan in ~0.3 s;
    Acceleration 5 (500 ticks/s^2) has moved under 3 degrees after 0.3 s."""
    twin, bus, rig = arm
    moved = {}
    for acc in (254, 5):
        start = _raw(bus, "Present_Position", "shoulder_pan")
        _w(bus, "Acceleration", "shoulder_pan", acc)
        _w(bus, "Goal_Position", "shoulder_pan", start + round(45 * TICKS_PER_DEG))
        twin.advance(0.3)
        moved[acc] = (_raw(bus, "Present_Position", "shoulder_pan") - start) / TICKS_PER_DEG
        _w(bus, "Goal_Position", "shoulder_pan", start)
        twin.advance(2.5)
    assert moved[254] > 30, moved
    assert moved[5] < 3, moved


@pytest.mark.off_clock
def test_protection_current_limits_the_torque(arm):
    """Protection_Current 25 (0.16 A, 6 % of the 2.7 A stall current) on the shoulder lift:
    Present_Current never reads above 25 and the raised arm cannot hold itself up."""
    twin, bus, rig = arm
    goal = _raise_upper_arm(twin, bus)
    with _torque_off(bus, "shoulder_lift"):
        _w(bus, "Protection_Current", "shoulder_lift", 25)
    _w(bus, "Goal_Position", "shoulder_lift", goal)
    currents = []
    for _ in range(10):
        currents.append(_raw(bus, "Present_Current", "shoulder_lift"))
        twin.advance(0.1)
    sag = goal - _raw(bus, "Present_Position", "shoulder_lift")
    assert max(currents) <= 25 and max(currents) >= 20, currents
    assert abs(sag) > 100, sag


@pytest.mark.off_clock
def test_backlash_takes_time_to_cross_when_the_torque_reverses():
    """The loop alone (no LeRobot: the play is inside the servo): after a torque reversal
    nothing reaches the output until the motor side has crossed the 1 degree of play,
    sqrt(2 * play * J / torque) = 18 ms at full torque."""
    loop = sts3215.ServoLoop(ticks_per_rad=651.9)
    regs = sts3215.Registers(p=16, d=0)
    dt = 0.0005
    loop.goal = loop.setpoint = 0.1
    assert loop.step(regs, 0.0, 0.0, dt) == 0.0          # first crossing half the play
    for _ in range(200):
        loop.step(regs, 0.0, 0.0, dt)
    assert loop.torque_nm > 2.9
    loop.goal = loop.setpoint = -0.1
    dead = 0
    while loop.step(regs, 0.0, 0.0, dt) == 0.0:
        dead += 1
    expected = (2 * 0.01745 * sts3215.ROTOR_INERTIA / 2.94) ** 0.5
    assert dead * dt == pytest.approx(expected, rel=0.1), (dead * dt, expected)


# ------------------------------------------------------------------ overload protection

def _synced(bus, name: str, motor: str = "shoulder_lift") -> int:
    """A register by LeRobot's sync read, which does not raise on a status packet's error bits
    (its single `read` does). Retried as every read here is (`_raw`): a test process that loses
    the CPU between scservo_sdk's poll and its timeout check fails a reply the twin sent on time
    (seen once in a fresh-machine run); the error bit this reads is in every reply alike."""
    return int(bus.sync_read(name, [motor], normalize=False, num_retry=3)[motor])


def _status(bus, motor: str = "shoulder_lift") -> int:
    return _synced(bus, "Status", motor)


def _overload_soon(twin, bus) -> int:
    """Overload_Torque 10 % and Protection_Time 50 (0.5 s) on the shoulder lift holding the raised
    arm (its load is above 10 % of the stall torque): its protection trips 0.5 s on."""
    goal = _raise_upper_arm(twin, bus)
    with _torque_off(bus, "shoulder_lift"):
        _w(bus, "Overload_Torque", "shoulder_lift", 10)
        _w(bus, "Protection_Time", "shoulder_lift", 50)
    bus.sync_write("Goal_Position", {"shoulder_lift": goal}, normalize=False)
    return goal


@pytest.mark.off_clock
def test_an_overload_unloads_the_servo_and_its_alarm_holds_until_the_arm_is_power_cycled(arm):
    """Unloading_Condition 44 (the factory's; LeRobot does not write it): the shoulder lift's
    protection trips, the servo unloads (Torque_Enable reads 0, the raised arm falls) and Status
    bit 5 stays: LeRobot's torque-on write raises on it and is refused (Torque_Enable still 0),
    and a second later, the load long gone, the bit is still there. The twin's `power_cycle` op
    (the arm's power off and on) clears it; LeRobot's configure then switches torque on again."""
    twin, bus, rig = arm
    goal = _overload_soon(twin, bus)
    twin.advance(0.8)
    tripped = (_status(bus), _synced(bus, "Torque_Enable"))
    twin.advance(0.5)
    fallen = goal - _synced(bus, "Present_Position")
    with pytest.raises(RuntimeError, match="Overload"):
        bus.write("Torque_Enable", "shoulder_lift", 1, normalize=False)
    twin.advance(1.0)
    refused = (_status(bus), _synced(bus, "Torque_Enable"))
    latched = [bool(b) for b in twin.arm.latched]
    twin.arm.power_cycle()                                    # the twin's `power_cycle` op
    cycled = (_status(bus), _raw(bus, "Torque_Enable", "shoulder_lift"))
    rig.robot.configure()
    on = _raw(bus, "Torque_Enable", "shoulder_lift")
    assert tripped == (32, 0), tripped
    assert abs(fallen) > 100, fallen                           # limp: the raised arm fell
    assert refused == (32, 0), refused
    assert latched == [False, True, False, False, False, False], latched
    assert cycled == (0, 0) and on == 1, (cycled, on)


@pytest.mark.off_clock
def test_overload_protection_trips_after_protection_time_and_clears_when_the_load_goes(arm):
    """The positive control, Unloading_Condition 12 (its overload bit clear): the protection
    trips after Protection_Time but keeps torque on, Status bit 5 set and the output limited to
    Protective_Torque (20 %); LeRobot's single `read` then raises on the status packet's error
    byte (its sync read does not look). Switching its torque off (the load goes) clears it."""
    twin, bus, rig = arm
    with _torque_off(bus, "shoulder_lift"):
        _w(bus, "Unloading_Condition", "shoulder_lift", 12)
    goal = _overload_soon(twin, bus)

    def status() -> int:
        return _status(bus)

    twin.advance(0.25)
    early = status()
    twin.advance(0.6)
    tripped = status()
    protected, torque_nm = twin.arm.loops[1].protected, twin.arm.loops[1].torque_nm
    with pytest.raises(RuntimeError, match="Overload"):
        bus.read("Status", "shoulder_lift", normalize=False, num_retry=3)
    # the rig's move to rest would, rightly, refuse to start on an alarm: switch the servo's
    # torque off instead (a sync write: no status reply to raise on), which clears it too
    bus.sync_write("Torque_Enable", {"shoulder_lift": 0}, normalize=False)
    twin.advance(0.5)
    cleared = status()
    assert early == 0 and tripped == 32, (early, tripped)
    assert protected and abs(torque_nm) <= 0.2 * 2.94 + 1e-6, (protected, torque_nm)
    assert cleared == 0, (cleared, twin.arm.loops[1].torque_nm, goal)


@pytest.mark.off_clock
def test_a_hand_held_joint_shows_its_stall_in_the_twins_state(arm):
    """The twin's `hold` op (a hand on the elbow) and a goal 20 degrees off through LeRobot's bus:
    the twin's state shows the elbow at stall while it lasts (`stall_s`) and, once the hand lets
    go and the goal comes back, one recorded stall of about that length at the stall torque,
    begun while the hand held it (`Twin.stalls`: the twin's state answers these, server.py);
    no other joint stalls 0.3 s. (That a stall's time is epoch seconds in the wire log:
    tests/test_twin_wire_log.py.)"""
    twin, bus, rig = arm
    tw = twin.arm
    here = _raw(bus, "Present_Position", "elbow_flex")
    tw.hold({"elbow_flex": None})                          # the twin's `hold` op
    held_at = tw.t_s
    try:
        _w(bus, "Goal_Position", "elbow_flex", here - round(20 * TICKS_PER_DEG))   # (+20 is past its limit)
        for _ in range(200):                               # at most 10 s of the twin's physics
            if (during := tw.stalls.seconds_now(tw.t_s))[2] >= 0.5:
                break
            twin.advance(0.05)
        assert during[2] >= 0.5, during
    finally:
        tw.hold({})
    let_go_at = tw.t_s
    _w(bus, "Goal_Position", "elbow_flex", here)
    for _ in range(200):
        if (stalls := _stalls(twin, 0.3)) and not stalls[-1]["ongoing"]:
            break
        twin.advance(0.05)
    assert [s["joint"] for s in stalls] == ["elbow_flex"], stalls
    assert 0.5 <= stalls[0]["s"] < 2.0 and stalls[0]["load_pct"] > 95 and stalls[0]["servo"] == 3, stalls
    assert held_at <= stalls[0]["t"] < let_go_at, (held_at, stalls[0], let_go_at)   # the twin's clock here
    assert max(during[:2] + during[3:]) < 0.3, during   # (the push's reaction may load the shoulder briefly)


def _stalls(twin, min_s: float) -> list[dict]:
    """The twin's `state` answer's `stalls` (server.py `_stall_state`, `Twin.stalls`), each at
    least `min_s` long; `t` in the twin's clock (seconds)."""
    tw = twin.arm
    recorded = tw.stalls.finished + tw.stalls.ongoing(tw.t_s, tw.stall_nm)
    return [stall.line(0.0) for stall in recorded if stall.seconds >= min_s]


# ------------------------------------------------------------------ registers

@pytest.mark.off_clock
def test_torque_limit_is_loaded_from_max_torque_limit_at_power_up(arm):
    """Max_Torque_Limit is EEPROM: a write (LeRobot's configure writes 500 on the gripper, with
    Lock 0 so it is saved) leaves the active Torque_Limit as it was loaded at power-up, until
    the servo restarts (`servo_reset`). A Torque_Limit write acts at once: 50 (5 %) on the
    shoulder lift drops the raised arm (0.15 N m cannot hold its weight)."""
    twin, bus, rig = arm
    before = _raw(bus, "Torque_Limit", "gripper")
    with _torque_off(bus, "gripper"):
        _w(bus, "Max_Torque_Limit", "gripper", 700)
    written = _raw(bus, "Torque_Limit", "gripper")
    twin.arm.power_up(5)                                  # the `servo_reset` fault on the gripper
    after = _raw(bus, "Torque_Limit", "gripper")
    goal = _raise_upper_arm(twin, bus)
    _w(bus, "Torque_Limit", "shoulder_lift", 50)
    sag = goal - _settle(twin, bus, "shoulder_lift", 1.5)
    assert written == before != 700 and after == 700, (before, written, after)
    assert abs(sag) > 200, sag


@pytest.mark.off_clock
def test_homing_offset_shifts_present_position(arm):
    """Present_Position = raw - Homing_Offset: +500 on Homing_Offset reads 500 ticks less."""
    twin, bus, rig = arm
    before = _raw(bus, "Present_Position", "wrist_roll")
    offset = _raw(bus, "Homing_Offset", "wrist_roll")
    with _torque_off(bus, "wrist_roll"):
        _w(bus, "Homing_Offset", "wrist_roll", offset + 500)
        shifted = _raw(bus, "Present_Position", "wrist_roll")
        _w(bus, "Homing_Offset", "wrist_roll", offset)
    back = _raw(bus, "Present_Position", "wrist_roll")
    assert offset == -1042
    assert abs((before - shifted) % 4096 - 500) <= 2, (before, shifted)
    assert abs(back - before) <= 2


@pytest.mark.off_clock
def test_goal_position_is_sign_magnitude_and_clamped_to_the_limits(arm):
    """A goal of -400 ticks (LeRobot encodes the sign in bit 15) ends at Min_Position_Limit,
    not at +400; a Max_Position_Limit written with Lock 1 acts but is lost at power-up, one
    written with Lock 0 (LeRobot's torque_disabled) is kept."""
    twin, bus, rig = arm
    low = _raw(bus, "Min_Position_Limit", "shoulder_pan")
    _w(bus, "Goal_Position", "shoulder_pan", -400)
    at_min = _settle(twin, bus, "shoulder_pan", 2.0)
    here = _raw(bus, "Present_Position", "shoulder_pan")
    _w(bus, "Goal_Position", "shoulder_pan", 2047)
    twin.advance(2.0)
    _w(bus, "Max_Position_Limit", "shoulder_pan", 2047 + 100)          # Lock is 1 (torque on)
    _w(bus, "Goal_Position", "shoulder_pan", 3000)
    at_max = _settle(twin, bus, "shoulder_pan", 2.0)
    twin.arm.power_up(0)                                  # the `servo_reset` fault on shoulder_pan
    unsaved = _raw(bus, "Max_Position_Limit", "shoulder_pan")
    with _torque_off(bus, "shoulder_pan"):                             # Lock 0
        _w(bus, "Max_Position_Limit", "shoulder_pan", 3000)
    twin.arm.power_up(0)                                  # the `servo_reset` fault on shoulder_pan
    saved = _raw(bus, "Max_Position_Limit", "shoulder_pan")
    with _torque_off(bus, "shoulder_pan"):
        _w(bus, "Max_Position_Limit", "shoulder_pan", 3297)
    assert abs(at_min - low) <= 25, (at_min, low, here)
    assert abs(at_max - 2147) <= 25, at_max
    assert unsaved == 3297 and saved == 3000


@pytest.mark.off_clock
def test_torque_enable_holds_where_the_joint_is_not_the_last_goal(arm):
    """The torque-enable rule: torque off, the raised arm sags and Goal_Position reads the
    present position; torque on holds it there (it does not drive back to the old goal)."""
    twin, bus, rig = arm
    goal = _raise_upper_arm(twin, bus)
    _w(bus, "Torque_Enable", "shoulder_lift", 0)
    twin.advance(0.4)
    _w(bus, "Torque_Enable", "shoulder_lift", 1)
    sagged = _raw(bus, "Present_Position", "shoulder_lift")
    register = _raw(bus, "Goal_Position", "shoulder_lift")
    held = _settle(twin, bus, "shoulder_lift", 1.0)
    assert abs(sagged - goal) > 100, (goal, sagged)        # it fell
    assert abs(register - sagged) <= 30, (register, sagged)
    assert abs(held - sagged) <= 40, (sagged, held)        # held there, not back at `goal`


@pytest.mark.off_clock
def test_a_7v4_supply_has_35_percent_less_torque(arm, tmp_path, monkeypatch):
    """Torque_Limit 150 (15 % of stall) holds the raised upper arm on a 12 V twin (0.44 N m) but
    not on a 7.4 V one (0.29 N m: the 7.4 V STS3215's 1.91 N m stall); Present_Voltage reads 74."""

    def sag_at_15_percent(twin, bus) -> int:
        goal = _raise_upper_arm(twin, bus)
        _w(bus, "Torque_Limit", "shoulder_lift", 150)
        return abs(goal - _settle(twin, bus, "shoulder_lift", 1.5))

    twin12, bus12, _ = arm
    sag12 = sag_at_15_percent(twin12, bus12)
    (tmp_path / "v74").mkdir()
    twin74, bus74, rig74 = _stepped_arm(tmp_path / "v74", monkeypatch, supply_v=7.4)
    try:
        volts = _raw(bus74, "Present_Voltage", "gripper")
        sag74 = sag_at_15_percent(twin74, bus74)
    finally:
        rig74.disconnect()
    assert volts == 74
    assert sag12 < 30 and sag74 > 150, (sag12, sag74)


@pytest.fixture(scope="module")
def new_arm(tmp_path_factory):
    """A started twin (its process, its pseudo-terminal, the profile's EEPROM and calibration) with
    a slow USB adapter (`adapter_latency_ms: 5`), LeRobot connected to it as a first session on a
    new arm: (twin, bus). Nothing the tests using it do writes a register."""
    from orchestrator.rigs.factory import make_rig
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.client import start_twin

    folder = tmp_path_factory.mktemp("new_arm")
    rig_file = folder / "rig.yaml"
    rig_file.write_text(servo_rig(folder).read_text().replace(
        "twin: {seed: 0, faults: []}", "twin: {seed: 0, faults: [], adapter_latency_ms: 5}"))
    with start_twin(load_rig(rig_file)) as twin:
        rig = make_rig(twin.rig)
        for attempt in range(3):   # LeRobot's handshake reads each servo once: a loaded machine misses one
            try:
                rig.connect()
                break
            except Exception:  # noqa: BLE001
                rig.disconnect()
                if attempt == 2:
                    raise
        try:
            yield twin, rig.robot.bus
        finally:
            rig.disconnect()


def test_the_twin_powers_up_with_torque_limit_1000_and_lerobot_writes_500_to_eeprom(new_arm):
    """What a first session on a new arm does (the twin's EEPROM is a factory servo's plus the
    calibration): after LeRobot's connect the gripper's Max_Torque_Limit reads 500 and its
    Torque_Limit 1000: it grips at 100 % until the arm is power-cycled."""
    _, bus = new_arm
    assert (_raw(bus, "Max_Torque_Limit", "gripper"), _raw(bus, "Torque_Limit", "gripper")) == (500, 1000)


def test_the_adapter_latency_delays_every_reply(new_arm):
    """`adapter_latency_ms: 5` adds 5 ms to every reply on the twin's pseudo-terminal: the median
    read through LeRobot takes at least that (a floor: a loaded machine only lengthens it)."""
    import statistics

    _, bus = new_arm
    times = []
    for _ in range(20):
        started = time.perf_counter()
        _raw(bus, "Present_Position", "wrist_roll")
        times.append(time.perf_counter() - started)
    assert statistics.median(times) >= 0.005, times


def test_the_users_own_calibration_is_rehearsed(tmp_path):
    """A profile whose id has a calibration file (`robot.calibration_dir`): the twin's servos
    carry it (LeRobot connects without calibrating) and degrees mean what they mean on that arm:
    its shoulder_pan range is centred 104 ticks below 2047 (the pose it was calibrated in), so
    the simulated joint at 0 degrees reads (2047 - 1943) * 360 / 4095 = +9.1 degrees."""
    import json

    from orchestrator.rigs.factory import make_rig
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.arm import shipped_calibration
    from orchestrator.rigs.twin.client import start_twin

    mine = shipped_calibration()
    mine["shoulder_pan"].update(range_min=689, range_max=3197, homing_offset=-1400)
    (tmp_path / "cal").mkdir()
    (tmp_path / "cal" / "my_arm.json").write_text(json.dumps(mine))
    rig_file = tmp_path / "rig.yaml"
    rig_file.write_text(servo_rig(tmp_path).read_text().replace("id: so101_twin,", "id: my_arm, calibration_dir: cal,"))
    with start_twin(load_rig(rig_file)) as twin:
        assert twin.own_calibration
        assert json.loads((twin.calibration_dir / "my_arm.json").read_text()) == mine
        rig = make_rig(twin.rig)
        rig.connect()
        try:
            bus = rig.robot.bus
            for joint in ("shoulder_pan", "shoulder_lift"):
                _w(bus, "Goal_Position", joint, 2047)
            wait_physics(twin, 2.0)
            degrees = rig.observe(with_images=False)
            sim = twin.request("state")["joints_deg"]
            offset = _raw(bus, "Homing_Offset", "shoulder_pan")
        finally:
            rig.disconnect()
    assert offset == -1400
    assert abs(sim[0]) < 1.0, sim                                   # 2047 is the model's zero
    assert degrees["shoulder_pan.pos"] == pytest.approx(sim[0] + (2047 - 1943) * 360 / 4095, abs=0.5)
    # a joint of the user's file with the shipped numbers: its middle is 2061, so 2047 reads -1.2 deg
    assert degrees["shoulder_lift.pos"] == pytest.approx(sim[1] + (2047 - 2061) * 360 / 4095, abs=0.5)


@pytest.mark.off_clock
def test_the_register_table_is_lerobots_for_every_register_the_twin_serves():
    """The twin's STS/SMS control table (and with it the byte-level fake's addresses) is a copy
    of LeRobot's `STS_SMS_SERIES_CONTROL_TABLE`: every register the twin names has LeRobot's
    address and width, and every register LeRobot's SO-101 driver writes or reads is served."""
    from lerobot.motors.feetech.tables import STS_SMS_SERIES_CONTROL_TABLE as LEROBOT

    from orchestrator.rigs.twin.feetech import REG

    assert len(REG) >= 40                                             # count guard
    assert {name: REG[name] for name in REG if LEROBOT.get(name) != REG[name]} == {}
    used = {"Torque_Enable", "Goal_Position", "Present_Position", "Homing_Offset", "Min_Position_Limit",
            "Max_Position_Limit", "Operating_Mode", "P_Coefficient", "I_Coefficient", "D_Coefficient",
            "Acceleration", "Maximum_Acceleration", "Return_Delay_Time", "Lock", "Max_Torque_Limit",
            "Protection_Current", "Overload_Torque", "Torque_Limit", "Status", "Model_Number",
            "Firmware_Major_Version", "Firmware_Minor_Version"}
    assert used <= set(LEROBOT) and used - set(REG) == set()
