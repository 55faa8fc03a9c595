"""Connecting a LeRobot arm (`LeRobotRig.connect`, and doctor's calibration check before it):
the cheap refusals first, the motors' calibration compared on a bare bus before LeRobot's own
connect enables torque, and a connect step tried again when a status packet was lost.

A step that failed while this process stood still past the servos' reply timeout is named the
computer's lateness (`device_fault.late_fault`), but a stall anywhere in a step (LeRobot's whole
handshake, six pings and more) does not explain a servo that sends nothing back: when the handshake
missed servos, every servo is pinged again on its own (`silent_servos`), a failed ping looked at
once more up to `REPLY_GRACE_S` later. A reply the process was too late to read is in the port's buffer by then;
a servo that is not on the chain never sends a byte, however busy the computer. (On a machine at
load 30, 8 of 10 connects with a servo unplugged said "this computer answered late" before.)

Nothing here moves the arm: before connect ends only pings, reads and configuration writes run."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from orchestrator.rigs.device_fault import SILENT_CHECK, DeviceFault, late_fault, lost_packet
from orchestrator.rigs.so101.robot_faults import stale_reply_servo
from orchestrator.rigs.stall_watch import StallWatch

logger = logging.getLogger(__name__)

CONNECT_ATTEMPTS = 3
REPLY_GRACE_S = 0.2   # a servo replies within ~1 ms on the wire: what has not come this long after a ping never will
PING_TRIES = 2        # a servo is silent when none of this many pings brought a byte back
STATUS_HEADER = b"\xff\xff"   # a Feetech status packet starts with it, then the servo's id


def retrying(step: Callable[[], Any], arm_name: str, silent: Callable[[], list[str]] | None = None) -> Any:
    """Run a connect step again (up to `CONNECT_ATTEMPTS`) when a status packet came back
    corrupted or not at all: LeRobot's calibration reads, configure() writes and the
    handshake's one ping per motor ("motor check failed ... Missing motor IDs") have no
    retries of their own, and Feetech servos do corrupt or drop packets now and then. Only
    reads and configuration writes are repeated; nothing moves before connect ends. A step
    that failed while this process stood still past the servos' reply timeout is the
    computer's lateness (`device_fault.late_fault`), tried again, and named so if it stays,
    unless `silent()` (`silent_servos`) names servos that send nothing back when asked again."""
    for attempt in range(CONNECT_ATTEMPTS):
        try:
            with StallWatch() as watch:
                return step()
        except DeviceFault as fault:
            late = late_fault(fault, watch, arm_name)
            if late is None and not lost_packet(fault):
                raise
            if attempt == CONNECT_ATTEMPTS - 1:
                raise _last_word(fault, late, arm_name, silent) from None
            logger.warning("connect: %s; trying again", (late or fault).cause)


def _last_word(fault: DeviceFault, late: DeviceFault | None, arm_name: str,
               silent: Callable[[], list[str]] | None) -> DeviceFault:
    """What a connect that failed every attempt ends with: the fault, or the lateness when the
    process stood still during the last, except that servos missing from the handshake which
    send nothing back to a ping of their own (`silent()`) are named: the stall does not explain them."""
    if late is None:
        return fault
    names = silent() if silent is not None and fault.check == SILENT_CHECK else []
    return DeviceFault.silent_servos(arm_name, names) if names else late


def calibrated_on_bare_bus(robot: Any) -> bool | None:
    """Open `robot`'s motor bus alone, compare the motors' calibration with the file, close it
    again without touching torque. None when the robot has no motor bus; what the bus raises
    is raised."""
    bus = getattr(robot, "bus", None)
    if bus is None or not hasattr(type(bus), "is_calibrated"):
        return None
    bus.connect()
    try:
        return bool(bus.is_calibrated)
    finally:
        bus.disconnect(disable_torque=False)


def silent_servos(robot: Any, tries: int = PING_TRIES, grace_s: float = REPLY_GRACE_S) -> list[str]:
    """The servos of `robot`'s motor bus that send nothing back to a ping, as "3 (elbow_flex)":
    each pinged up to `tries` times on the bare bus (the port opened without LeRobot's handshake
    when it is closed, and closed again; nothing written, nothing moves); a ping the SDK gave up
    on counts as answered when a status packet from that servo is in the port's buffer
    `grace_s` later (the process was too late to read it). Never raises: a bus that cannot be
    asked names no servo (the caller keeps what it knew)."""
    bus = getattr(robot, "bus", None)
    if bus is None:
        return []
    try:
        opened = not bus.is_connected
        if opened:
            bus.connect(handshake=False)
        try:
            return [f"{motor.id} ({name})" for name, motor in bus.motors.items()
                    if not any(_answers(bus, motor.id, grace_s) for _ in range(tries))]
        finally:
            if opened:
                bus.port_handler.closePort()
    except Exception as exc:  # noqa: BLE001 - the fault already in hand stays the answer
        logger.warning("connect: pinging the servos again: %s", exc)
        return []


def _answers(bus: Any, servo_id: int, grace_s: float) -> bool:
    """One ping of `servo_id` (scservo_sdk's, through LeRobot's packet handler): True when it
    answered, in time or within `grace_s` after the SDK gave up (any error bits: it is there)."""
    from scservo_sdk import COMM_SUCCESS

    port = bus.port_handler
    port.readPort(port.getBytesAvailable())   # stale bytes of an earlier request
    try:
        _, comm, _ = bus.packet_handler.ping(port, servo_id)
    except IndexError as exc:
        if stale_reply_servo(exc) != servo_id:
            raise
        return True   # the SDK read a late reply of this servo's as its ping's: it answers
    if comm == COMM_SUCCESS:
        return True
    came, deadline = b"", time.monotonic() + grace_s
    while STATUS_HEADER + bytes([servo_id]) not in came:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
        came += bytes(port.readPort(port.getBytesAvailable()))
    return True
