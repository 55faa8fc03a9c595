"""Device faults during an episode: the arm's serial bus, a camera, a policy.

A `DeviceFault` is a `RuntimeFailure` (exit 1) that carries what failed (`device`), the cause in
one line and what the operator should check. The runner catches it mid-episode, makes the arm
safe, marks the trial aborted with `str(fault)` and keeps the campaign resumable.

No policy label ever appears in a fault: the operator reads these messages. What a LeRobot
robot's exception means as a fault is the SO-101 adapter's (`so101/robot_faults.py`).
"""

from __future__ import annotations

import re
from typing import Any

from orchestrator.core.errors import RuntimeFailure
from orchestrator.rigs.stall_watch import SDK_TIMEOUT_S

ARM_CHECK = ("the arm's USB cable and power supply (12 V / 5 V), that no other program "
             "(lerobot-teleoperate, a second orchestrator) holds the port, then `orchestrator doctor`")
CAMERA_CHECK = ("the camera's USB cable and that no other program uses it "
                "(`lerobot-find-cameras opencv` lists what is attached), then `orchestrator doctor`")
ALARM_CHECK = ("what the arm pushes against (the table, the cube, a hand): support the arm and free it, let a "
               "hot servo cool, check the 12 V supply; then switch the arm's power off and on (a servo keeps "
               "its alarm until then) and run again")
RESET_CHECK = ("the servos' 12 V supply and the cables between the servos (a servo that resets lost power "
               "for a moment; its torque is off): support the arm, then switch its power off and on and run again")
SILENT_CHECK = ("the 3-pin cable into that servo from the one before it in the chain, and the 12 V supply; "
                "a servo given another ID answers there instead (`lerobot-setup-motors`)")
LATE_CHECK = ("what else runs on this computer (a training job, a second orchestrator, a browser): close it or "
              "lower its priority, then run again; the stall alone explains the failed read, not the arm or its cable")
FROZEN_CHECK = ("the camera: unplug its USB cable and plug it in again (a camera that stops sending frames "
                "while open usually comes back so), or give it a USB port of its own; then run again")
# LeRobot's OpenCVCamera (and `threaded_camera.ThreadedCamera`) when no new frame came in time: `async_read`'s
# timeout with the read thread alive, `read_latest`'s frame older than allowed
FROZEN = re.compile(r"Timed out waiting for frame from camera .* after (\d+(?:\.\d+)?) ms\. Read thread alive: True"
                    r"|latest frame is too old: (\d+(?:\.\d+)?) ms")
BLOCKED_CHECK = ("what holds the joint back (a hand, the cube, the table): free it; the arm holds where it "
                 "is until you confirm")
POLICY_CHECK = ("the checkpoint and its processors (re-run `orchestrator doctor --protocol ...`); "
                "the run log has the traceback")


class ServoAlarm(RuntimeError):
    """A servo reports an alarm (its message names the motor and the alarm): raised by a rig with
    servos (the SO-101's are read in `so101/servo_alarms.py`)."""


class ServoReset(RuntimeError):
    """A servo's torque went off by itself (a reset, a brown-out); its message names the motor."""


def one_line(exc: BaseException, limit: int = 240) -> str:
    """`Type: first non-empty line of the message`, shortened to `limit` characters."""
    text = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


