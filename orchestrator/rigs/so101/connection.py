"""Connecting a LeRobot arm (`LeRobotRig.connect`, and doctor's calibration check before it):
the cheap refusals first, the motors' calibration compared on a bare bus before LeRobot's own
connect enables torque, and a connect step tried again when a status packet was lost.

Nothing here moves the arm: before connect ends only reads and configuration writes run."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from orchestrator.rigs.device_fault import DeviceFault, late_fault, lost_packet
from orchestrator.rigs.stall_watch import StallWatch

logger = logging.getLogger(__name__)

CONNECT_ATTEMPTS = 3


def retrying(step: Callable[[], Any], arm_name: str) -> Any:
    """Run a connect step again (up to `CONNECT_ATTEMPTS`) when a status packet came back
    corrupted or not at all: LeRobot's calibration reads, configure() writes and the
    handshake's one ping per motor ("motor check failed ... Missing motor IDs") have no
    retries of their own, and Feetech servos do corrupt or drop packets now and then. Only
    reads and configuration writes are repeated; nothing moves before connect ends. A step
    that failed while this process stood still past the servos' reply timeout is the
    computer's lateness (`device_fault.late_fault`), tried again, and named so if it stays."""
    for attempt in range(CONNECT_ATTEMPTS):
        try:
            with StallWatch() as watch:
                return step()
        except DeviceFault as fault:
            late = late_fault(fault, watch, arm_name)
            if late is not None:
                fault = late
            elif not lost_packet(fault):
                raise
            if attempt == CONNECT_ATTEMPTS - 1:
                raise fault from None
            logger.warning("connect: %s; trying again", fault.cause)


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
