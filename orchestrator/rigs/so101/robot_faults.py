"""What failed, from an exception a LeRobot robot raised: a servo alarm or reset, servos that
answer no ping, a camera, else the arm's bus, as a `device_fault.DeviceFault` (what the runner
aborts a trial with). The generic fault knows no LeRobot; this module reads LeRobot's messages."""

from __future__ import annotations

import re
from typing import Any

from orchestrator.rigs.device_fault import DeviceFault, ServoAlarm, ServoReset
from orchestrator.rigs.so101.servo_alarms import alarm_in_bus_error, motor_names

MISSING_ID = re.compile(r"- (\d+) \(expected model")   # a line of LeRobot's "Missing motor IDs" list


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
