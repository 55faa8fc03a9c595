"""`orchestrator camera calibrate-wrist --rig RIG [--views N] [--intrinsics-from FILE]`: measure
the wrist camera's mount on the gripper and its intrinsics from the printed sheet.

The arm never moves by itself. On a real arm, after the operator's go-ahead (Enter: hold the arm
first; starting the command is not one), torque goes off on every joint and stays off; the
operator holds the gripper over the sheet, the wrist camera towards its fiducials, in N different
poses (tilted every way, not only turned about the wrist's roll), Enter at each: once the joints
have stood still for `STILL_S` (every arm joint within `STILL_DEG`), the joints and one wrist
frame are taken, and the joints must stay still for another `STILL_S` (else the view is taken
again). At the end the operator lays the arm down at rest; torque stays off. On the simulated rig
the scripted hand poses the arm (`sim/calibration_poses.py`), no prompt.

The geometry is then solved (`vision.wrist_calibration`) and written, atomically, to the file the
profile names (`cameras.<camera>.geometry`, relative to the profile), which every later command
reads with the profile (the rater's wrist sense on a real arm: docs/judging.md). Printed: the
views used, the reprojection error, the mount and the focal length. Exit 0 when written, 2 on bad
input: a profile without the camera or without `geometry: FILE`, too few or degenerate views (one
line saying what to do), an arm that cannot be guided by hand.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

STILL_S = 0.5       # the joints stand still this long before and after a view is taken
STILL_DEG = 0.5     # ... every arm joint within this range (degrees) over that time
STILL_TIMEOUT_S = 20.0
READ_PERIOD_S = 0.05


def add_arguments(actions) -> None:
    calibrate = actions.add_parser("calibrate-wrist", help="measure the wrist camera's mount and intrinsics "
                                   "from the sheet (torque off, the arm guided by hand)",
                                   description=__doc__.split("\n\n", 1)[1].replace("%", "%%"))
    calibrate.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors")
    calibrate.add_argument("--rig", required=True, metavar="RIG", help="rig profile (hardware/*.yaml)")
    calibrate.add_argument("--camera", default="wrist", help="the camera on the gripper (default wrist)")
    calibrate.add_argument("--views", type=int, default=12, metavar="N", help="poses to take (default 12; at least 6)")
    calibrate.add_argument("--intrinsics-from", metavar="FILE", type=Path, default=None,
                           help="a geometry file whose intrinsics are kept (only the mount is measured)")
    calibrate.add_argument("--seed", type=int, default=0, help="the simulated rig's scripted poses")


def run(args: argparse.Namespace) -> int:
    from orchestrator.core.errors import BadInput
    from orchestrator.rigs.factory import make_rig
    from orchestrator.rigs.profile import geometry_file, load_rig
    from orchestrator.vision.wrist_calibration import MIN_VIEWS, CalibrationRefused, calibrate_wrist
    from orchestrator.vision.wrist_geometry import load_geometry, write_geometry

    loaded = load_rig(args.rig, missing_geometry_ok=True)
    camera = loaded.profile.cameras.get(args.camera)
    if camera is None:
        raise BadInput(f"{args.rig}: no camera {args.camera!r} (cameras: {', '.join(loaded.profile.cameras) or 'none'})")
    target = geometry_file(loaded.path, camera)
    if target is None:
        raise BadInput(f"{args.rig}: cameras.{args.camera} names no geometry file to write; add "
                       f"`geometry: {args.camera}_geometry.yaml` to it")
    if args.views < MIN_VIEWS:
        raise BadInput(f"--views {args.views}: at least {MIN_VIEWS} are needed")
    given = load_geometry(args.intrinsics_from) if args.intrinsics_from else None
    rig = make_rig(loaded)
    rig.connect()
    try:
        if not (rig.posed_by_a_scripted_hand or rig.hand_guidable):   # known once connected (its bus)
            raise BadInput(f"{args.rig}: this rig's arm cannot be guided by hand (its torque cannot be released)")
        views = _scripted_views(rig, args) if rig.posed_by_a_scripted_hand else _guided_views(rig, args)
    finally:
        rig.disconnect()
    try:
        found = calibrate_wrist(views, given)
    except CalibrationRefused as exc:
        raise BadInput(f"camera {args.camera}: {exc}") from None
    write_geometry(target, found.geometry, found.measured())
    g = found.geometry
    print(f"camera {args.camera}: {found.views_used} of {len(views)} views used, reprojection error "
          f"{found.reprojection_px:.2f} px; mount at ({', '.join(f'{1000 * v:.1f}' for v in g.position)}) mm in the "
          f"gripper, f = {g.matrix[0, 0]:.1f}, {g.matrix[1, 1]:.1f} px ({g.source})")
    print(f"written: {target}")
    return 0


def _scripted_views(rig, args: argparse.Namespace) -> list:
    """The simulated rig: the scripted hand at `calibration_poses`, the cube off the sheet."""
    from orchestrator.design.protocol import Cube
    from orchestrator.rigs.placement import OFF_SHEET
    from orchestrator.sim.calibration_poses import calibration_poses

    rig.prepare_layout(OFF_SHEET, Cube(), 0)
    views = []
    for joints in calibration_poses(args.views, args.seed):
        rig.pose_by_hand(joints)
        views.append(_still_view(rig, args.camera, print))
    return views


def _guided_views(rig, args: argparse.Namespace) -> list:
    """A real arm: torque off on the operator's go-ahead, one view per Enter (module docstring)."""
    ask = _asker()
    ask("hold the arm (torque goes off on every joint and stays off), then Enter")
    problems = rig.release_torque()
    if problems:
        print(f"still torqued: {'; '.join(problems)}: the arm may resist; Ctrl-C to stop")
    views = []
    try:
        for k in range(args.views):
            ask(f"view {k + 1} of {args.views}: hold the gripper over the sheet, the wrist camera towards its "
                "fiducials, tilted another way than before; keep it still, then Enter")
            views.append(_still_view(rig, args.camera, print))
        ask("lay the arm down at rest (torque stays off), then Enter")
    except (KeyboardInterrupt, EOFError):
        print("stopped: torque is off, support the arm")
        raise
    return views


