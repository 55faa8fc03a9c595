"""`orchestrator camera check` from fresh processes on files another process wrote: the
simulated rig and the twin (LeRobot's camera classes on the twin's frames), the placement error
of a rig profile, the `--json` contract, the exit codes (0 pass, 1 off the mark, 2 bad input)."""

from __future__ import annotations

import json
import re

import pytest

from support.cli import run_module
from support.repo import REPO

GRID20 = REPO / "layouts" / "grid20.yaml"
SIM = REPO / "hardware" / "sim.yaml"
TWIN = REPO / "hardware" / "so101_twin.yaml"
CONTRACT = {"camera", "fiducials", "reprojection_px", "mark", "cube_found", "dx_mm", "dy_mm", "dyaw_deg",
            "passes", "tolerance_mm", "tolerance_deg"}


def _profile(tmp_path, base, placement: str):
    path = tmp_path / f"rig_{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(base.read_text() + f"placement: {placement}\n")
    return path


def test_the_reference_then_a_placed_cube_on_the_simulator(tmp_path):
    reference = tmp_path / "ref"
    stored = run_module("camera", "check", "--rig", SIM, "--layout", GRID20, "--reference", reference)
    assert stored.code == 0, stored.err
    assert stored.out.startswith("camera front: ") and " fiducials found (ids " in stored.out
    assert "intrinsics from the rig's camera pose (fovy)" in stored.out
    assert (reference / "reference.json").is_file() and (reference / "front.png").is_file()
    on = run_module("camera", "check", "--rig", SIM, "--layout", GRID20, "--mark", "M07", "--json",
                    "--reference", reference)
    assert on.code == 0, on.err
    data = json.loads(on.out)
    assert CONTRACT <= set(data), set(data) ^ CONTRACT
    assert data["passes"] is True and data["cube_found"] is True and data["mark"] == "M07"
    assert (data["tolerance_mm"], data["tolerance_deg"]) == (5.0, 10.0)
    assert abs(data["dx_mm"]) < 1.5 and abs(data["dy_mm"]) < 1.5 and -45 < data["dyaw_deg"] <= 45


def test_a_placement_10_mm_off_exits_1_with_the_line_and_a_protocol_sets_the_tolerance(tmp_path):
    off = _profile(tmp_path, SIM, "{offset_mm: [0, -10]}")
    refused = run_module("camera", "check", "--rig", off, "--layout", GRID20, "--mark", "M10",
                         "--reference", tmp_path / "none")
    assert refused.code == 1, refused.err
    lines = refused.out.splitlines()
    assert "the camera's movement and other objects are not checked" in lines[1]
    assert re.match(r"cube (9|10|11) mm right( and [12] mm (forward|back))? of M10", lines[-3]), lines
    assert lines[-1] == "does not pass"
    # pictures first: the still it measured is written, the mark drawn in green, the cube in red
    still = tmp_path / "none" / "failed-check-front.png"
    assert lines[-2] == f"the still it measured (the mark in green, the cube as measured in red): {still}"
    import cv2

    image = cv2.imread(str(still))   # BGR
    green = (image[:, :, 1] > 180) & (image[:, :, 0] < 60) & (image[:, :, 2] < 60)
    red = (image[:, :, 2] > 200) & (image[:, :, 1] < 40) & (image[:, :, 0] < 40)
    assert image.shape[:2] == (240, 320) and green.sum() > 10 and red.sum() > 10
    loose = tmp_path / "loose.yaml"
    loose.write_text((REPO / "protocols" / "sim_demo.yaml").read_text().replace(
        "../layouts/grid20.yaml", str(GRID20)) + "start_check: {tolerance_mm: 15, tolerance_deg: 10, mode: enforce}\n")
    passed = run_module("camera", "check", "--rig", off, "--layout", GRID20, "--mark", "M10", "--json",
                        "--protocol", loose, "--reference", tmp_path / "none")
    assert passed.code == 0, passed.err
    assert json.loads(passed.out)["tolerance_mm"] == 15.0 and "still" not in json.loads(passed.out)


@pytest.mark.parametrize("argv, message", [
    (("--mark", "M99"), "no mark 'M99'"),
    (("--camera", "top"), "the rig profile has no camera 'top'"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, argv, message):
    done = run_module("camera", "check", "--rig", SIM, "--layout", GRID20, *argv, "--reference", tmp_path / "r")
    assert done.code == 2 and message in done.err and len(done.err.strip().splitlines()) == 1, done.err
    assert "Traceback" not in done.err


def test_a_bad_placement_section_is_located(tmp_path):
    bad = _profile(tmp_path, SIM, "{offset_mm: [0, -10], sigma: 3}")
    done = run_module("camera", "check", "--rig", bad, "--layout", GRID20)
    assert done.code == 2 and "placement" in done.err and "sigma" in done.err, done.err


@pytest.mark.twin
def test_on_the_twin_a_cube_10_mm_off_is_refused_and_one_on_its_mark_passes(tmp_path, cli):
    """In this process (the sim's checks above are the fresh-process path of `camera check`):
    its three checks without three more interpreters importing LeRobot's cameras, on one twin
    process that each borrows (support/shared_twin.py; the placement error is the orchestrator's hand)."""
    from orchestrator.rigs.profile import load_rig
    from orchestrator.rigs.twin.client import start_twin
    from support.shared_twin import lend

    with start_twin(load_rig(TWIN)) as twin, lend(twin) as loans:
        _three_checks_on_the_twin(tmp_path, cli)
    assert len(loans) == 3   # each check borrowed it


def _three_checks_on_the_twin(tmp_path, cli) -> None:
    reference = tmp_path / "ref"
    stored = cli("camera", "check", "--rig", TWIN, "--twin", "--layout", GRID20, "--reference", reference)
    assert stored.code == 0, stored.err
    on = cli("camera", "check", "--rig", TWIN, "--twin", "--layout", GRID20, "--mark", "M07", "--json",
             "--reference", reference)
    assert on.code == 0 and json.loads(on.out)["passes"] is True, (on.out, on.err)
    off = _profile(tmp_path, TWIN, "{offset_mm: [10, 0]}")
    refused = cli("camera", "check", "--rig", off, "--twin", "--layout", GRID20, "--mark", "M07", "--json",
                  "--reference", reference)
    data = json.loads(refused.out)
    assert refused.code == 1 and data["passes"] is False and 8.5 < data["dx_mm"] < 11.5, (refused.out, refused.err)
    assert data["problem"].startswith("cube ") and "forward of M07" in data["problem"]
