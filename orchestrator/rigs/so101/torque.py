"""Torque off on every servo of a Feetech bus, whatever the servos report.

LeRobot's `FeetechMotorsBus.disable_torque()` writes `Torque_Enable = 0` motor by motor with
`write()`, which raises as soon as a status packet carries an error bit (scservo_sdk's
`writeTxRx` returns the error byte, `MotorsBus._write` raises `RuntimeError` on it). A servo in
alarm (overload, overheating, supply voltage) sets that bit in every reply, so the loop stops at
that servo and the servos after it keep their torque: `bus.disconnect()` after an overload on
servo 2 left servos 3-6 holding.

`torque_off(bus)` does it in three passes:
1. a broadcast write (id 0xFE) of `Torque_Enable = 0` and `Lock = 0`: a broadcast gets no status
   reply (scservo_sdk's `txRxPacket` returns right after sending), so no error bit can abort it;
2. the same registers written to each motor with `raise_on_error=False` (a servo that missed
   the broadcast packet gets it again; error bits are ignored, not raised);
3. `Torque_Enable` read back from each motor.
It returns one line per servo that still reports torque on or does not answer (empty: all off).
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

BROADCAST_ID = 0xFE


def torque_off(bus: Any, num_retry: int = 2) -> list[str]:
    """Torque off on every motor of a LeRobot Feetech/Dynamixel-style bus (see the module
    docstring); never raises. Returns `motor (id N): why` for each servo not confirmed off."""
    from lerobot.motors.motors_bus import get_address

    ports = getattr(bus, "port_handler", None)
    if ports is None:
        return ["the motor bus has no port"]
    ports.is_using = False   # a transaction cut short (Ctrl-C, a fault) leaves the port marked busy
    ser = getattr(ports, "ser", None)
    try:
        if ser is not None:
            ser.reset_input_buffer()
    except Exception:  # noqa: BLE001
        pass
    motors = dict(bus.motors)
    registers = []
    for name in ("Torque_Enable", "Lock"):
        try:
            registers.append(get_address(bus.model_ctrl_table, next(iter(motors.values())).model, name))
        except (KeyError, StopIteration):
            continue
    for addr, length in registers:
        for _ in range(2):   # twice: a broadcast packet lost on the wire has no reply to miss
            try:
                ports.is_using = False
                bus.packet_handler.writeTxOnly(ports, BROADCAST_ID, addr, length, [0] * length)
            except Exception as exc:  # noqa: BLE001 - the per-motor writes follow
                logger.warning("torque off: broadcast write failed: %s", exc)
    for motor in motors.values():
        for addr, length in registers:
            try:
                ports.is_using = False
                bus._write(addr, length, motor.id, 0, num_retry=num_retry, raise_on_error=False)
            except Exception as exc:  # noqa: BLE001
                logger.warning("torque off: id %s: %s", motor.id, exc)
    return still_torqued(bus, num_retry)


def torque_enabled(bus: Any, num_retry: int = 2) -> dict[str, bool | None]:
    """Each motor's Torque_Enable as its servo reports it now: True (on), False (off), None (no
    answer, or a read that failed). Never raises; error bits in the reply (an alarm) are ignored."""
    from lerobot.motors.motors_bus import get_address

    out: dict[str, bool | None] = {}
    for name, motor in bus.motors.items():
        try:
            bus.port_handler.is_using = False
            addr, length = get_address(bus.model_ctrl_table, motor.model, "Torque_Enable")
            value, comm, _error = bus._read(addr, length, motor.id, num_retry=num_retry, raise_on_error=False)
            out[name] = bool(value) if bus._is_comm_success(comm) else None
        except Exception:  # noqa: BLE001 - a read that fails is an unknown state
            out[name] = None
    return out


def still_torqued(bus: Any, num_retry: int = 2) -> list[str]:
    """`motor (id N): ...` for each motor whose Torque_Enable reads non-zero or cannot be read."""
    problems = []
    for name, on in torque_enabled(bus, num_retry).items():
        motor = bus.motors[name]
        if on is None:
            problems.append(f"{name} (id {motor.id}): does not answer, its torque may still be on")
        elif on:
            problems.append(f"{name} (id {motor.id}): torque still on")
    return problems


def torque_warning(problems: list[str]) -> str:
    """The one line the operator is shown when servos may still hold torque."""
    return ("TORQUE MAY STILL BE ON: " + "; ".join(problems)
            + ": support the arm and switch off its power supply")


def close_robot(robot: Any, torque_off_first: bool, num_retry: int = 2) -> list[str]:
    """Close a LeRobot robot whatever state it is in; never raises. The bus first, on its own
    (LeRobot skips `robot.disconnect()` when any camera is down, `is_connected` False, which
    would leave torque on): torque off (`torque_off`, when `torque_off_first`) and the port
    closed; then each camera. Returns the servos `torque_off` could not confirm off."""
    problems: list[str] = []
    bus = getattr(robot, "bus", None)
    if bus is None:
        try:
            if robot.is_connected:
                robot.disconnect()
        except Exception as exc:  # noqa: BLE001
            logger.warning("disconnect: %s", exc)
        return problems
    try:
        if bus.is_connected:
            if torque_off_first:
                problems = torque_off(bus, num_retry)
                if problems:
                    logger.warning("disconnect: %s", "; ".join(problems))
            bus.port_handler.closePort()
    except Exception as exc:  # noqa: BLE001
        logger.warning("disconnect: torque off: %s", exc)
        try:
            bus.port_handler.closePort()
        except Exception as exc2:  # noqa: BLE001
            logger.warning("disconnect: closing the port: %s", exc2)
    for cam in getattr(robot, "cameras", {}).values():
        try:
            if cam.is_connected:
                cam.disconnect()
        except Exception as exc:  # noqa: BLE001
            logger.warning("disconnect: %s: %s", cam, exc)
    return problems
