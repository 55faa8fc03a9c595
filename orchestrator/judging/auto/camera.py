"""The `auto` rater's camera sense: an episode's recorded front video measured by
`vision.lift.measure_lift`, or why it could not be (`front_lift`).

The camera is located in the episode's own first frame from the template's fiducials
(`vision.table.locate_table`), with the field of view the rig recorded beside the video
(`cameras.json`: the simulator's, the twin's, or a profile's `pose`) or, without it, the focal
length recovered from the template. The video is decoded with PyAV; its frame times are the time
series' `frame_t.front` (the recorder's): a video without them is not measured.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from orchestrator.vision.camera_model import Intrinsics, IntrinsicsUnknown
from orchestrator.vision.lift import Joints, measure_lift
from orchestrator.vision.lift_track import LiftTrack
from orchestrator.vision.table import TableNotFound, locate_table

CAMERA = "front"


def recorded_front(series: Path) -> tuple[Path, Path]:
    """(front video, cameras.json) of the episode whose time series is `series`, by the
    recorder's layout (`run/recording.py`: `episodes/<id>/timeseries.npz`, `videos/<id>/`)."""
    series = Path(series)
    folder = series.parent.parent.parent / "videos" / series.parent.name
    return folder / f"{CAMERA}.mp4", folder / "cameras.json"


def decoded_frames(video: Path, needed: np.ndarray) -> list[np.ndarray | None]:
    """Every frame of `video`, converted to RGB only where `needed` and the first (None elsewhere:
    the measurement never reads a frame the jaws are not closed on, and converting is most of the
    decoding's cost)."""
    import av  # PyAV

    with av.open(str(video)) as container:
        frames = [frame.to_ndarray(format="rgb24") if k == 0 or (k < len(needed) and needed[k]) else None
                  for k, frame in enumerate(container.decode(video=0))]
    return frames


def _fovy(poses: Path | None) -> float | None:
    if poses is None or not poses.is_file():
        return None
    try:
        pose = json.loads(poses.read_text()).get(CAMERA) or {}
        return float(pose["fovy_deg"]) if "fovy_deg" in pose else None
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def front_lift(video: Path | None, poses: Path | None, series: dict[str, np.ndarray],
               cube_size_m: float) -> tuple[LiftTrack | None, str]:
    """(the camera's lift track, "") or (None, why there is none: no video, unreadable, the
    template not seen, the cube too small in the image, never measured)."""
    if video is None or not Path(video).is_file():
        return None, "no front video"
    times = np.asarray(series.get(f"frame_t.{CAMERA}", ()), float)
    joints = Joints(series["t"], series["state"], series.get("action"))
    needed = joints.at(times, cube_size_m)[2] if len(times) and len(joints.t) else np.zeros(len(times), bool)
    try:
        frames = decoded_frames(Path(video), needed)
    except Exception as exc:  # noqa: BLE001 - any decoding failure is the same "unreadable"
        return None, f"the front video cannot be decoded ({type(exc).__name__})"
    if not frames or frames[0] is None:
        return None, "the front video has no frames"
    height, width = frames[0].shape[:2]
    fovy = _fovy(poses)
    intrinsics = Intrinsics.from_fovy(fovy, width, height, "the rig's camera pose (fovy)") if fovy else None
    try:
        view = locate_table(frames[0], intrinsics)
    except (TableNotFound, IntrinsicsUnknown) as exc:
        return None, f"the front camera cannot be located in the first frame ({exc})"
    if len(times) != len(frames):
        return None, f"the time series has {len(times)} front frame times for the video's {len(frames)} frames"
    track = measure_lift(frames, times, view, cube_size_m, joints)
    if not track.visible.any():
        return None, track.reasons[0] if track.reasons else "no frame measured"
    return track, ""
