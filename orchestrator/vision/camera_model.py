"""A pinhole camera looking at the table: its intrinsics and its pose in the layout frame.

Intrinsics (`Intrinsics`) are square-pixel, principal point at the image centre, no distortion:
a simulated or twin camera is exactly that (MuJoCo's `fovy`), and for a real camera either the
profile's `pose.fovy_deg` or, without it, the focal length recovered from the template's
homography with Zhang's constraints (Z. Zhang, "A flexible new technique for camera
calibration", IEEE TPAMI 22(11), 2000, section 3.1: a plane's image gives two constraints on the
image of the absolute conic; with only the focal length unknown, one view determines it).
`source` says which.

The pose (`CameraPose`) maps layout-frame points to camera coordinates, as OpenCV's `rvec`,
`tvec` (`cv2.solvePnP`); `difference` is how far a camera moved between two poses. A camera
placed by where it is and the point it looks at (MuJoCo's look-at cameras in `sim.scene`, a rig
profile's camera `pose`, the rigs' `cameras.json`) is `CameraPose.look_at`; with
`Intrinsics.from_fovy` it is what the judges' zoom and guide draw with (`judging.overlay`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np


class IntrinsicsUnknown(ValueError):
    """The focal length cannot be recovered from this view of the table."""


@dataclass(frozen=True)
class Intrinsics:
    """Focal length `f_px` (pixels) of a `width` x `height` image; `source` as the docstring."""

    f_px: float
    width: int
    height: int
    source: str

    @property
    def matrix(self) -> np.ndarray:
        cx, cy = self.centre
        return np.array([[self.f_px, 0.0, cx], [0.0, self.f_px, cy], [0.0, 0.0, 1.0]])

    @property
    def centre(self) -> tuple[float, float]:
        """The principal point: the image centre in OpenCV's pixel coordinates, where pixel
        (0, 0)'s centre is at (0, 0), so the centre of a `width`-wide image is (width - 1) / 2."""
        return (self.width - 1) / 2.0, (self.height - 1) / 2.0

    @classmethod
    def from_fovy(cls, fovy_deg: float, width: int, height: int, source: str = "known fovy") -> Intrinsics:
        """MuJoCo's and the profile's convention: `fovy_deg` spans the image height."""
        return cls((height / 2.0) / math.tan(math.radians(fovy_deg) / 2.0), width, height, source)

    @classmethod
    def from_homography(cls, homography: np.ndarray, width: int, height: int) -> Intrinsics:
        """The focal length from one table-to-image homography (Zhang 2000, with the principal
        point at the image centre and square pixels: the two constraints solved together in
        the least-squares sense). `IntrinsicsUnknown` when the view is too frontal to tell."""
        shift = np.array([[1.0, 0.0, -(width - 1) / 2.0], [0.0, 1.0, -(height - 1) / 2.0], [0.0, 0.0, 1.0]])
        h = shift @ homography
        h1, h2 = h[:, 0], h[:, 1]
        # h1' W h2 = 0 and h1' W h1 = h2' W h2 with W = diag(w, w, 1), w = 1 / f^2
        a = np.array([h1[0] * h2[0] + h1[1] * h2[1], h1[0] ** 2 + h1[1] ** 2 - h2[0] ** 2 - h2[1] ** 2])
        b = np.array([h1[2] * h2[2], h1[2] ** 2 - h2[2] ** 2])
        denominator = float(a @ a)
        w = -float(a @ b) / denominator if denominator > 0 else -1.0
        if not w > 0:
            raise IntrinsicsUnknown("the camera's focal length cannot be recovered from this view "
                                    "(too frontal); give the camera's pose.fovy_deg in the rig profile")
        f = 1.0 / math.sqrt(w)
        if not (0.2 * height < f < 20.0 * height):
            raise IntrinsicsUnknown(f"the focal length recovered from the template ({f:.0f} px) is "
                                    "implausible; give the camera's pose.fovy_deg in the rig profile")
        return cls(f, width, height, "estimated from the template")

    def to_dict(self) -> dict:
        return {"f_px": self.f_px, "width": self.width, "height": self.height, "source": self.source}


