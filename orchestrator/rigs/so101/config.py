"""LeRobot configs from a rig profile: the robot config class for a robot type (LeRobot's
registry, its modules, `lerobot_robot_*` plugins), the cameras (opencv, the video-file camera,
the twin's camera), and LeRobot's `Robot.name` for a type (what a dataset's `robot_type` says).

Bad fields become `BadInput` with one line per problem. Imports LeRobot lazily.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from pathlib import Path
from typing import Any

from orchestrator.core.errors import BadInput
from orchestrator.rigs.extensions import camera_config
from orchestrator.rigs.profile import RigProfile
from orchestrator.rigs.so101.hardware_checks import unreadable_calibration

# Robot types whose config lives in a LeRobot module of another name.
_ROBOT_MODULES = {
    "so100_follower": "so_follower", "so101_follower": "so_follower",
    "bi_so100_follower": "bi_so_follower", "bi_so_follower": "bi_so_follower",
    "hope_jr_hand": "hope_jr", "hope_jr_arm": "hope_jr",
    "lekiwi_client": "lekiwi", "reachy2": "reachy2",
}
_OWN_CAMERA_FIELDS = {"type", "index_or_path", "width", "height", "fps", "pose", "geometry"}


def robot_config_class(robot_type: str):
    """The LeRobot `RobotConfig` subclass registered under `robot_type` (BadInput if none)."""
    from lerobot.robots import RobotConfig

    def known() -> list[str]:
        return sorted(RobotConfig.get_known_choices())

    if robot_type not in known():
        for module in (_ROBOT_MODULES.get(robot_type), robot_type):
            if module:
                try:
                    importlib.import_module(f"lerobot.robots.{module}")
                except ImportError:
                    pass
    if robot_type not in known():
        from lerobot.utils.import_utils import register_third_party_plugins

        register_third_party_plugins()
        import lerobot.robots as pkg

        for info in pkgutil.iter_modules(pkg.__path__):
            if info.ispkg:
                try:
                    importlib.import_module(f"lerobot.robots.{info.name}")
                except Exception:  # noqa: BLE001 - optional extras missing: that type is unavailable
                    pass
    if robot_type not in known():
        raise BadInput(f"rig: unknown LeRobot robot type {robot_type!r} (known: {', '.join(known())}; "
                       "third-party robots come from installed `lerobot_robot_*` packages)")
    return RobotConfig.get_choice_class(robot_type)


def robot_name(robot_type: str) -> str:
    """LeRobot's `Robot.name` for a robot type (what lerobot-record writes as a dataset's
    `robot_type`: `so_follower` for so101_follower), found without building the robot."""
    from lerobot.robots import Robot

    cls = robot_config_class(robot_type)
    todo, seen = list(Robot.__subclasses__()), set()
    while todo:
        robot = todo.pop()
        if robot in seen:
            continue
        seen.add(robot)
        todo.extend(robot.__subclasses__())
        if getattr(robot, "config_class", None) is cls and isinstance(getattr(robot, "name", None), str):
            return robot.name
    return robot_type


def camera_configs(profile: RigProfile, base_dir: Path) -> dict[str, Any]:
    """LeRobot camera configs for the profile's cameras (opencv, video)."""
    from lerobot.cameras.opencv import OpenCVCameraConfig

    from orchestrator.rigs.so101.videocam import VideoCamConfig

    configs: dict[str, Any] = {}
    problems = []
    for name, cam in profile.cameras.items():
        extra = {k: v for k, v in (cam.model_extra or {}).items() if k not in _OWN_CAMERA_FIELDS}
        common: dict[str, Any] = dict(fps=cam.fps, width=cam.width, height=cam.height)
        try:
            if cam.type == "opencv":
                if cam.index_or_path is None or cam.index_or_path == "":
                    problems.append(f"rig: camera {name}: type opencv needs index_or_path (a camera index "
                                    "such as 0, or a device path such as /dev/video0; list them with "
                                    "`lerobot-find-cameras opencv`)")
                    continue
                where: int | str | Path = cam.index_or_path
                if isinstance(where, str) and where.isdigit():
                    where = int(where)
                elif isinstance(where, str):
                    where = Path(where)
                configs[name] = OpenCVCameraConfig(index_or_path=where, **common, **extra)
            elif (registered := camera_config(cam.type)) is not None:   # the twin's (rigs/extensions.py)
                configs[name] = registered(cam, common)
            elif cam.type == "video":
                if not cam.index_or_path:
                    problems.append(f"rig: camera {name}: type video needs index_or_path: <file.mp4>")
                    continue
                path = Path(str(cam.index_or_path)).expanduser()
                if not path.is_absolute():
                    path = (base_dir / path).resolve()
                configs[name] = VideoCamConfig(index_or_path=path, **common, **extra)
            else:
                problems.append(f"rig: camera {name}: type {cam.type!r} is not a LeRobot camera here "
                                "(use opencv or video; sim cameras belong to the simulated rig)")
        except (TypeError, ValueError) as exc:
            problems.append(f"rig: camera {name}: {str(exc).splitlines()[0]}")
    if problems:
        raise BadInput(problems)
    return configs


def build_robot_config(profile: RigProfile, base_dir: Path | None = None):
    """The LeRobot robot config the profile describes (BadInput with one line per problem)."""
    spec = profile.robot
    cls = robot_config_class(spec.type)
    fields = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key in ("port", "id", "max_relative_target"):
        value = getattr(spec, key)
        if value is not None:
            if key not in fields:
                raise BadInput(f"rig: robot field {key!r} is not a field of LeRobot's {cls.__name__}")
            kwargs[key] = value
    unknown = []
    for key, value in (spec.model_extra or {}).items():
        if key not in fields:
            unknown.append(key)
        else:
            kwargs[key] = Path(value).expanduser() if key == "calibration_dir" and value else value
    if unknown:
        raise BadInput([f"rig: robot field {k!r} is not a field of LeRobot's {cls.__name__} "
                        f"(fields: {', '.join(sorted(fields))})" for k in unknown])
    if profile.cameras:
        if "cameras" not in fields:
            raise BadInput(f"rig: LeRobot's {cls.__name__} takes no cameras")
        kwargs["cameras"] = camera_configs(profile, base_dir or Path.cwd())
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise BadInput(f"rig: cannot build LeRobot's {cls.__name__}: {str(exc).splitlines()[0]}") from None


def make_robot(config: Any, profile: Any, name: str) -> Any:
    """LeRobot's robot for `config` (`make_robot_from_config`, not connected). BadInput, one line,
    for a calibration file LeRobot cannot parse (`hardware_checks.unreadable_calibration`) and
    for fields its robot class refuses."""
    from lerobot.robots import make_robot_from_config

    try:
        return make_robot_from_config(config)
    except Exception as exc:  # noqa: BLE001 - a calibration file LeRobot cannot parse, or bad fields
        unreadable = unreadable_calibration(exc, profile)
        if unreadable is not None:
            raise BadInput(f"{name}: calibration: {unreadable}") from None
        if not isinstance(exc, (ImportError, ValueError, TypeError)):
            raise
        raise BadInput(f"{name}: cannot build the LeRobot robot: {str(exc).splitlines()[0]}") from None
