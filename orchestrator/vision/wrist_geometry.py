"""The wrist camera's geometry: where it sits on the gripper (its *mount*) and how it images (its
*intrinsics*), as a rig profile gives it (`cameras.wrist.geometry`) and `orchestrator camera
calibrate-wrist` measures it (`vision.wrist_calibration`).

Definitions.
- *Mount*: the camera's centre in the gripper body (`position_m`, metres) and the rotation from
  the camera's axes to the gripper body's (`rotation_deg`, a rotation vector in degrees: its
  direction the axis, its length the angle). The camera's axes are OpenCV's (x right, y down, z
  along the optical axis). The gripper body is the Menagerie SO-101's `gripper` body, whose pose
  the joints give by forward kinematics (`sim.fk.grasp_pose`; its origin is the grasp point less
  `fk.GRASP_SITE` turned into the layout frame).
- *Intrinsics*: OpenCV's pinhole with lens distortion (`cv2.projectPoints`): focal lengths
  `f_px` (fx, fy), principal point `principal_px` (cx, cy; pixel (0, 0)'s centre at (0, 0)), and
  `distortion` (k1, k2, p1, p2, k3: Brown-Conrady radial and tangential), for an image `width` x
  `height`. An image of another size with the same aspect ratio scales them (`scaled_to`).

The simulated SO-101's wrist camera is `model_geometry` (the MuJoCo model's mount and field of
view, `sim.fk`, no distortion): the simulated rig and the twin use it. A file (`load_geometry`,
YAML or JSON) is validated field by field; a bad value is one line naming the file and the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import cv2
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.core.errors import BadInput
from orchestrator.sim import fk

VERSION = 1
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


class MountSpec(BaseModel):
    """The mount as a file gives it (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    position_m: tuple[FiniteFloat, FiniteFloat, FiniteFloat]
    rotation_deg: tuple[FiniteFloat, FiniteFloat, FiniteFloat]

    @field_validator("position_m")
    @classmethod
    def _near_the_gripper(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        if not float(np.linalg.norm(value)) <= 0.25:
            raise ValueError("a wrist camera is within 0.25 m of the gripper body's origin")
        return value


class IntrinsicsSpec(BaseModel):
    """The intrinsics as a file gives them (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    width: Annotated[int, Field(gt=0, le=8192)]
    height: Annotated[int, Field(gt=0, le=8192)]
    f_px: tuple[Annotated[float, Field(gt=1.0, lt=1e5)], Annotated[float, Field(gt=1.0, lt=1e5)]]
    principal_px: tuple[FiniteFloat, FiniteFloat]
    distortion: tuple[FiniteFloat, FiniteFloat, FiniteFloat, FiniteFloat, FiniteFloat] = (0.0, 0.0, 0.0, 0.0, 0.0)


class GeometrySpec(BaseModel):
    """A wrist camera's geometry: `mount` and `intrinsics`; `measured` says how (free-form)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    version: int = VERSION
    mount: MountSpec
    intrinsics: IntrinsicsSpec
    measured: dict[str, Any] = {}


@dataclass(frozen=True)
class WristGeometry:
    """The wrist camera's mount (`position` (3,), `rotation` (3, 3): columns the camera's axes in
    the gripper body) and intrinsics (`matrix` (3, 3), `distortion` (5,), for `width` x `height`);
    `source` says where they came from."""

    position: np.ndarray
    rotation: np.ndarray
    matrix: np.ndarray
    distortion: np.ndarray
    width: int
    height: int
    source: str

    @property
    def f_px(self) -> float:
        """The mean focal length (pixels)."""
        return float((self.matrix[0, 0] + self.matrix[1, 1]) / 2.0)

    def scaled_to(self, width: int, height: int) -> WristGeometry:
        """The same camera for an image `width` x `height` of the same aspect ratio (the
        intrinsics scale with it); `ValueError` for another aspect ratio."""
        if (width, height) == (self.width, self.height):
            return self
        if abs((width / height) / (self.width / self.height) - 1.0) > 0.01:
            raise ValueError(f"the wrist camera's geometry is for {self.width}x{self.height}, "
                             f"not {width}x{height} (another aspect ratio)")
        s = width / self.width
        matrix = self.matrix.copy()
        matrix[0, 0], matrix[1, 1] = matrix[0, 0] * s, matrix[1, 1] * s
        matrix[0, 2], matrix[1, 2] = (matrix[0, 2] + 0.5) * s - 0.5, (matrix[1, 2] + 0.5) * s - 0.5
        return WristGeometry(self.position, self.rotation, matrix, self.distortion, width, height, self.source)

    def project(self, points_g: np.ndarray) -> np.ndarray:
        """(N, 2) pixels of (N, 3) gripper-body points, distortion included."""
        rvec = cv2.Rodrigues(self.rotation.T)[0]
        tvec = -self.rotation.T @ self.position
        pixels, _ = cv2.projectPoints(np.asarray(points_g, float).reshape(-1, 3), rvec, tvec, self.matrix,
                                      self.distortion)
        return pixels.reshape(-1, 2)

    def undistorted(self, image: np.ndarray) -> np.ndarray:
        """`image` resampled to the pinhole of `matrix` without distortion (the image itself
        when there is none)."""
        if not np.any(self.distortion):
            return image
        return cv2.undistort(image, self.matrix, self.distortion)

    def to_spec(self, measured: dict[str, Any] | None = None) -> dict[str, Any]:
        """The file's mapping (`GeometrySpec`)."""
        rvec = np.degrees(cv2.Rodrigues(self.rotation)[0].ravel())
        return {"version": VERSION,
                "mount": {"position_m": [round(float(v), 6) for v in self.position],
                          "rotation_deg": [round(float(v), 4) for v in rvec]},
                "intrinsics": {"width": self.width, "height": self.height,
                               "f_px": [round(float(self.matrix[0, 0]), 3), round(float(self.matrix[1, 1]), 3)],
                               "principal_px": [round(float(self.matrix[0, 2]), 3), round(float(self.matrix[1, 2]), 3)],
                               "distortion": [round(float(v), 6) for v in self.distortion]},
                "measured": dict(measured or {})}

    @classmethod
    def from_spec(cls, spec: GeometrySpec, source: str) -> WristGeometry:
        i = spec.intrinsics
        matrix = np.array([[i.f_px[0], 0.0, i.principal_px[0]], [0.0, i.f_px[1], i.principal_px[1]], [0.0, 0.0, 1.0]])
        rotation = cv2.Rodrigues(np.radians(np.asarray(spec.mount.rotation_deg, float)))[0]
        return cls(np.asarray(spec.mount.position_m, float), rotation, matrix, np.asarray(i.distortion, float),
                   i.width, i.height, source)


def model_geometry(width: int, height: int) -> WristGeometry:
    """The simulated SO-101's wrist camera (`sim.fk`: the MuJoCo model's mount, its vertical field
    of view `WRIST_CAMERA_FOVY_DEG`, square pixels, principal point at the image centre)."""
    at, turn = fk.gripper_to_wrist_camera()
    f = (height / 2.0) / math.tan(math.radians(fk.WRIST_CAMERA_FOVY_DEG) / 2.0)
    matrix = np.array([[f, 0.0, (width - 1) / 2.0], [0.0, f, (height - 1) / 2.0], [0.0, 0.0, 1.0]])
    return WristGeometry(at, turn, matrix, np.zeros(5), width, height, "the simulated SO-101's model")


def parse_geometry(data: Any, where: str) -> WristGeometry:
    """A geometry mapping (`GeometrySpec`) read from `where`; `BadInput`, one line naming `where`
    and the first bad field, when it is not one."""
    from pydantic import ValidationError

    try:
        spec = GeometrySpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise BadInput(f"{where}: wrist camera geometry: {field}: {first['msg']}") from None
    if spec.version != VERSION:
        raise BadInput(f"{where}: wrist camera geometry version {spec.version}, this tool reads {VERSION}")
    return WristGeometry.from_spec(spec, str(where))


def load_geometry(path: Path) -> WristGeometry:
    """The geometry in the YAML (or JSON) file `path`; `BadInput` with one located line per
    problem (`design.located_errors.load_validated`)."""
    from orchestrator.design.located_errors import load_validated

    spec, _, _, _ = load_validated(Path(path), "wrist camera geometry", GeometrySpec)
    if spec.version != VERSION:
        raise BadInput(f"{path}: wrist camera geometry version {spec.version}, this tool reads {VERSION}")
    return WristGeometry.from_spec(spec, str(path))


def write_geometry(path: Path, geometry: WristGeometry, measured: dict[str, Any]) -> Path:
    """Write `geometry` to `path` as YAML, atomically (`core.durable.write_atomic`)."""
    import yaml

    from orchestrator.core.durable import write_atomic

    text = ("# The wrist camera's geometry (orchestrator/vision/wrist_geometry.py): written by\n"
            "# `orchestrator camera calibrate-wrist`; the rig profile points to it (cameras.wrist.geometry).\n"
            + yaml.safe_dump(geometry.to_spec(measured), sort_keys=False, default_flow_style=None))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(Path(path), text)
    return Path(path)
