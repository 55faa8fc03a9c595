"""Servo alarms: the error bits a Feetech servo raises, read from its `Status` register.

LeRobot's `sync_read` of `Present_Position` drops the error byte of the status packets, so an
STS3215 that has unloaded itself (overload, overheating, supply voltage out of range) would go
limp mid-episode unnoticed. `servo_alarms(robot)` reads `Status` (address 65) of every motor of a
Feetech bus and names the bits that are set (Feetech STS/SMS manual; scservo_sdk `ERRBIT_*`);
`ServoAlarm` (`device_fault.py`) is the exception the rig raises so the trial is aborted with that cause.
LeRobot's single `read` and `write` do check the error byte, and raise a `RuntimeError` that
ends with scservo_sdk's text for it; `alarm_in_bus_error` turns that back into the same
`ServoAlarm`, with the motor named.

A servo that browns out and resets comes back with torque off and no alarm bit (Status 0): the
joint goes limp and nothing in a position read says so. `check_servos(robot)` therefore reads
`Torque_Enable` with the alarms and raises `ServoReset` for a servo whose torque went off by
itself while the rig expects it on.

`drop_stale_replies(robot)` empties the serial input buffer before a new transaction. The bus is
half duplex, request then reply, so nothing should be waiting; but `scservo_sdk` gives up on a
reply after ~34 ms (a write, a sync read) and never flushes, so when the control process was
descheduled past that (a busy machine, a policy saturating the cores), the late reply stays
in the buffer and is taken as the answer to the next request: every read after it is one
packet behind, and a 1-byte `Status` read gets a byte of a position. Found on the twin under
load; the same happens on a real arm.
"""

from __future__ import annotations

import re
import time
from typing import Any

from orchestrator.rigs.device_fault import ServoAlarm, ServoReset  # the generic faults, raised here

ALARM_BITS = {1: "supply voltage out of range", 2: "angle sensor error", 4: "overheating",
              8: "overcurrent", 32: "overload"}
# scservo_sdk `getRxPacketError`: the text for each bit (it names the first set, in this order)
RX_PACKET_ERRORS = {"Input voltage": 1, "Angle sen": 2, "Overheat": 4, "OverEle": 8, "Overload": 32}
# LeRobot `MotorsBus._read` / `_write`: "Failed to write '...' on id_=3 ... [RxPacketError] Overload error!"
BUS_ERROR = re.compile(r"\bon id_=(\d+)\b.*\[RxPacketError\] (.+?) error!")
CHECK_EVERY_STEPS = 5     # at 30 Hz: an alarm is seen within ~0.17 s
SETTLE_S = 0.002          # a status packet takes < 0.1 ms at 1 Mbaud; the USB adapter ~1 ms


def servo_alarms(robot: Any) -> list[str]:
    """`motor (id N): alarm` for every motor whose Status has an alarm bit; [] without a Feetech bus."""
    bus = getattr(robot, "bus", None)
    if bus is None or type(bus).__name__ != "FeetechMotorsBus":
        return []
    status = bus.sync_read("Status", normalize=False, num_retry=getattr(robot.config, "num_read_retries", 0))
    alarms = []
    for motor, value in status.items():
        names = [text for bit, text in ALARM_BITS.items() if int(value) & bit]
        if names:
            alarms.append(f"{motor} (id {bus.motors[motor].id}): {', '.join(names)}")
    return alarms


def alarm_in_bus_error(exc: BaseException, robot: Any) -> ServoAlarm | None:
    """The `ServoAlarm` behind a LeRobot read or write that failed because the servo's status
    packet carried an alarm bit (a torque-on refused by an overloaded servo, say), worded as
    `servo_alarms` words it; None for any other failure (no reply, a bad checksum)."""
    found = BUS_ERROR.search(str(exc))
    bit = RX_PACKET_ERRORS.get(found.group(2)) if found else None
    if found is None or bit is None:
        return None
    servo_id = int(found.group(1))
    return ServoAlarm(f"servo alarm: {motor_names(robot).get(servo_id, 'servo')} (id {servo_id}): {ALARM_BITS[bit]}")


def motor_names(robot: Any) -> dict[int, str]:
    """Each motor's name by its servo id on the robot's bus; {} without a bus."""
    motors = getattr(getattr(robot, "bus", None), "motors", {}) or {}
    return {m.id: name for name, m in motors.items()}


def raise_on_alarm(robot: Any) -> bool:
    """Raise `ServoAlarm` when the servos report an alarm on two reads in a row (an alarm bit
    stays set on the servo; a byte of a late reply read as `Status` does not repeat). The one
    alarm let through is the gripper's own overload protection while it squeezes (`AlarmWatch`):
    returns True when that is what was read, in an episode, a hold or a move alike. A gripper
    overload read while the jaws no longer squeeze is an alarm only if a third read, after the
    squeeze was read, still shows it (it persists; a protection that cleared as the jaws
    arrived is not one)."""
    first = _settled_read(robot)
    if not first or _settled_read(robot) != first:
        return False
    if first == [_gripper_overload(robot)]:
        if _gripper_squeezing(robot):
            return True
        # The jaws stopped squeezing between the Status reads and now (an opening that just
        # arrived; reads stretched by a loaded host): the protection clears once the load drops,
        # so the alarm is the gripper's only if Status still says so now.
        if _settled_read(robot) != first:
            return False
    raise ServoAlarm("servo alarm: " + "; ".join(first))


