"""Rig profiles (`hardware/*.yaml`): which robot, which cameras, the rest pose.

Field names follow LeRobot's configs (`SO101FollowerConfig`, `OpenCVCameraConfig`) so a user
can carry over what they pass to `lerobot-rollout` (docs/design.md section 7).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from orchestrator.core.errors import BadInput
from orchestrator.design.joints import STATE_KEYS
from orchestrator.design.located_errors import load_validated
from orchestrator.rigs.extensions import section_check
from orchestrator.rigs.placement import PlacementSpec
from orchestrator.rigs.reset_slip import ResetSlip
from orchestrator.store.records import RIG_REAL_ARM, RIG_SIMULATED, RIG_TWIN, SIMULATED_ROBOT_TYPE
from orchestrator.vision.wrist_geometry import GeometrySpec


class CameraPoseSpec(BaseModel):
    """Where a fixed camera is (layout frame, metres) and what it looks at, with its vertical
    field of view: lets the judge zoom on the mark and draw the success-height guide."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    position: tuple[float, float, float]
    target: tuple[float, float, float]
    fovy_deg: Annotated[float, Field(gt=1, lt=179)]


def _geometry_kind(value: Any) -> str:
    return "File" if isinstance(value, str) else "Inline"


# a file's name or the mapping itself; chosen by its type, so a bad inline value is one error
# (not one more for "not a string"); the capitalised tags are dropped from error locations
GeometryField = Annotated[Annotated[str, Tag("File")] | Annotated[GeometrySpec, Tag("Inline")],
                          Discriminator(_geometry_kind)]


