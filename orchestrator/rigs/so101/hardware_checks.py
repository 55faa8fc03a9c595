"""A LeRobot rig's own checks, run before anything moves: the robot's serial port exists, LeRobot's
calibration file for this robot type and id exists, the profile's rest pose lies inside the
calibrated range (with the present pose, read on a bare bus: nothing written, torque untouched,
shown next to the rest pose the arm will go to), and each camera opens and delivers frames at
its configured fps (measured for `CAMERA_SECONDS` between two frame arrivals; a rate under
`FPS_TOLERANCE` is measured again for `CONFIRM_SECONDS`, and that decides). `LeRobotRig.checks()` runs them; `orchestrator.run.preflight` only
combines them with the protocol's and the disk's checks."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from orchestrator.core.errors import BadInput
from orchestrator.rigs.base import Check
from orchestrator.rigs.device_fault import DeviceFault, lost_packet, one_line
from orchestrator.rigs.profile import RigProfile
from orchestrator.rigs.so101.servo_alarms import servo_alarms
from orchestrator.rigs.stall_watch import StallWatch

FPS_TOLERANCE = 0.9       # a camera must deliver >= 90 % of its configured fps
CAMERA_SECONDS = 1.0      # how long each camera's frame rate is measured
CONFIRM_SECONDS = 3.0     # ... and again, this long, when it is under FPS_TOLERANCE
CAMERA_STALL_S = 0.1      # this process standing still longer spoils a low rate's measurement (10 % of 1 s)


def calibrate_command(profile: RigProfile, calibration_dir: Path | None = None) -> str:
    """The `lerobot-calibrate` command line for this rig's robot."""
    spec = profile.robot
    cmd = f"lerobot-calibrate --robot.type={spec.type}"
    if spec.port:
        cmd += f" --robot.port={spec.port}"
    if spec.id:
        cmd += f" --robot.id={spec.id}"
    extra = spec.model_extra or {}
    if extra.get("calibration_dir"):
        cmd += f" --robot.calibration_dir={calibration_dir or extra['calibration_dir']}"
    return cmd


def available_ports() -> list[str]:
    from serial.tools import list_ports

    return sorted(p.device for p in list_ports.comports())


def check_port(port: str | None, ports: Iterable[str] | None = None) -> Check:
    """The serial port exists: listed by pyserial, or present as a device path."""
    if not port:
        return Check("port", False, "the rig profile names no robot port (robot: {port: /dev/ttyACM0}); "
                                    "find it with `lerobot-find-port`")
    listed = list(available_ports() if ports is None else ports)
    if port in listed or os.path.exists(port):
        return Check(f"port {port}", True, "present")
    seen = ", ".join(listed) if listed else "none"
    return Check(f"port {port}", False, f"not found (serial ports present: {seen}); plug the arm's "
                                        "USB cable and power in, then find its port with `lerobot-find-port`")


UNREADABLE = "calibration file unreadable: re-run lerobot-calibrate"