def torque_lost(robot: Any) -> list[str]:
    """`motor (id N)` for every motor of a Feetech bus whose Torque_Enable reads 0."""
    bus = getattr(robot, "bus", None)
    if bus is None or type(bus).__name__ != "FeetechMotorsBus":
        return []
    torque = bus.sync_read("Torque_Enable", normalize=False,
                           num_retry=getattr(robot.config, "num_read_retries", 0))
    return [f"{motor} (id {bus.motors[motor].id})" for motor, value in torque.items() if not int(value)]


def check_servos(robot: Any, expect_torque: bool = True) -> None:
    """Raise `ServoAlarm` for an alarm, else `ServoReset` for a servo whose torque is off while
    `expect_torque`; each only when two reads in a row agree (see `raise_on_alarm`)."""
    raise_on_alarm(robot)
    if expect_torque:
        _raise_on_torque_lost(robot)


def _raise_on_torque_lost(robot: Any) -> None:
    first = _settled_read(robot, torque_lost)
    if first and _settled_read(robot, torque_lost) == first:
        raise ServoReset("servo torque went off by itself (a reset or a brown-out): " + "; ".join(first))


GRIPPER_TRIP_EVENT = "gripper_overload_protection"
SQUEEZE_TICKS = 12        # ~1 degree: the gripper's goal this far from where it is = it is held back


class AlarmWatch:
    """`raise_on_alarm` with one expected alarm let through: the gripper's overload protection
    while it squeezes something. An STS3215 whose load stays above `Overload_Torque` (LeRobot
    sets 25 % on the gripper) for `Protection_Time` (2 s) limits itself to `Protective_Torque`
    and sets Status bit 5; a grasp held a few seconds does that. So an overload on the gripper
    alone, while its Goal_Position is more than `SQUEEZE_TICKS` from its Present_Position (the
    jaws are held back by what they grip), is recorded once per episode as the safety event
    `gripper_overload_protection` instead of aborting the trial. It is a servo alarm (abort)
    when it persists: still set on two reads in a row once the gripper no longer squeezes (the
    policy opened it, and the protection did not clear), or with any other alarm."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def check(self, robot: Any, expect_torque: bool = True) -> None:
        """`check_servos` during an episode: the alarms (the gripper's trip while it squeezes let
        through, as above), then a servo whose torque went off by itself (`ServoReset`)."""
        if raise_on_alarm(robot) and GRIPPER_TRIP_EVENT not in self.events:
            self.events.append(GRIPPER_TRIP_EVENT)
        if expect_torque:
            _raise_on_torque_lost(robot)

    def take_events(self) -> list[str]:
        """The events since the last call (the rig's `end_episode` takes them)."""
        events, self.events = self.events, []
        return events


def _gripper_overload(robot: Any) -> str | None:
    motor = robot.bus.motors.get("gripper")
    return None if motor is None else f"gripper (id {motor.id}): overload"


def _gripper_squeezing(robot: Any) -> bool:
    """Sync reads: LeRobot's single `read` raises on the overload bit its status packet carries.
    Stale bytes are dropped before each (a retried Goal_Position read whose first reply came
    late leaves a second copy that the Present_Position read took for its answer: present ==
    goal, "not squeezing", and a gripper squeezing the cube aborted a twin campaign as a servo
    alarm on a loaded host)."""
    bus, retries = robot.bus, getattr(robot.config, "num_read_retries", 0)
    drop_stale_replies(robot)
    goal = bus.sync_read("Goal_Position", ["gripper"], normalize=False, num_retry=retries)["gripper"]
    drop_stale_replies(robot)
    present = bus.sync_read("Present_Position", ["gripper"], normalize=False, num_retry=retries)["gripper"]
    return abs(int(goal) - int(present)) > SQUEEZE_TICKS


def agreed_read(robot: Any, read=servo_alarms) -> list[str]:
    """What two settled reads (`_settled_read`) in a row both say; [] when they differ. A late
    reply left in the buffer between two reads of one transaction (the `Status` reply to a read
    that timed out and was retried, then taken as the `Torque_Enable` answer: 0 on every servo,
    "torque off by itself" on all six) does not repeat; a servo's alarm or its lost torque does."""
    first = _settled_read(robot, read)
    return first if first and _settled_read(robot, read) == first else []


def _settled_read(robot: Any, read=servo_alarms) -> list[str]:
    drop_stale_replies(robot)
    time.sleep(SETTLE_S)          # a reply still on the wire lands, and is dropped
    drop_stale_replies(robot)
    return read(robot)


def drop_stale_replies(robot: Any) -> None:
    """Discard bytes waiting on the motor bus's serial port (see the module docstring)."""
    bus = getattr(robot, "bus", None)
    ser = getattr(getattr(bus, "port_handler", None), "ser", None)
    if ser is not None and getattr(ser, "is_open", False):
        ser.reset_input_buffer()