@dataclass(frozen=True)
class CameraPose:
    """World (layout frame) to camera: x_cam = R x + t, with R = Rodrigues(`rvec`)."""

    rvec: tuple[float, float, float]
    tvec: tuple[float, float, float]

    @property
    def rotation(self) -> np.ndarray:
        return cv2.Rodrigues(np.asarray(self.rvec, float))[0]

    @property
    def position(self) -> np.ndarray:
        """The camera centre in the layout frame (metres)."""
        return -self.rotation.T @ np.asarray(self.tvec, float)

    @classmethod
    def look_at(cls, position: tuple[float, float, float], target: tuple[float, float, float]) -> CameraPose:
        """A camera at `position` looking at `target`, the image's up towards the world's +z (as
        MuJoCo's look-at cameras): its rows are the camera's right, down and forward axes."""
        centre = np.asarray(position, float)
        forward = np.asarray(target, float) - centre
        right = np.cross(forward, [0.0, 0.0, 1.0])
        if not (np.linalg.norm(forward) > 1e-9 and np.linalg.norm(right) > 1e-9 * np.linalg.norm(forward)):
            raise ValueError("a look-at camera must look at another point, not straight up or down")
        forward /= np.linalg.norm(forward)
        right /= np.linalg.norm(right)
        rotation = np.stack([right, np.cross(forward, right), forward])
        rvec = cv2.Rodrigues(rotation)[0].ravel()
        tvec = -rotation @ centre
        return cls((float(rvec[0]), float(rvec[1]), float(rvec[2])), (float(tvec[0]), float(tvec[1]), float(tvec[2])))

    def depth(self, points: np.ndarray) -> np.ndarray:
        """(N,) distance of each (N, 3) layout-frame point along the optical axis (<= 0: behind)."""
        return (np.atleast_2d(np.asarray(points, float)) @ self.rotation.T + np.asarray(self.tvec, float))[:, 2]

    def project(self, points: np.ndarray, intrinsics: Intrinsics) -> np.ndarray:
        """(N, 2) pixels of (N, 3) layout-frame points."""
        pixels, _ = cv2.projectPoints(np.asarray(points, float).reshape(-1, 3), np.asarray(self.rvec, float),
                                      np.asarray(self.tvec, float), intrinsics.matrix, None)
        return pixels.reshape(-1, 2)

    def ray_to_plane(self, pixel: tuple[float, float], z: float, intrinsics: Intrinsics) -> np.ndarray:
        """The layout-frame point at height `z` seen at `pixel`."""
        rotation, centre = self.rotation, self.position
        ray = rotation.T @ np.linalg.solve(intrinsics.matrix, [pixel[0], pixel[1], 1.0])
        return centre + (z - centre[2]) / ray[2] * ray

    def difference(self, other: CameraPose) -> tuple[float, float]:
        """(millimetres between the two camera centres, degrees of the rotation between them)."""
        moved_mm = 1000.0 * float(np.linalg.norm(self.position - other.position))
        relative = self.rotation @ other.rotation.T
        turned = math.degrees(math.acos(max(-1.0, min(1.0, (float(np.trace(relative)) - 1.0) / 2.0))))
        return moved_mm, turned

    def to_dict(self) -> dict:
        return {"rvec": list(self.rvec), "tvec": list(self.tvec),
                "position_m": [round(float(v), 5) for v in self.position]}

    @classmethod
    def from_dict(cls, data: dict) -> CameraPose:
        return cls(tuple(map(float, data["rvec"])), tuple(map(float, data["tvec"])))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Pinhole:
    """A located camera's projection precomputed for many calls (the fits' inner loops):
    `project` gives the pixels `CameraPose.project` gives (the same pinhole, no distortion), for
    points of any leading shape, in numpy without OpenCV's per-call set-up."""

    rotation: np.ndarray
    translation: np.ndarray
    f_px: float
    centre: tuple[float, float]

    @classmethod
    def of(cls, pose: CameraPose, intrinsics: Intrinsics) -> Pinhole:
        return cls(pose.rotation, np.asarray(pose.tvec, float), intrinsics.f_px, intrinsics.centre)

    def project(self, points: np.ndarray) -> np.ndarray:
        """(..., 2) pixels of (..., 3) layout-frame points."""
        camera = np.asarray(points, float) @ self.rotation.T + self.translation
        return self.f_px * camera[..., :2] / camera[..., 2:3] + np.asarray(self.centre)
