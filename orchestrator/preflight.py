"""Preflight: everything that must hold before the first trial, checked without starting anything.

Used by `orchestrator doctor --rig RIG [--protocol P]` and by the runner before the first trial.
Checks, in order (all of them run; each problem is one line):

- port: the robot's serial port exists (pyserial's port list, or the device path) -> hint
  `lerobot-find-port`;
- calibration: LeRobot's calibration file for this robot type and id exists (LeRobot's
  `connect()` would otherwise ask on stdin mid-campaign) -> the exact `lerobot-calibrate` command;
- rest pose: the profile's rest pose lies inside the calibrated range of each joint; the
  present pose (read on a bare bus: nothing written, torque untouched) is shown next to the
  rest pose the arm will go to (the profile's, or the present one, captured at connect);
- cameras: each camera opens and delivers frames at its configured fps (measured);
- policies: each LeRobot checkpoint of the protocol loads, offline, and its input/output features
  match the rig (camera names, image shapes, state and action sizes), spelled out; warnings as
  lerobot-rollout gives them; the weights of all policies together against the accelerator's
  free memory (they stay loaded for the whole campaign);
- disk: free space where the campaign is written, against an estimate of what it will need.

A simulated rig (`sim_so101`) has no port, calibration or cameras to check; its policies and disk
are checked the same way. Only the checks that need LeRobot import it (lazily).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .errors import BadInput
from .faults import one_line
from .rigs.profile import LoadedRig

FPS_TOLERANCE = 0.9       # a camera must deliver >= 90 % of its configured fps
MIN_FREE_BYTES = 1 << 30  # never start a campaign with less than 1 GiB free


@dataclass(frozen=True)
class Check:
    """One preflight check: `name` (what), `ok`, `detail` (the measurement, or the problem)."""

    name: str
    ok: bool
    detail: str

    @property
    def line(self) -> str:
        return f"{self.name}: {self.detail}"


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


def check_calibration(rig: Any) -> Check:
    """LeRobot's calibration file for the rig's robot type and id exists."""
    from .rigs.lerobot import calibrate_command

    if not rig.needs_calibration:
        return Check("calibration", True, "not needed for this robot type")
    path = rig.calibration_path
    spec = rig.profile.robot
    if path.is_file():
        return Check("calibration", True, f"{path}")
    return Check("calibration", False,
                 f"no calibration file for {spec.type} id {spec.id!r} (looked for {path}); LeRobot would "
                 f"stop and ask on stdin mid-campaign: calibrate first with {calibrate_command(rig.profile)}")


def measure_camera(camera: Any, seconds: float) -> float:
    """Frames per second a connected LeRobot camera delivers over `seconds`: new frames seen by
    `async_read` (a camera that counts its own deliveries, like the video camera, is read from
    its counter, which a busy reader cannot undercount)."""
    camera.async_read(timeout_ms=2000)  # wait for a fresh frame, then count
    counter = getattr(camera, "frames_delivered", None)
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        camera.async_read(timeout_ms=max(500.0, 3000.0 / max(camera.fps or 1, 1)))
        count += 1
    if isinstance(counter, int):
        count = camera.frames_delivered - counter
    return count / elapsed


def check_cameras(rig: Any, seconds: float = 1.0) -> list[Check]:
    """Open each camera (or use the connected ones) and measure the frame rate it delivers."""
    checks = []
    robot = rig.robot
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
        opened_here = False
        try:
            if not cam.is_connected:
                cam.connect()
                opened_here = True
            fps = measure_camera(cam, seconds)
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
        size = f"{spec.width}x{spec.height}" if spec else ""
        if fps < FPS_TOLERANCE * want:
            checks.append(Check(f"camera {name}", False,
                                f"{where} delivers {fps:.1f} fps, configured {want} fps ({size}); lower the "
                                "resolution or fps in the rig profile, use another USB port/hub, or try "
                                "fourcc: MJPG"))
        else:
            checks.append(Check(f"camera {name}", True, f"{where} {size} at {fps:.1f} fps (configured {want})"))
    return checks


def check_rest_pose(rig: Any) -> list[Check]:
    """The rest pose inside the calibrated range; the present pose next to it (bare bus read)."""
    problems = rig.rest_pose_problems()
    if problems:
        return [Check("rest pose", False, line) for line in problems]
    if getattr(rig.robot, "bus", None) is None or getattr(rig, "_connected", False):
        return []
    try:
        present = rig.read_present_pose()
    except Exception as exc:  # noqa: BLE001
        return [Check("rest pose", False, f"cannot read the arm's present pose ({one_line(exc)}); check "
                                          "its power and USB cable")]
    rest = dict(rig.profile.rest_pose)
    source = "profile" if rest else "captured at connect: the present pose"
    rest = rest or present

    def pose(p: dict) -> str:
        return " ".join(f"{k.removesuffix('.pos')}={p[k]:.1f}" for k in p)

    return [Check("rest pose", True, f"present {pose(present)}; rest ({source}) {pose(rest)}")]


def rig_checks(rig: Any, camera_seconds: float = 1.0) -> list[Check]:
    """Port, calibration, rest pose and cameras of a `LeRobotRig`."""
    checks = []
    if "port" in {f for f in getattr(rig.config, "__dataclass_fields__", {})}:
        checks.append(check_port(rig.port))
    checks.append(check_calibration(rig))
    if all(c.ok for c in checks) and rig.needs_calibration:
        checks.extend(check_rest_pose(rig))
    checks.extend(check_cameras(rig, camera_seconds))
    return checks


def check_policies(protocol: Any, rig_features: Any, robot_type: str | None = None) -> list[Check]:
    """Each LeRobot policy of the protocol loads and matches the rig; their weights fit together."""
    from .protocol import LeRobotPolicySpec

    checks = []
    sizes: dict[str, dict[str, int]] = {}
    for label, spec in protocol.protocol.policies.items():
        if not isinstance(spec, LeRobotPolicySpec):
            checks.append(Check(f"policy {label}", True, f"{spec.type}"))
            continue
        from .policies.checkpoint import parameter_bytes
        from .policies.lerobot import LeRobotPolicy

        try:
            policy = LeRobotPolicy(spec, protocol.path.parent, protocol.protocol.task, rig_features,
                                   robot_type=robot_type)
        except BadInput as exc:
            prefix = f"policy checkpoint {spec.path}: "
            checks.extend(Check(f"policy {label} ({spec.path})", False, line.removeprefix(prefix))
                          for line in exc.problems)
            continue
        except Exception as exc:  # noqa: BLE001
            checks.append(Check(f"policy {label}", False, f"{spec.path}: cannot load: {one_line(exc)}"))
            continue
        cfg = policy.config
        cams = [k.removeprefix("observation.images.") for k in getattr(cfg, "image_features", {})]
        size = parameter_bytes(policy.policy)
        sizes.setdefault(str(policy.device), {})[label] = size
        checks.append(Check(f"policy {label}", True,
                            f"{spec.path} loads ({cfg.type} on {policy.device}, cameras "
                            f"{', '.join(cams) or 'none'}, {len(policy.ordered_action_keys)} actions)"))
        checks.append(Check(f"policy {label}", True, f"{size / 1e6:.0f} MB of weights; warm-up forward pass "
                                                     f"{policy.warmup_s * 1000:.0f} ms"))
        prefix = f"policy checkpoint {spec.path}: "
        checks.extend(Check(f"policy {label}", True, "warning: " + w.removeprefix(prefix)) for w in policy.warnings)
        policy.close()
    checks.extend(_memory_checks(sizes))
    return checks


def _memory_checks(sizes: dict[str, dict[str, int]]) -> list[Check]:
    from .policies.checkpoint import memory_problem

    checks = []
    for device, by_label in sizes.items():
        free = None
        if device.startswith("cuda"):
            import torch

            free = torch.cuda.mem_get_info(torch.device(device))[0]
        problem = memory_problem(by_label, device, free)
        if problem:
            checks.append(Check(f"memory {device}", False, problem))
        elif free is not None:
            checks.append(Check(f"memory {device}", True, f"{sum(by_label.values()) / (1 << 30):.1f} GiB of "
                                                          f"weights, {free / (1 << 30):.1f} GiB free"))
    return checks


def estimate_campaign_bytes(protocol: Any, profile: Any) -> int:
    """A generous estimate of the videos a campaign writes (0.15 bit per pixel, H.264-like)."""
    if protocol is None:
        return 0
    p = protocol.protocol
    trials = len(protocol.layout.marks) * len(p.policies) * p.trials_per_layout
    per_episode = sum(c.width * c.height * p.episode.fps * p.episode.duration_s * 0.15 / 8
                      for c in profile.cameras.values())
    return int(trials * per_episode * 1.5)


def check_disk(path: Path, need_bytes: int = 0) -> Check:
    """Free space on the file system that will hold the campaign."""
    probe = Path(path).resolve()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    need = max(MIN_FREE_BYTES, 2 * need_bytes)
    gib = 1 << 30
    if free < need:
        return Check("disk", False, f"{free / gib:.1f} GiB free at {probe}, the campaign needs about "
                                    f"{need / gib:.1f} GiB; free some space or choose another --out")
    return Check("disk", True, f"{free / gib:.1f} GiB free at {probe} (campaign estimate "
                               f"{need_bytes / gib:.2f} GiB)")


def run_preflight(loaded_rig: LoadedRig, protocol: Any = None, out_dir: Path | str | None = None, *,
                  rig: Any = None, camera_seconds: float = 1.0,
                  on_check: Callable[[Check], None] | None = None) -> list[Check]:
    """All checks for this rig (and protocol, and campaign folder). Nothing is started: devices
    opened to be checked are closed again (a `rig` already connected is measured as it is)."""
    from .policies.lerobot import SO101_ROBOT_TYPE, rig_observation_features

    checks: list[Check] = []

    def add(items: Iterable[Check]) -> None:
        for check in items:
            checks.append(check)
            if on_check:
                on_check(check)

    profile = loaded_rig.profile
    if profile.simulated:
        features, robot_type = rig_observation_features(profile), SO101_ROBOT_TYPE
    else:
        if rig is None:
            from .rigs.lerobot import LeRobotRig

            rig = LeRobotRig(loaded_rig)
        add(rig_checks(rig, camera_seconds))
        features, robot_type = rig, None
    if protocol is not None:
        add(check_policies(protocol, features, robot_type))
    add([check_disk(Path(out_dir or "recordings"), estimate_campaign_bytes(protocol, profile))])
    return checks


def require_ready(checks: list[Check]) -> None:
    """BadInput (exit 2) with one line per failed check; nothing has been started."""
    problems = [c.line for c in checks if not c.ok]
    if problems:
        raise BadInput(problems)
