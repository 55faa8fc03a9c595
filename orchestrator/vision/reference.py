"""The camera's reference for a session: the empty table as the camera saw it, and where the
camera was (`camera check` writes it; the start-state check reads it before every trial).

A reference is a folder with `reference.json` (`CameraReference`, versioned: `VERSION`; a reader
refuses another version) and `<camera>.png`, the empty table (the cube off the sheet, the arm at
rest). Written atomically (`core.durable.write_atomic`): the PNG first, then the JSON that names
it, so a reader never sees a JSON without its image.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from orchestrator.core.durable import write_atomic
from orchestrator.core.errors import BadInput
from orchestrator.core.versioned import read_versioned_json
from orchestrator.vision.camera_model import CameraPose, Intrinsics
from orchestrator.vision.table import TableView

VERSION = 1
FILE = "reference.json"


@dataclass(frozen=True)
class CameraReference:
    """The session's view of the empty table by `camera`."""

    camera: str
    view: TableView
    image: np.ndarray
    created_at: float


def write_reference(folder: Path, camera: str, view: TableView, image: np.ndarray) -> Path:
    """Write the reference of `camera` into `folder` (created); returns the JSON's path."""
    folder.mkdir(parents=True, exist_ok=True)
    ok, png = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    if not ok:
        raise BadInput(f"{folder}: the reference image could not be encoded")
    write_atomic(folder / f"{camera}.png", png.tobytes())
    data = {"version": VERSION, "camera": camera, "image": f"{camera}.png", "created_at": time.time(),
            "view": {**view.to_dict(), "corners_px": {str(k): v for k, v in view.corners_px.items()}}}
    target = folder / FILE
    write_atomic(target, json.dumps(data, indent=2) + "\n")
    return target


def read_reference(folder: Path) -> CameraReference:
    """The reference in `folder`; `BadInput` naming the file when it is missing, damaged or of
    another version."""
    path = folder / FILE
    data = read_versioned_json(path, "camera reference", "version", VERSION,
                               "no camera reference; run `orchestrator camera check` first",
                               "run `orchestrator camera check` again")
    try:
        view_data = data["view"]
        intrinsics = Intrinsics(**view_data["intrinsics"])
        view = TableView(tuple(view_data["fiducials"]), float(view_data["reprojection_px"]), intrinsics,
                         CameraPose.from_dict(view_data["pose"]),
                         {int(k): tuple(map(tuple, v)) for k, v in view_data["corners_px"].items()})
        image = cv2.imread(str(folder / data["image"]), cv2.IMREAD_COLOR)
        if image is None:
            raise ValueError(f"image {data['image']} missing or unreadable")
        return CameraReference(str(data["camera"]), view, cv2.cvtColor(image, cv2.COLOR_BGR2RGB),
                               float(data["created_at"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInput(f"{path}: damaged camera reference ({exc})") from None