def unreadable_calibration(exc: BaseException, profile: RigProfile) -> str | None:
    """The one line for a robot LeRobot could not build because its calibration file does not
    parse (`Robot._load_calibration` raised: a truncated or hand-edited JSON); None when `exc`
    came from anywhere else."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_name != "_load_calibration":
        tb = tb.tb_next
    if tb is None:
        return None
    path = tb.tb_frame.f_locals.get("fpath")
    cause = exc.__cause__ or exc.__context__   # draccus's ParsingError wraps the JSON error
    return unreadable_line(path, cause if isinstance(cause, ValueError) else exc, profile)


def unreadable_line(path: Any, exc: BaseException | str, profile: RigProfile) -> str:
    cause = exc if isinstance(exc, str) else one_line(exc, 120)
    return f"{UNREADABLE} ({calibrate_command(profile)}; {path}: {cause})"


def check_calibration(rig: Any) -> Check:
    """LeRobot's calibration file for the rig's robot type and id exists (and parses: LeRobot
    reads it as it builds the robot)."""
    try:
        needed = rig.needs_calibration
    except BadInput as exc:
        return Check("calibration", False, exc.problems[0].split(": calibration: ", 1)[-1])
    if not needed:
        return Check("calibration", True, "not needed for this robot type")
    path = rig.calibration_path
    spec = rig.profile.robot
    if path.is_file():
        return Check("calibration", True, f"{path}")
    return Check("calibration", False,
                 f"no calibration file for {spec.type} id {spec.id!r} (looked for {path}); LeRobot would "
                 f"stop and ask on stdin mid-campaign: calibrate first with {calibrate_command(rig.profile)}")


def measure_camera(camera: Any, seconds: float) -> float:
    """Frames per second a connected LeRobot camera delivers over about `seconds`: frames
    counted between two frame arrivals, divided by the time between them (a window that starts
    and ends on a frame, so a 15 fps camera measured for 1 s is not one frame, 7 %, short by
    where the window fell). A camera that counts its own deliveries, like the twin's, is read
    from its counter, which a busy reader cannot undercount; others by `async_read`."""
    if isinstance(getattr(camera, "frames_delivered", None), int):
        return _measure_counter(camera, seconds)
    camera.async_read(timeout_ms=2000)  # wait for a fresh frame, then count
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        camera.async_read(timeout_ms=max(500.0, 3000.0 / max(camera.fps or 1, 1)))
        count += 1
    return count / elapsed


def _measure_counter(camera: Any, seconds: float) -> float:
    def next_frame(timeout_s: float = 2.0) -> tuple[int, float]:
        seen, deadline = camera.frames_delivered, time.perf_counter() + timeout_s
        while (now := camera.frames_delivered) == seen:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{camera}: no new frame in {timeout_s:.0f} s")
            time.sleep(0.001)
        return now, time.perf_counter()

    first, start = next_frame()
    time.sleep(seconds)
    last, end = next_frame()
    return (last - first) / (end - start)


def check_cameras(rig: Any, seconds: float = 1.0) -> list[Check]:
    """Open each camera (or use the connected ones) and measure the frame rate it delivers."""
    checks = []
    try:
        robot = rig.robot
    except BadInput:   # an unreadable calibration file: the calibration check says so; the cameras still open
        robot = None
    connected = bool(getattr(robot, "is_connected", False))
    if connected:
        cameras = dict(robot.cameras)
    else:
        from lerobot.cameras import make_cameras_from_configs

        cameras = {}
        for name, cfg in getattr(rig.config, "cameras", {}).items():
            try:
                cameras[name] = make_cameras_from_configs({name: cfg})[name]
            except Exception as exc:  # noqa: BLE001
                checks.append(Check(f"camera {name}", False, f"cannot be built: {one_line(exc)}"))
    for name, cam in cameras.items():
        spec = rig.profile.cameras.get(name)
        want = spec.fps if spec else cam.fps
        where = (f"{spec.type} {spec.index_or_path}" if spec and spec.type == "opencv"
                 else str(spec.index_or_path) if spec else "?")
        opened_here, fps = False, 0.0
        try:
            with StallWatch() as watch:
                if not cam.is_connected:
                    cam.connect()
                    opened_here = True
                fps = measure_camera(cam, seconds)
                if fps < FPS_TOLERANCE * (want or 0):   # a dip is not a slow camera: measure longer
                    fps = measure_camera(cam, max(CONFIRM_SECONDS, seconds))
        except Exception as exc:  # noqa: BLE001
            checks.append(Check(f"camera {name}", False,
                                f"{where} does not open or deliver frames ({one_line(exc)}); "
                                "list attached cameras with `lerobot-find-cameras opencv`"))
            continue
        finally:
            if opened_here:
                try:
                    cam.disconnect()
                except Exception:  # noqa: BLE001
                    pass
        if fps < FPS_TOLERANCE * want and (stall_s := watch.late(CAMERA_STALL_S)) is not None:
            checks.append(Check(f"camera {name}", False, f"{where} not measured: this computer answered late (busy "
                                                         f"CPU): this process stood still {stall_s * 1000:.0f} ms while "
                                                         "it counted frames; close what else runs, then run again"))
            continue
        size = f"{spec.width}x{spec.height}" if spec else ""
        if fps < FPS_TOLERANCE * want:
            checks.append(Check(f"camera {name}", False,
                                f"{where} delivers {fps:.1f} fps, configured {want} fps ({size}); lower the "
                                "resolution or fps in the rig profile, use another USB port/hub, or try "
                                "fourcc: MJPG"))
        else:
            checks.append(Check(f"camera {name}", True, f"{where} {size} at {fps:.1f} fps (configured {want})"))
    return checks


# The bare-bus read of the present pose (nothing written, torque untouched) is tried again after a
# pause before the check fails: a bus that just came up can miss its first handshake (a USB
# adapter enumerating; on the twin under load, seen as "motor check failed" and "could not
# connect" at this read, once in several full test runs).
PRESENT_POSE_TRIES = 3
PRESENT_POSE_RETRY_S = 0.5


def check_rest_pose(rig: Any) -> list[Check]:
    """The rest pose inside the calibrated range; the present pose next to it (bare bus read)."""
    problems = rig.rest_pose_problems()
    if problems:
        return [Check("rest pose", False, line) for line in problems]
    if getattr(rig.robot, "bus", None) is None or getattr(rig, "_connected", False):
        return []
    present, stall_s = None, None
    failure: Exception | None = None
    for attempt in range(PRESENT_POSE_TRIES):
        try:
            with StallWatch() as watch:
                present = read_present_pose(rig)
            break
        except Exception as exc:  # noqa: BLE001
            failure, stall_s = exc, watch.late() if lost_packet(exc) else None
            if attempt + 1 < PRESENT_POSE_TRIES:
                time.sleep(PRESENT_POSE_RETRY_S)
    if present is None and stall_s is not None:   # the last try failed while this process stood still
        return [Check("rest pose", False, f"cannot read the arm's present pose ({PRESENT_POSE_TRIES} tries): "
                                          f"{DeviceFault.late('the bus', stall_s).line}")]
    if present is None:
        assert failure is not None   # every try raised
        return [Check("rest pose", False, f"cannot read the arm's present pose ({one_line(failure)}; "
                                          f"{PRESENT_POSE_TRIES} tries); check its power and USB cable")]
    rest = dict(rig.profile.rest_pose)
    source = "profile" if rest else "captured at connect: the present pose"
    rest = rest or present

    def pose(p: dict) -> str:
        return " ".join(f"{k.removesuffix('.pos')}={p[k]:.1f}" for k in p)

    return [Check("rest pose", True, f"present {pose(present)}; rest ({source}) {pose(rest)}")]


POWER_CYCLE_CHECK = ("a servo keeps its alarm until its power is cycled: support the arm, switch its power supply "
                     "off and on, then run again")


def check_servo_alarms(rig: Any) -> list[Check]:
    """Every servo's Status, read before anything else of a run on a bare bus: the port opened
    without LeRobot's handshake (an STS3215 in alarm answers its ping with the error bit, and
    the handshake then reports a missing motor), nothing written. A servo still in alarm (an
    overload stays until a power-cycle) is named; [] when none is, or when the read itself
    fails (the rest pose's read then says what)."""
    bus = getattr(rig.robot, "bus", None)
    if bus is None or type(bus).__name__ != "FeetechMotorsBus" or getattr(rig, "_connected", False):
        return []
    try:
        bus.connect(handshake=False)
        try:
            alarms = servo_alarms(rig.robot)
        finally:
            bus.disconnect(disable_torque=False)
    except Exception:  # noqa: BLE001 - the rest pose's read, next, names the bus's failure
        return []
    return [Check("servo alarm", False, f"{'; '.join(alarms)}, read before anything moved: {POWER_CYCLE_CHECK}")
            ] if alarms else []


def check_motors_calibration(rig: Any) -> list[Check]:
    """The motors' calibration against the file, compared on a bare bus as `run`'s connect
    compares it before torque is ever enabled (`LeRobotRig._calibrated_on_bare_bus`: port opened,
    motors pinged and read, nothing written): [] when they match or the robot has no motor bus."""
    if getattr(rig, "_connected", False):
        return []
    try:
        calibrated = rig._retrying(rig._calibrated_on_bare_bus)
    except DeviceFault as fault:
        return [Check("calibration", False, f"cannot read the motors' calibration: {fault.line}")]
    return [Check("calibration", False, other_calibration_line(rig))] if calibrated is False else []


def rig_checks(rig: Any, camera_seconds: float | None = None) -> list[Check]:
    """Port, calibration (the file, then the motors' against it), rest pose and cameras of a
    `LeRobotRig` (cameras measured for `camera_seconds`, default `CAMERA_SECONDS`)."""
    checks = []
    if "port" in {f for f in getattr(rig.config, "__dataclass_fields__", {})}:
        checks.append(check_port(rig.port))
    checks.append(check_calibration(rig))
    if all(c.ok for c in checks) and rig.needs_calibration:
        checks.extend(check_servo_alarms(rig) or check_motors_calibration(rig) or check_rest_pose(rig))
    checks.extend(check_cameras(rig, CAMERA_SECONDS if camera_seconds is None else camera_seconds))
    return checks


# ------------------------------------------------------------------ refusals on a real arm
REST_LIMIT_MARGIN = 5.0   # degrees (gripper: 0-100 units) a rest pose keeps from each calibrated limit
OVERRIDES = {
    "max_relative_target": "--allow-no-max-relative-target",
    "torque_at_exit": "--allow-torque-on-at-exit",
    "rest_near_limit": "--allow-rest-near-limit",
    "stop_key": "--allow-no-stop-key",
    "fast_max_relative_target": "--allow-fast-max-relative-target",
    "policy_units": "--allow-policy-units",
    "nan_warm_up": "--allow-nan-warm-up",
    "first_action_far": "--allow-far-first-action",
}
# The fastest a policy may drive a joint: max_relative_target (LeRobot's bound on a goal's distance
# from the present position, per step) times the control rate. 90 degrees per second sweeps the
# shoulder from folded to upright in about a second: slow enough for a person within reach to
# move away, fast enough for pick and place (LeRobot's so101 examples move well below it).
MAX_TARGET_SPEED_DEG_S = 90.0
DEFAULT_FPS = 30          # the control rate assumed without a protocol (lerobot-rollout's default --fps)
TICKS_PER_TURN = 4096     # an STS3215's resolution: -100..100 spans the calibrated ticks


def profile_refusals(rig: Any, allowed: Iterable[str] = (), fps: int | None = None) -> list[str]:
    """One line per setting of a real-arm profile that voids the safety rules (each names the
    flag that accepts it): no `max_relative_target` (LeRobot's default: a policy's target goes
    out however far from the present pose), `disable_torque_on_disconnect: false` (the arm keeps
    torque after the program ends), a rest pose within `REST_LIMIT_MARGIN` of a calibrated limit
    (the joint rests against its end stop; the gripper closed squeezes the cube the operator
    takes out), a `max_relative_target` that lets a joint go faster than `MAX_TARGET_SPEED_DEG_S` at
    `fps` (the protocol's; `DEFAULT_FPS` without one). A rest pose outside the range is
    `rest_pose_problems` (refused without override)."""
    allowed = set(allowed)
    lines = []
    fps = fps or DEFAULT_FPS
    if "max_relative_target" not in allowed and getattr(rig.config, "max_relative_target", None) is None:
        lines.append(f"{rig.name}: robot.max_relative_target is not set: a policy's target would go to the servos "
                     "however far it is from the present pose; set it (e.g. max_relative_target: "
                     f"{MAX_TARGET_SPEED_DEG_S / fps:.1f} at {fps} fps) or pass {OVERRIDES['max_relative_target']}")
    if "fast_max_relative_target" not in allowed:
        lines.extend(f"{rig.name}: {line}" for line in target_speed_refusal(rig, fps))
    if "torque_at_exit" not in allowed and getattr(rig.config, "disable_torque_on_disconnect", True) is False:
        lines.append(f"{rig.name}: robot.disable_torque_on_disconnect is false: the arm would keep torque after "
                     f"the program ends (a crash included); remove it or pass {OVERRIDES['torque_at_exit']}")
    if "rest_near_limit" not in allowed:
        lines.extend(f"{rig.name}: {line}; or pass {OVERRIDES['rest_near_limit']}" for line in rest_near_limits(rig))
    return lines


def target_speeds(rig: Any, fps: int) -> dict[str, tuple[float, float]]:
    """{joint: (max_relative_target, the degrees per second it allows at `fps`)} of the arm's
    joints (the gripper's 0-100 is no angle); none without a max_relative_target. With
    `use_degrees: false` a unit is the calibrated span over 200 (without a calibration, the
    widest: a whole turn)."""
    mrt = getattr(rig.config, "max_relative_target", None)
    if mrt is None:
        return {}
    bus = None
    if rig.joint_units != "degrees":   # the calibrated span converts a unit (the robot reads the file)
        try:
            bus = getattr(rig.robot, "bus", None)
        except BadInput:   # an unreadable calibration file: its own check says so; the widest span
            bus = None
    motors = list(getattr(bus, "motors", None) or ([] if isinstance(mrt, dict) else ["joint"]))
    per = {m: float(v) for m, v in mrt.items()} if isinstance(mrt, dict) else dict.fromkeys(motors, float(mrt))
    out = {}
    for motor, value in per.items():
        if motor == "gripper":
            continue
        degrees = 1.0
        if rig.joint_units != "degrees":
            cal = (getattr(bus, "calibration", None) or {}).get(motor)
            ticks = abs(cal.range_max - cal.range_min) if cal is not None else TICKS_PER_TURN
            degrees = ticks * 360 / TICKS_PER_TURN / 200
        out[motor] = (value, value * degrees * fps)
    return out


def target_speed_refusal(rig: Any, fps: int) -> list[str]:
    """One line when `max_relative_target` lets a joint go faster than `MAX_TARGET_SPEED_DEG_S`."""
    speeds = target_speeds(rig, fps)
    if not speeds:
        return []
    joint, (value, speed) = max(speeds.items(), key=lambda item: item[1][1])
    if speed <= MAX_TARGET_SPEED_DEG_S + 1e-9:
        return []
    limit = value * MAX_TARGET_SPEED_DEG_S / speed
    where = "" if joint == "joint" else f" {joint}"
    return [f"robot.max_relative_target {value:g} lets a policy drive{where or ' a joint'} at up to {speed:.0f} degrees "
            f"per second at {fps} fps, above the {MAX_TARGET_SPEED_DEG_S:g} allowed; set it to {limit:.1f} or less, "
            f"or pass {OVERRIDES['fast_max_relative_target']}"]


def rest_near_limits(rig: Any) -> list[str]:
    """The joints of the profile's rest pose within `REST_LIMIT_MARGIN` of a calibrated limit."""
    lines = []
    try:
        ranges = rig.rest_pose_ranges()
    except BadInput:   # an unreadable calibration file: the calibration check says so
        return []
    for key, value, lo, hi in ranges:
        if not lo <= value <= hi:
            continue   # outside the range: rest_pose_problems refuses it
        near = lo if value - lo < REST_LIMIT_MARGIN else hi if hi - value < REST_LIMIT_MARGIN else None
        if near is None:
            continue
        what = ("the gripper is closed at rest (it would squeeze the cube while the operator takes it out)"
                if key == "gripper.pos" and near == lo else f"within {REST_LIMIT_MARGIN:g} of its calibrated limit")
        lines.append(f"rest_pose {key}: {value:g} is {what} ({near:.1f}, range [{lo:.1f}, {hi:.1f}]); choose a pose "
                     f"at least {REST_LIMIT_MARGIN:g} inside")
    return lines


def stop_key_refusal(no_console: bool, stdin: Any, allowed: Iterable[str] = ()) -> list[str]:
    """A session at a real arm without a usable stop key: stdin is not a terminal (the console
    and the `--no-console` prompt both read their keys from it)."""
    if "stop_key" in set(allowed):
        return []
    try:
        tty = os.isatty(stdin.fileno())
    except (AttributeError, OSError, ValueError):
        tty = False
    if tty:
        return []
    how = "--no-console reads" if no_console else "the operator console reads"
    return [f"stdin is not a terminal: {how} the stop key from it, so nobody could stop the arm from the "
            f"keyboard; run it in a terminal, or pass {OVERRIDES['stop_key']} (then the arm's power switch "
            "is the only stop)"]


def read_present_pose(rig: Any) -> dict[str, float]:
    """The present joint positions read on a bare bus (nothing written; for doctor). A connect
    whose handshake fails leaves LeRobot's port open: it is closed here too, so the next try
    connects again (else it fails with DeviceAlreadyConnectedError, seen on the twin under load)."""
    bus = rig.robot.bus
    try:
        bus.connect()
        values = bus.sync_read("Present_Position", num_retry=rig._retries)
    finally:
        if bus.is_connected:
            bus.disconnect(disable_torque=False)
    return {f"{m}.pos": float(v) for m, v in values.items()}


# The robot types whose `calibrate()` is LeRobot's SO follower's: with a file for the id it asks
# "Press ENTER to use provided calibration file ... or type 'c'", and ENTER writes the file to the motors.
ENTER_WRITES_FILE = ("so101_follower", "so100_follower", "so_follower")


def other_calibration_line(rig: Any) -> str:
    """The refusal of an arm whose motors hold another calibration than the rig's file (`run`'s
    connect and `doctor` alike). What `lerobot-calibrate` then asks is said only for the robot
    types where it asks it (`ENTER_WRITES_FILE`); ENTER there would put this file on whatever arm
    is on the port, so it is named as the step for this arm only."""
    line = (f"the motors on {rig.port} hold another calibration than {rig.calibration_path} (another arm on "
            f"this port, or calibrated elsewhere); check the port, then run {calibrate_command(rig.profile)}")
    if rig.profile.robot.type in ENTER_WRITES_FILE:
        line += " and type 'c' to calibrate this arm again (ENTER would write the file to the motors on the port)"
    return line


def other_calibration(rig: Any) -> BadInput:
    return BadInput(f"{rig.name}: {other_calibration_line(rig)}")
