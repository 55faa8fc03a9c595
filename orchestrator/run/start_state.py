"""The start-state check in a campaign: before each trial the fixed camera measures the cube on
the trial's mark (the protocol's pre-registered `start_check`; design/start_check_spec.py).

`StartGate.begin_session` takes the session's reference: the camera's pose over the empty table
(the simulator and the twin lift the cube off the sheet themselves; on a real arm the reference
`orchestrator camera check` stored in the campaign folder, `CAMPAIGN/camera-reference/`, else the
first trial's view, which then holds the camera's pose only). `StartGate.check` runs before the
policy gets the arm, after the cube was placed:
- every measurement is recorded (`start_check` events: mark, offsets, passes, tries), and an
  annotated still (`start_checks/<slot>-<try>.png`: where the cube should be in green, where it
  is in red) is written for the operator;
- `advise`: a failed check is shown, and the trial starts;
- `enforce`: a failed check holds the trial: the operator corrects the cube and the check runs
  again (on the simulator and the twin the simulated hand places it again), or overrides it
  (`start_override` event); without an operator (an unattended session) the simulated hand
  places it again, and `AUTO_START_TRIES` failures in a row end the session (exit 1, resumable)
  with the check's line;
- a camera that moved since the reference ends the session (`CameraMoved`): every later
  measurement would be wrong.
The operator's corrections and overrides are the interventions the report counts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from orchestrator.core.errors import BadInput, RuntimeFailure
from orchestrator.design.raster import sheet_corners
from orchestrator.rigs.frames import camera_intrinsics
from orchestrator.rigs.placement import OFF_SHEET
from orchestrator.run.operator_protocol import Operator, StopRequested, TrialCue
from orchestrator.vision.camera_model import IntrinsicsUnknown
from orchestrator.vision.reference import read_reference, write_reference
from orchestrator.vision.start_check import StartCheck, camera_moved, check_start
from orchestrator.vision.table import TableNotFound, TableView, locate_table

REFERENCE_DIR = "camera-reference"
STILLS_DIR = "start_checks"


class CameraMoved(RuntimeFailure):
    """The fixed camera moved since the session's reference: the session stops (exit 1,
    resumable once the camera is back or checked again)."""


def annotate(image: np.ndarray, view: TableView | None, mark, size_m: float, result: StartCheck) -> np.ndarray:
    """The still with where the cube's top face should be (green, the mark) and where it is (red,
    measured) drawn over it."""
    out = cv2.cvtColor(image, cv2.COLOR_RGB2BGR).copy()
    if view is not None:
        def square(x: float, y: float, yaw: float) -> np.ndarray:
            c, s, h = np.cos(np.radians(yaw)), np.sin(np.radians(yaw)), size_m / 2
            corners = [(x + c * a - s * b, y + s * a + c * b, size_m) for a, b in ((h, h), (-h, h), (-h, -h), (h, -h))]
            return view.pose.project(np.array(corners), view.intrinsics).astype(np.int32)

        cv2.polylines(out, [square(mark.x, mark.y, mark.yaw_deg)], True, (0, 200, 0), 1, cv2.LINE_AA)
        if (offset := result.offset_mm) is not None:
            cv2.polylines(out, [square(mark.x + offset[0] / 1000, mark.y + offset[1] / 1000,
                                       mark.yaw_deg + (result.dyaw_deg or 0.0))], True, (0, 0, 255), 1, cv2.LINE_AA)
    return cv2.cvtColor(out, cv2.COLOR_BGR2RGB)


class StartGate:
    """The start-state check of one session (see the module docstring)."""

    def __init__(self, protocol, rig: Any, store, operator: Operator, say):
        self.spec = protocol.protocol.start_check
        self.layout = protocol.layout
        self.rig, self.store, self.operator, self.say = rig, store, operator, say
        self.on = self.spec.mode != "off"
        self.reference_view: TableView | None = None
        self.reference_image: np.ndarray | None = None

    # ------------------------------------------------------------ the session's reference
    def begin_session(self) -> None:
        if not self.on:
            return
        if self.spec.camera not in self.rig.profile.cameras:
            raise BadInput(f"protocol start_check: camera {self.spec.camera!r} is not in the rig profile "
                           f"(it has: {', '.join(self.rig.profile.cameras) or 'none'})")
        folder = Path(self.store.directory) / REFERENCE_DIR
        if self.rig.places_the_cube:
            self.rig.prepare_layout(OFF_SHEET, self.layout.cube, 0)
            image = np.asarray(self.rig.camera_still(self.spec.camera))
            view = self._locate(image)
            if view is None:
                raise BadInput(f"start_check: camera {self.spec.camera} cannot see the template's fiducials "
                               "over the empty table; check the camera with `orchestrator camera check`")
            write_reference(folder, self.spec.camera, view, image)
            self.reference_view, self.reference_image = view, image
        elif (folder / "reference.json").is_file():
            reference = read_reference(folder)
            self.reference_view, self.reference_image = reference.view, reference.image
        else:
            self.say(f"start check: no camera reference in {folder} (`orchestrator camera check --reference "
                     f"{folder}` over the empty table stores one); the first trial's view is the reference, "
                     "and other objects on the sheet are not looked for")
        self.store.log_event("start_check_session", f"start check {self.spec.mode}, camera {self.spec.camera}",
                             data={"mode": self.spec.mode, "reference": self.reference_view is not None})

    def _locate(self, image: np.ndarray) -> TableView | None:
        try:
            return locate_table(image, camera_intrinsics(self.rig, self.spec.camera, image))
        except (TableNotFound, IntrinsicsUnknown):
            return None

    # ------------------------------------------------------------ before each trial
    def check(self, trial, mark, cue: TrialCue) -> bool:
        """Measure the start of `trial`; return when it may start (True when the operator was
        asked on the way: a refusal retried or overridden), raise `StopRequested` or
        `CameraMoved` when the session ends here."""
        if not self.on:
            return False
        for attempt in range(1, 1000):
            result, view, image = self.measure(mark)
            self._record(trial, mark, result, attempt, view, image)
            if result.passes:
                return attempt > 1
            if self.spec.mode == "advise":
                self.operator.message(f"start check (advise): {result.line}")
                return attempt > 1
            self.operator.message(f"START CHECK FAILED at {mark.id}: {result.line}")
            decision = self.operator.start_refused(cue, result.line, self._still_path(trial, attempt))
            if decision == "override":
                self.store.log_event("start_override", f"trial started by the operator's override: {result.line}",
                                     slot=trial.slot, data={"mark": mark.id, "line": result.line})
                return True
            if decision == "unresolved":
                raise RuntimeFailure(f"start check failed {attempt} times at {mark.id}: {result.line}; nobody "
                                     "corrects the cube in an unattended run (the rig profile's placement sets "
                                     "the simulated hand's error): the campaign is resumable")
            if decision != "retry":
                raise StopRequested(f"start check failed at {mark.id} ({result.line}): session ended")
            self.store.log_event("start_correction", f"cube placed again on {mark.id}", slot=trial.slot,
                                 data={"mark": mark.id})
            self.rig.prepare_layout(mark, self.layout.cube, trial.seed)
        return True

    def look(self) -> tuple[np.ndarray, TableView | None]:
        """One still of the camera and the table in it (None: the fiducials not seen). A camera
        that moved since the session's reference raises `CameraMoved`."""
        image = np.asarray(self.rig.camera_still(self.spec.camera))
        view = self._locate(image)
        if view is None:
            return image, None
        if self.reference_view is None:
            self.reference_view = view
        elif moved := camera_moved(self.reference_view, view, self.spec.camera):
            self.store.log_event("camera_moved", moved)
            raise CameraMoved(moved)
        return image, view

    def measure(self, mark) -> tuple[StartCheck, TableView | None, np.ndarray]:
        """The cube against `mark` as the camera sees it now (not recorded)."""
        image, view = self.look()
        if view is None:
            return StartCheck.unmeasured(self.spec.camera, mark.id, self.spec.tolerance_mm, self.spec.tolerance_deg,
                                         f"camera {self.spec.camera} cannot see the template's fiducials (the sheet "
                                         "covered, moved, or the camera turned away)"), None, image
        result = check_start(image, view, mark, self.layout, camera=self.spec.camera,
                             tolerance_mm=self.spec.tolerance_mm, tolerance_deg=self.spec.tolerance_deg,
                             reference=self.reference_image, sheet=sheet_corners())
        return result, view, image

    def _still_path(self, trial, attempt: int) -> Path:
        return Path(self.store.directory) / STILLS_DIR / f"{trial.slot:04d}-{attempt}.png"

    def _record(self, trial, mark, result: StartCheck, attempt: int, view, image) -> None:
        path = self._still_path(trial, attempt)
        path.parent.mkdir(parents=True, exist_ok=True)
        still = annotate(image, view, mark, self.layout.cube.size_m, result)
        cv2.imwrite(str(path), cv2.cvtColor(still, cv2.COLOR_RGB2BGR))
        data = {**result.to_json(), "slot": trial.slot, "try": attempt, "mode": self.spec.mode}
        self.store.log_event("start_check", json.dumps({"mark": mark.id, "passes": result.passes}),
                             slot=trial.slot, data=data)
