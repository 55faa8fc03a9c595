"""What failed, from an exception a LeRobot robot raised: a servo alarm or reset, servos that
answer no ping, a ping answered by a stale reply, a camera, else the arm's bus, as a
`device_fault.DeviceFault` (what the runner aborts a trial with). The generic fault knows no
LeRobot; this module reads LeRobot's messages."""

from __future__ import annotations

import re
from typing import Any

from orchestrator.rigs.device_fault import ARM_CHECK, DeviceFault, ServoAlarm, ServoReset
from orchestrator.rigs.so101.servo_alarms import alarm_in_bus_error, motor_names

MISSING_ID = re.compile(r"- (\d+) \(expected model")   # a line of LeRobot's "Missing motor IDs" list


def stale_reply_servo(exc: BaseException) -> int | None:
    """The servo whose ping failed on a stale reply, or None for any other exception.

    scservo_sdk's `ping` (protocol_packet_handler.py) reads the servo's model number (2 bytes
    at address 3) once the ping's status packet has come. When a late reply of an earlier ping
    from the same servo (an empty status packet the SDK had given up on, as under load) is still
    in the port's buffer, the SDK takes it as this ping's reply and the ping's own empty reply as
    the read's, and indexes past its end: `IndexError: list index out of range`. The servo did
    answer; the exchange was out of step, as a lost packet leaves it."""
    if not isinstance(exc, IndexError):
        return None
    servo_id, tb = None, exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "ping" and "scservo_sdk" in code.co_filename:
            servo_id = tb.tb_frame.f_locals.get("scs_id")
        tb = tb.tb_next
    return servo_id if isinstance(servo_id, int) else None


def device_fault_of(exc: BaseException, arm: str, robot: Any) -> DeviceFault:
    """What failed, from an exception a LeRobot robot raised: a servo alarm or reset (also one
    that a LeRobot read or write failed on, `alarm_in_bus_error`), servos
    that answer no ping (named from LeRobot's "Missing motor IDs" list), the camera the message
    names (of several that print alike, the one that no longer reads; a timeout with no name:
    the cameras), else the arm's bus."""
    if isinstance(exc, DeviceFault):
        return exc
    if isinstance(exc, (ServoAlarm, ServoReset)):
        return DeviceFault.servo(arm, exc)
    alarm = alarm_in_bus_error(exc, robot)
    if alarm is not None:
        return DeviceFault.servo(arm, alarm)
    stale = stale_reply_servo(exc)
    if stale is not None:   # "no status packet" of its own: a lost packet, which a connect step retries
        return DeviceFault("arm", arm, f"no status packet of its own from servo {stale} "
                                       f"({motor_names(robot).get(stale, '?')}) to its ping: a late reply of an "
                                       "earlier ping came instead", ARM_CHECK)
    text = str(exc)
    if "Missing motor IDs" in text:
        names = motor_names(robot)
        ids = [int(i) for i in MISSING_ID.findall(text.split("Missing motor IDs", 1)[1].split("\n\n")[0])]
        return DeviceFault.silent_servos(arm, [f"{i} ({names.get(i, '?')})" for i in ids])
    cameras = getattr(robot, "cameras", {}) or {}
    suspects = [name for name, cam in cameras.items() if str(cam) in text]
    if not suspects and isinstance(exc, TimeoutError):
        suspects = list(cameras)
    if len(suspects) > 1:  # several cameras print alike: find the one that stopped
        for name in suspects:
            try:
                cameras[name].read_latest()
            except Exception:  # noqa: BLE001
                return DeviceFault.camera(name, exc)
    if suspects:
        return DeviceFault.camera(suspects[0], exc)
    return DeviceFault.arm(arm, exc)