def _asker() -> Callable[[str], None]:
    """The operator's prompt: the line, then Enter read from the terminal."""
    def ask(text: str) -> None:
        print(text, flush=True)
        input()
    return ask


def _joints(rig) -> np.ndarray:
    from orchestrator.design.joints import STATE_KEYS

    observation = rig.observe(with_images=False)
    return np.array([float(observation[k]) for k in STATE_KEYS[:5]])


def _steady(rig, deadline: float) -> np.ndarray:
    """The mean arm joints over `STILL_S` of readings all within `STILL_DEG`, polled until
    `deadline` (monotonic); `BadInput` when the arm never stands still by then."""
    from orchestrator.core.errors import BadInput

    start, readings = None, []
    while time.monotonic() < deadline:
        now = time.monotonic()
        readings.append(_joints(rig))
        if np.ptp(np.stack(readings), axis=0).max() > STILL_DEG:      # it moved: a new still run
            readings, start = readings[-1:], now
        start = now if start is None else start
        if now - start >= STILL_S or not _moves_by_itself(rig):
            return np.stack(readings).mean(axis=0)
        time.sleep(READ_PERIOD_S)
    raise BadInput(f"the arm did not stand still for {STILL_S} s (every joint within {STILL_DEG} degrees) "
                   f"in {STILL_TIMEOUT_S:.0f} s")


def _moves_by_itself(rig) -> bool:
    """A simulated arm posed by the scripted hand stands exactly still: one reading is enough."""
    return not rig.posed_by_a_scripted_hand


def _still_view(rig, camera: str, say: Callable[[str], None]):
    """One view: steady joints, a frame, still steady after it (module docstring)."""
    from orchestrator.vision.table import find_fiducials
    from orchestrator.vision.wrist_calibration import View

    for _ in range(3):
        before = _steady(rig, time.monotonic() + STILL_TIMEOUT_S)
        image = np.asarray(rig.camera_still(camera))
        after = _steady(rig, time.monotonic() + STILL_TIMEOUT_S)
        if np.abs(after - before).max() <= STILL_DEG:
            say(f"  {len(find_fiducials(image))} fiducials seen")
            return View((before + after) / 2.0, image)
        say("  the arm moved while the frame was taken: keep it still")
    from orchestrator.core.errors import BadInput

    raise BadInput("the arm moved during three tries to take a view")
