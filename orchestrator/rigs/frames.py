"""One still from a rig's camera, without connecting the arm: what `camera check` and the
start-state check look at.

`Rig.camera_still` is the way in: a simulated rig renders its scene (`SimRig.render`); a
connected LeRobot rig reads its own open camera. Otherwise (`grab_frame`, the default) LeRobot
opens that camera alone through LeRobot's camera classes (`make_cameras_from_configs`), lets
`WARMUP_FRAMES` frames pass (a USB camera's exposure settles over its first frames), keeps the
next one and closes the camera again: the bus is never opened, so nothing can move.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrator.core.errors import BadInput
from orchestrator.vision.camera_model import Intrinsics

WARMUP_FRAMES = 5
READ_TIMEOUT_MS = 3000.0


def no_such_camera(rig: Any, camera: str) -> None:
    """`BadInput` when the rig profile has no camera named `camera`."""
    if camera not in rig.profile.cameras:
        raise BadInput(f"the rig profile has no camera {camera!r} (it has: {', '.join(rig.profile.cameras) or 'none'})")


def grab_frame(rig: Any, camera: str) -> np.ndarray:
    """An (H, W, 3) uint8 RGB still of `camera`; `BadInput` when the rig has no such camera or
    it delivers nothing."""
    no_such_camera(rig, camera)
    from lerobot.cameras import make_cameras_from_configs

    cam = make_cameras_from_configs({camera: rig.config.cameras[camera]})[camera]
    try:
        cam.connect()
        for _ in range(WARMUP_FRAMES):
            cam.async_read(timeout_ms=READ_TIMEOUT_MS)
        frame = cam.async_read(timeout_ms=READ_TIMEOUT_MS)
    except Exception as exc:  # noqa: BLE001 - any device failure is the same one line
        from orchestrator.rigs.device_fault import FROZEN_CHECK, frozen_camera, one_line

        frozen = frozen_camera(exc)
        raise BadInput(f"camera {camera}: {frozen}; check {FROZEN_CHECK}" if frozen is not None
                       else f"camera {camera}: no frame ({one_line(exc)})") from None
    finally:
        try:
            cam.disconnect()
        except Exception:  # noqa: BLE001
            pass
    return np.asarray(frame)


def camera_intrinsics(rig: Any, camera: str, image: Any) -> Intrinsics | None:
    """The intrinsics of `camera` for an image of its size where the rig knows the camera's field
    of view (the simulator's and the twin's front camera, or a profile `pose`), else None: the
    table is then located with the focal length recovered from the template
    (`vision.table.locate_table`)."""
    pose = (rig.camera_poses() or {}).get(camera)
    if not pose or "fovy_deg" not in pose:     # none, or a wrist camera's geometry
        return None
    height, width = image.shape[:2]
    return Intrinsics.from_fovy(float(pose["fovy_deg"]), width, height, "the rig's camera pose (fovy)")
