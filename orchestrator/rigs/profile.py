"""Rig profiles (`hardware/*.yaml`): which robot, which cameras, the rest pose.

Field names follow LeRobot's configs (`SO101FollowerConfig`, `OpenCVCameraConfig`) so a user
can carry over what they pass to `lerobot-rollout` (DESIGN section 4).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import BadInput
from ..protocol import format_validation_errors
from ..yamlsrc import load_yaml_mapping

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
"""SO-101 motor names; observation/action keys are `<joint>.pos` (degrees, gripper 0-100)."""
STATE_KEYS = tuple(f"{j}.pos" for j in JOINTS)


class CameraSpec(BaseModel):
    """One camera. `type` is `sim`, `opencv` or `video` (a video file played as a camera)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: str = "opencv"
    width: Annotated[int, Field(gt=0, le=4096)]
    height: Annotated[int, Field(gt=0, le=4096)]
    fps: Annotated[int, Field(gt=0, le=240)]
    index_or_path: int | str | None = None


class RobotSpec(BaseModel):
    """The robot: `type` is a LeRobot robot type (`so101_follower`, ...) or `sim_so101`."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: Annotated[str, Field(min_length=1)]
    port: str | None = None
    id: str | None = None
    max_relative_target: float | None = None


class RigProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    robot: RobotSpec
    cameras: dict[str, CameraSpec] = {}
    rest_pose: dict[str, float] = {}

    @property
    def simulated(self) -> bool:
        return self.robot.type == "sim_so101"


@dataclass(frozen=True)
class LoadedRig:
    path: Path
    profile: RigProfile
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def load_rig(path: str | Path) -> LoadedRig:
    """Load and validate a rig profile; `BadInput` with located lines on any problem."""
    path = Path(path)
    data, smap, text = load_yaml_mapping(path, "rig profile")
    try:
        profile = RigProfile.model_validate(data)
    except ValidationError as exc:
        raise BadInput(format_validation_errors(exc, smap, RigProfile, data)) from None
    problems = []
    for key in profile.rest_pose:
        if key not in STATE_KEYS:
            problems.append(f"{smap.locate(('rest_pose', key))}: unknown joint {key!r} "
                            f"(expected one of {', '.join(STATE_KEYS)})")
    if problems:
        raise BadInput(problems)
    return LoadedRig(path=path, profile=profile, text=text)


def parse_rig_text(text: str, where: str = "rig") -> RigProfile:
    """Rebuild a profile from the text frozen in a campaign store."""
    import yaml

    data: Any = yaml.safe_load(text)
    return RigProfile.model_validate(data)
