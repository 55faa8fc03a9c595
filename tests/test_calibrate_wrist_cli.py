"""`orchestrator camera calibrate-wrist` from fresh processes: the simulated rig's scripted hand
measures the model's wrist camera and writes the file the profile names, which the profile then
reads; every refusal is one line and exit 2."""

from __future__ import annotations

import math

import cv2
import numpy as np

from support.cli import run_module
from support.repo import REPO

SIM = REPO / "hardware" / "sim.yaml"
GRID20 = REPO / "layouts" / "grid20.yaml"


def sim_profile(tmp_path, geometry: str | None = "wrist_geometry.yaml"):
    text = SIM.read_text()
    wrist = "  wrist: {type: sim, width: 320, height: 240, fps: 15}"
    assert wrist in text
    if geometry is not None:
        text = text.replace(wrist, wrist[:-1] + f", geometry: {geometry}}}")
    path = tmp_path / f"sim_wrist_{len(list(tmp_path.glob('sim_wrist_*')))}.yaml"
    path.write_text(text)
    return path


def test_the_scripted_hand_measures_the_models_mount_and_the_profile_reads_it(tmp_path):
    from orchestrator.rigs.profile import load_rig, profile_camera_poses
    from orchestrator.vision.wrist_geometry import model_geometry

    rig = sim_profile(tmp_path)
    before = run_module("camera", "check", "--rig", rig, "--layout", GRID20, "--reference", tmp_path / "ref")
    assert before.code == 2 and len(before.err_lines) == 1, before.err
    assert "wrist_geometry.yaml does not exist (measure it: orchestrator camera calibrate-wrist" in before.err
    done = run_module("camera", "calibrate-wrist", "--rig", rig)
    assert done.code == 0, done.err
    assert "12 of 12 views used" in done.out and f"written: {tmp_path / 'wrist_geometry.yaml'}" in done.out
    geometry = load_rig(rig).profile.cameras["wrist"].geometry
    assert geometry is not None and not isinstance(geometry, str)
    truth = model_geometry(320, 240)
    assert np.linalg.norm(np.asarray(geometry.mount.position_m) - truth.position) < 0.0015
    turn = cv2.Rodrigues(np.radians(np.asarray(geometry.mount.rotation_deg, float)))[0] @ truth.rotation.T
    assert math.degrees(float(np.linalg.norm(cv2.Rodrigues(turn)[0]))) < 1.0
    assert abs(np.mean(geometry.intrinsics.f_px) / truth.f_px - 1.0) < 0.01
    assert profile_camera_poses(load_rig(rig).profile)["wrist"]["geometry"]["mount"] == geometry.mount.model_dump(mode="json")


def test_every_refusal_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nmount: {position_m: [0, 0.05, -0.04], rotation_deg: [147, 0, 0]}\n"
                   "intrinsics: {width: 320, height: 240, f_px: [266, 266], principal_px: [159.5, 119.5], "
                   "distortion: [0, 0, 0, nan, 0]}\n")
    cases = [
        (("--rig", sim_profile(tmp_path, None)), "names no geometry file to write"),
        (("--rig", sim_profile(tmp_path), "--views", "3"), "--views 3: at least 6"),
        (("--rig", sim_profile(tmp_path), "--camera", "elbow"), "no camera 'elbow'"),
        (("--rig", sim_profile(tmp_path), "--intrinsics-from", bad), "bad.yaml:3"),
    ]
    tiny = sim_profile(tmp_path)       # a wrist camera too coarse to find a fiducial: no view counts
    tiny.write_text(tiny.read_text().replace("wrist: {type: sim, width: 320, height: 240", "wrist: {type: sim, width: 64, height: 48"))
    cases.append((("--rig", tiny, "--views", "6"), "0 of 6 views show at least 2 of the sheet's fiducials"))
    for argv, words in cases:
        result = run_module("camera", "calibrate-wrist", *argv)
        assert result.code == 2, (argv, result.out, result.err)
        assert len(result.err_lines) == 1 and words in result.err, (argv, result.err)
        assert "Traceback" not in result.err
    assert not (tmp_path / "wrist_geometry.yaml").exists()
    assert len(cases) == 5