class DeviceFault(RuntimeFailure):
    """A device failed mid-episode. `kind` is `arm`, `camera` or `policy`.

    `device` names it for the operator (`arm /dev/ttyACM0`, `camera front`, `policy`), `cause`
    is one line, `check` says what to look at. `str(fault)` is `device: cause` on one line;
    `hint` is `check ...` (the runner appends it to the abort message); `line` is both.
    """

    def __init__(self, kind: str, device: str, cause: str, check: str):
        self.kind = kind
        self.device = device
        self.cause = cause
        self.check = check
        super().__init__(f"{device}: {cause}")

    def __reduce__(self):
        # picklable (a simulated episode's fault crosses from a worker process to the runner)
        return (DeviceFault, (self.kind, self.device, self.cause, self.check))

    @property
    def hint(self) -> str:
        return f"check {self.check}"

    @property
    def line(self) -> str:
        return f"{self}; {self.hint}"

    @classmethod
    def arm(cls, device: str, exc: BaseException) -> DeviceFault:
        return cls("arm", device, one_line(exc), ARM_CHECK)

    @classmethod
    def servo(cls, device: str, exc: BaseException) -> DeviceFault:
        """A servo alarm or reset (`ServoAlarm` / `ServoReset`): kind `arm`, and
        what to check is the load and the power, not the USB cable."""
        check = RESET_CHECK if isinstance(exc, ServoReset) else ALARM_CHECK
        return cls("arm", device, one_line(exc), check)

    @classmethod
    def silent_servos(cls, device: str, servos: list[str]) -> DeviceFault:
        """Servos that answer no ping (LeRobot's handshake: "Missing motor IDs"), named."""
        return cls("arm", device, f"no reply from servo {', '.join(servos)}", SILENT_CHECK)

    @classmethod
    def late(cls, device: str, stall_s: float, what: str = "the read") -> DeviceFault:
        """A read that failed while this process stood still longer than the servos' reply
        timeout (`stall_watch.StallWatch`): the computer answered late, the arm did not."""
        return cls("arm", device, f"this computer answered late (busy CPU): this process stood still "
                                  f"{stall_s * 1000:.0f} ms during {what}, longer than the servos' "
                                  f"{SDK_TIMEOUT_S * 1000:.0f} ms reply timeout", LATE_CHECK)

    @classmethod
    def camera(cls, name: str, exc: BaseException) -> DeviceFault:
        """A camera's failure; a frozen one (open, its read thread alive, no new frame) named so,
        with what brings it back, instead of LeRobot's "Timed out waiting for frame ..."."""
        frozen = frozen_camera(exc)
        if frozen is not None:
            return cls("camera", f"camera {name}", frozen, FROZEN_CHECK)
        return cls("camera", f"camera {name}", one_line(exc), CAMERA_CHECK)

    @classmethod
    def policy(cls, exc: BaseException) -> DeviceFault:
        return cls("policy", "policy", one_line(exc), POLICY_CHECK)


class RestBlocked(DeviceFault):
    """A guarded motion (the move to rest, a reset's motion) stopped because a joint did not follow
    (`joints`): the arm holds there. `outcome` says which motion: "did not reach rest" by default."""

    def __init__(self, device: str, joints: list[str], outcome: str = "did not reach rest"):
        self.joints = list(joints)
        super().__init__("arm", device, f"{outcome}: {', '.join(self.joints)} blocked", BLOCKED_CHECK)


# what LeRobot / scservo_sdk say when a status packet was corrupted or never came
LOST_PACKET_SIGNS = ("Incorrect status packet", "no status packet", "motor check failed")


def lost_packet(exc: BaseException | None) -> bool:
    """Whether `exc`, or one of its causes, is a status packet corrupted or never received."""
    seen = 0
    while exc is not None and seen < 10:
        if any(sign in str(exc) for sign in LOST_PACKET_SIGNS):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def late_fault(fault: DeviceFault, watch: Any, device: str, what: str = "the read") -> DeviceFault | None:
    """`DeviceFault.late` for a fault of the bus (no reply, a corrupted or missing status packet,
    servos missing from the handshake) that came while `watch` (a `stall_watch.StallWatch`) saw
    this process stand still past the servos' reply timeout; None for any other fault (a servo's
    alarm or reset is the servo's, a camera's is the camera's) or when the process kept up."""
    stall_s = watch.late()
    if stall_s is None or fault.kind != "arm" or not (lost_packet(fault) or fault.check == SILENT_CHECK):
        return None
    return DeviceFault.late(device, stall_s, what)


def frozen_camera(exc: BaseException) -> str | None:
    """"no new frame for N ms though it is open (frozen)" for a camera read that timed out while
    the camera's read thread still ran (LeRobot's "Timed out waiting for frame ... Read thread
    alive: True", or "latest frame is too old: N ms"); None for any other failure."""
    found = FROZEN.search(str(exc))
    if found is None:
        return None
    return f"no new frame for {float(found.group(1) or found.group(2)):.0f} ms though it is open (frozen)"
