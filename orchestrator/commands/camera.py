"""`orchestrator camera check --rig RIG --layout LAYOUT [--mark ID] [--json]`: the camera reads
the template, and measures the cube against a mark.

Finds the template's fiducials in one still of the camera (`--camera`, default front; the arm is
never connected), recovers the camera's pose and prints how many fiducials it found, the
reprojection error and where its intrinsics came from. Without `--mark` the still is the empty
table (take the cube off the sheet; the simulator and the twin lift it off themselves) and it is
stored as the session's reference (`--reference DIR`, default `camera-reference/`). With `--mark`
the cube is measured against that mark (on the simulator and the twin the simulated hand places
it first, with the profile's `placement` error) and checked against the tolerance (the
protocol's `start_check`, `--protocol`; else 5 mm and 10 degrees), the camera against the stored
reference (moved? something else on the sheet?). A check that fails writes the still it measured
into the reference folder (`failed-check-<camera>.png`, the mark and the measured cube drawn on it)
and prints its path. Exit 0 when the cube passes (or the reference was stored), 1 when it is off
the mark, not found or the camera moved, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from orchestrator.commands.twin_options import add_twin_arguments, twin_session

HELP = ("camera tools: `camera check` finds the template's fiducials and measures the cube on a mark; "
        "`camera calibrate-wrist` measures the wrist camera's mount and intrinsics")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="camera_action", required=True, metavar="ACTION",
                                    parser_class=type(parser))
    check = actions.add_parser("check", help="find the template's fiducials; measure the cube on a mark",
                               description=__doc__.split("\n\n", 1)[1].replace("%", "%%"))
    check.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors")
    check.add_argument("--rig", required=True, metavar="RIG", help="rig profile (hardware/*.yaml)")
    check.add_argument("--layout", required=True, metavar="LAYOUT", help="layout YAML (layouts/*.yaml)")
    check.add_argument("--mark", metavar="ID", help="measure the cube against this mark")
    check.add_argument("--protocol", metavar="PROTOCOL", help="take the camera and tolerances from its start_check")
    check.add_argument("--camera", default=None, help="which camera (default: the protocol's, else front)")
    check.add_argument("--reference", metavar="DIR", type=Path, default=Path("camera-reference"),
                       help="the session's reference folder (written without --mark, read with it)")
    check.add_argument("--json", action="store_true", help="print the measurement as one JSON object")
    add_twin_arguments(check, unattended=False)
    from orchestrator.commands import calibrate_wrist

    calibrate_wrist.add_arguments(actions)


def run(args: argparse.Namespace) -> int:
    if args.camera_action == "calibrate-wrist":
        from orchestrator.commands import calibrate_wrist

        return calibrate_wrist.run(args)
    from orchestrator.core.errors import BadInput
    from orchestrator.design.protocol import load_layout, load_protocol
    from orchestrator.rigs.factory import make_rig
    from orchestrator.rigs.profile import load_rig

    loaded = load_rig(args.rig)
    layout, _ = load_layout(Path(args.layout))
    spec = load_protocol(args.protocol).protocol.start_check if args.protocol else None
    camera = args.camera or (spec.camera if spec else "front")
    mark = None
    if args.mark is not None:
        mark = next((m for m in layout.marks if m.id == args.mark), None)
        if mark is None:
            raise BadInput(f"{args.layout}: no mark {args.mark!r} (marks: {', '.join(m.id for m in layout.marks)})")
    with twin_session(args, loaded) as swapped:
        rig = make_rig(swapped)
        if rig.places_the_cube:
            from orchestrator.rigs.placement import OFF_SHEET

            rig.prepare_layout(mark or OFF_SHEET, layout.cube, 0)
        result = _check(rig, camera, layout, mark, spec, args.reference)
    if args.json:
        print(json.dumps(result["json"]))
    else:
        for line in result["lines"]:
            print(line)
    return 0 if result["passes"] else 1


def _check(rig, camera: str, layout, mark, spec, reference_dir: Path) -> dict:
    from orchestrator.core.errors import BadInput
    from orchestrator.design.raster import sheet_corners
    from orchestrator.rigs.frames import camera_intrinsics
    from orchestrator.vision.camera_model import IntrinsicsUnknown
    from orchestrator.vision.reference import read_reference
    from orchestrator.vision.start_check import (
        DEFAULT_TOLERANCE_DEG,
        DEFAULT_TOLERANCE_MM,
        StartCheck,
        camera_moved,
        check_start,
    )
    from orchestrator.vision.table import TableNotFound, locate_table

    tolerance_mm = spec.tolerance_mm if spec else DEFAULT_TOLERANCE_MM
    tolerance_deg = spec.tolerance_deg if spec else DEFAULT_TOLERANCE_DEG
    image = rig.camera_still(camera)
    height, width = image.shape[:2]
    try:
        view = locate_table(image, camera_intrinsics(rig, camera, image))
    except (TableNotFound, IntrinsicsUnknown) as exc:
        unseen = StartCheck.unmeasured(camera, mark.id if mark else None, tolerance_mm, tolerance_deg,
                                       f"camera {camera}: {exc}")
        still = _failed_still(reference_dir, camera, image)
        out = {**unseen.to_json(), "mark": mark.id if mark else None, "still": str(still)}
        return {"json": out, "lines": [unseen.line, f"the still it measured: {still}"], "passes": False}
    lines = [f"camera {camera}: {len(view.fiducials)} fiducials found (ids {', '.join(map(str, view.fiducials))}), "
             f"reprojection error {view.reprojection_px:.2f} px, {width}x{height}, intrinsics from "
             f"{view.intrinsics.source} (f = {view.intrinsics.f_px:.0f} px)"]
    if mark is None:
        return _store_reference(image, view, layout, camera, reference_dir, lines)
    reference = None
    try:
        reference = read_reference(reference_dir)
    except BadInput:
        lines.append(f"no reference in {reference_dir}: the camera's movement and other objects are not checked")
    moved = camera_moved(reference.view, view, camera) if reference is not None else None
    result = check_start(image, view, mark, layout, camera=camera, tolerance_mm=tolerance_mm, tolerance_deg=tolerance_deg,
                         reference=reference.image if reference is not None and moved is None else None,
                         sheet=sheet_corners())
    out = result.to_json()
    if moved:
        out.update(passes=False, problem=moved)
    lines.append(moved or result.line)
    if not out["passes"]:
        from orchestrator.run.start_state import annotate

        still = _failed_still(reference_dir, camera, annotate(image, view, mark, layout.cube.size_m, result))
        out["still"] = str(still)
        lines.append(f"the still it measured (the mark in green, the cube as measured in red): {still}")
    lines.append("passes" if out["passes"] else "does not pass")
    return {"json": out, "lines": lines, "passes": bool(out["passes"])}


def _store_reference(image, view, layout, camera: str, reference_dir: Path, lines: list[str]) -> dict:
    """The still as the session's reference of the empty table, unless a cube is on the sheet or a
    fiducial is covered (`start_check.reference_problem`: then the still is written beside it)."""
    from orchestrator.design.raster import sheet_corners
    from orchestrator.vision.reference import write_reference
    from orchestrator.vision.start_check import reference_problem

    out = {"camera": camera, "fiducials": len(view.fiducials), "reprojection_px": round(view.reprojection_px, 3),
           "mark": None, "cube_found": None, "dx_mm": None, "dy_mm": None, "dyaw_deg": None, "passes": True,
           "tolerance_mm": None, "tolerance_deg": None}
    refused = reference_problem(image, view, layout, sheet_corners(), camera)
    if refused is not None:
        still = _failed_still(reference_dir, camera, image)
        return {"json": {**out, "passes": False, "problem": refused, "still": str(still)}, "passes": False,
                "lines": [*lines, f"reference not stored: {refused}", f"the still it measured: {still}", "does not pass"]}
    path = write_reference(reference_dir, camera, view, image)
    return {"json": {**out, "reference": str(path)}, "passes": True,
            "lines": [*lines, f"reference of the empty table stored: {path}"]}


def _failed_still(reference_dir: Path, camera: str, image) -> Path:
    """The still a failed check measured, written beside the session's reference (PNG, replaced by
    the next failed check of that camera), so the failure can be seen, not only read."""
    import cv2

    from orchestrator.core.durable import write_atomic

    reference_dir.mkdir(parents=True, exist_ok=True)
    path = reference_dir / f"failed-check-{camera}.png"
    ok, png = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    if ok:
        write_atomic(path, png.tobytes())
    return path