class CameraSpec(BaseModel):
    """One camera. `type` is `sim`, `opencv` or `video` (a video file played as a camera)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: str = "opencv"
    width: Annotated[int, Field(gt=0, le=4096)]
    height: Annotated[int, Field(gt=0, le=4096)]
    fps: Annotated[int, Field(gt=0, le=240)]
    index_or_path: int | str | None = None
    pose: CameraPoseSpec | None = None   # fixed cameras only (measured by hand, or the twin's)
    # the wrist camera's mount and intrinsics (vision/wrist_geometry.py), or the file that has them
    # (relative to the profile; `orchestrator camera calibrate-wrist` writes it): `load_rig` reads it
    geometry: GeometryField | None = None


def profile_camera_poses(profile: RigProfile) -> dict[str, dict]:
    """The poses the profile gives, with each camera's image size (`judging.overlay.posed_camera`),
    and the geometry of a camera that rides on the gripper (`geometry`, as `load_rig` read it:
    the rater's wrist sense reads it back, `judging.auto.wrist.recorded_geometry`)."""
    poses = {name: {"position": list(c.pose.position), "target": list(c.pose.target),
                    "fovy_deg": c.pose.fovy_deg, "width": c.width, "height": c.height}
             for name, c in profile.cameras.items() if c.pose is not None}
    poses.update({name: {"geometry": c.geometry.model_dump(mode="json"), "width": c.width, "height": c.height}
                  for name, c in profile.cameras.items() if isinstance(c.geometry, GeometrySpec)})
    return poses


def profile_observation_features(profile: RigProfile) -> dict[str, Any]:
    """LeRobot-style observation features of a rig profile: joints (float) and cameras (H, W, 3)."""
    features: dict[str, Any] = {key: float for key in STATE_KEYS}
    for name, cam in profile.cameras.items():
        features[name] = (cam.height, cam.width, 3)
    return features


class RobotSpec(BaseModel):
    """The robot: `type` is a LeRobot robot type (`so101_follower`, ...) or `sim_so101`."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: Annotated[str, Field(min_length=1)]
    port: str | None = None
    id: str | None = None
    max_relative_target: float | None = None


class RigProfile(BaseModel):
    """`rest_pose`: where the arm goes between trials (default: the pose captured at connect).
    `on_stop`: what the stop key does to the arm: `hold` it where it is (default), or
    `release` torque (the arm goes limp: only for arms that cannot fall on anyone)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    robot: RobotSpec
    cameras: dict[str, CameraSpec] = {}
    rest_pose: dict[str, float] = {}
    on_stop: Literal["hold", "release"] = "hold"
    placement: PlacementSpec | None = None   # simulator and twin only: the hand's error (rigs/placement.py)
    reset_slip: ResetSlip | None = None   # where the arm's reset placements land, measured (rigs/reset_slip.py)
    twin: dict[str, Any] | None = None   # `--twin` only: {faults: [...], seed: N, wire_log: FILE} (rigs/twin/fault_plan.py)

    @property
    def simulated(self) -> bool:
        return self.robot.type == SIMULATED_ROBOT_TYPE

    @property
    def device_kind(self) -> str:
        """The rig kind this profile's robot type is the config of (`rigs.factory`): `sim` for
        `sim_so101`, `lerobot` for a LeRobot robot type. The twin is not a robot type: it is
        paired with a profile when it starts (`LoadedRig.kind`)."""
        return "sim" if self.simulated else "lerobot"


@dataclass(frozen=True)
class LoadedRig:
    """A rig profile as loaded, and the device it is paired with: `kind` is the rig kind that
    `rigs.factory.make_rig` builds, stated when the pair is made (`load_rig`: the profile's
    robot type; `rigs.twin.client.swap_sources`: `twin`, with the running twin in `twin`).
    `allowed`: the safety overrides given for this session (the `--allow-*` flags of `run`,
    keys of `rigs.so101.hardware_checks.OVERRIDES`), which the runner's checks at its start honour."""

    path: Path
    profile: RigProfile
    text: str
    kind: str = ""
    twin: Any = None        # the running twin (`rigs.twin.client.Twin`) when run with --twin
    allowed: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.kind:
            object.__setattr__(self, "kind", self.profile.device_kind)
        if (self.kind == "twin") != (self.twin is not None):
            raise ValueError(f"rig kind {self.kind!r} with {'a' if self.twin is not None else 'no'} running twin")

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def load_rig(path: str | Path, missing_geometry_ok: bool = False) -> LoadedRig:
    """Load and validate a rig profile; `BadInput` with located lines on any problem. A camera's
    `geometry` file is read and validated here (`geometry_file`); `missing_geometry_ok`: a file
    that does not exist yet is left out (`camera calibrate-wrist` is about to write it)."""
    path = Path(path)
    profile, data, smap, text = load_validated(path, "rig profile", RigProfile)
    profile = _with_geometry_files(profile, path, missing_geometry_ok)
    problems = _near_miss_keys(data, smap)
    for key in profile.rest_pose:
        if key not in STATE_KEYS:
            problems.append(f"{smap.locate(('rest_pose', key))}: unknown joint {key!r} "
                            f"(expected one of {', '.join(STATE_KEYS)})")
    if profile.twin is not None:
        check = section_check("twin")   # the twin's fault plan (rigs/extensions.py)
        if check is not None:
            problems += check(profile.twin, tuple(profile.cameras), smap.locate(("twin",)))
    if problems:
        raise BadInput(problems)
    return LoadedRig(path=path, profile=profile, text=text)


def geometry_file(profile_path: Path, camera: CameraSpec) -> Path | None:
    """The file a camera's `geometry` names, relative to the profile's folder (None: not a file)."""
    if not isinstance(camera.geometry, str):
        return None
    return (Path(profile_path).parent / camera.geometry).resolve()


def _with_geometry_files(profile: RigProfile, path: Path, missing_ok: bool) -> RigProfile:
    """`profile` with each camera's `geometry` file read in its place (`vision.wrist_geometry`)."""
    from orchestrator.vision.wrist_geometry import load_geometry

    cameras = dict(profile.cameras)
    for name, camera in profile.cameras.items():
        file = geometry_file(path, camera)
        if file is None:
            continue
        if not file.is_file():
            if missing_ok:   # left as the file's name: no geometry recorded (`profile_camera_poses`)
                continue
            raise BadInput(f"{path}: cameras.{name}.geometry: {file} does not exist "
                           f"(measure it: orchestrator camera calibrate-wrist --rig {path})")
        spec = GeometrySpec.model_validate(load_geometry(file).to_spec())
        cameras[name] = camera.model_copy(update={"geometry": spec})
    return profile.model_copy(update={"cameras": cameras})


# Fields of LeRobot's robot and camera configs that profiles commonly use. Robot and camera
# sections allow other keys (they are passed on to LeRobot's config classes), but a key that is
# a near miss of one of these (`max_relative_targt`) is almost certainly a typo of a safety or
# device setting, so it is refused with a suggestion instead of being silently ignored.
_ROBOT_FIELDS = ("type", "port", "id", "max_relative_target", "disable_torque_on_disconnect", "num_read_retries",
                 "use_degrees", "calibration_dir", "cameras")
_CAMERA_FIELDS = ("type", "index_or_path", "width", "height", "fps", "color_mode", "rotation",
                  "warmup_s", "fourcc", "backend", "pose", "geometry")


def _near_miss_keys(data: dict, smap) -> list[str]:
    import difflib

    problems = []
    sections: list[tuple[tuple, Any, tuple[str, ...]]] = [(("robot",), data.get("robot"), _ROBOT_FIELDS)]
    cameras = data.get("cameras")
    if isinstance(cameras, dict):
        sections += [(("cameras", name), spec, _CAMERA_FIELDS) for name, spec in cameras.items()]
    for loc, section, known in sections:
        if not isinstance(section, dict):
            continue
        for key in section:
            if key in known or not isinstance(key, str):
                continue
            hint = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
            if hint:
                problems.append(f"{smap.locate((*loc, key))}: unknown key {key!r} "
                                f"(did you mean {hint[0]!r}?)")
    return problems


def parse_rig_text(text: str, where: str = "rig") -> RigProfile:
    """Rebuild a profile from the text frozen in a campaign store."""
    import yaml

    data: Any = yaml.safe_load(text)
    return RigProfile.model_validate(data)


def campaign_rig_kind(campaign: Mapping[str, Any]) -> str:
    """The kind of rig a campaign ran on (`store.records`: RIG_*), from what it froze at its
    creation: `real_arm` when it is not simulated; `simulated` when its rig profile's robot type is
    the MuJoCo rig's (`sim_so101`); `twin` when a real-arm profile ran on the wire-level twin
    (`--twin`: a simulated campaign whose profile names a LeRobot robot type). The twin and a real
    arm are paced in wall-clock time, the simulated rig is not. Stores written before the kind was
    shown answer the same: the flag and the profile's text have been frozen since schema 1."""
    import yaml

    if not campaign.get("simulated"):
        return RIG_REAL_ARM
    try:
        data = yaml.safe_load(str(campaign.get("rig_text") or ""))
    except yaml.YAMLError:
        data = None
    robot = data.get("robot") if isinstance(data, dict) else None
    robot_type = robot.get("type") if isinstance(robot, dict) else None
    return RIG_TWIN if robot_type not in (None, SIMULATED_ROBOT_TYPE) else RIG_SIMULATED
