"""The wrist camera's geometry measured from the sheet (`vision.wrist_calibration`): frames MuJoCo
renders from the simulated wrist camera at arm poses over the sheet (the renderer and the model's
mount are the oracle), the geometry file and its validation, and the refusals."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from orchestrator.core.errors import BadInput
from orchestrator.sim import fk
from orchestrator.vision.wrist_calibration import CalibrationRefused, View, axis_spread_deg, calibrate_wrist
from orchestrator.vision.wrist_geometry import load_geometry, model_geometry, parse_geometry, write_geometry

WIDTH, HEIGHT = 320, 240
# The model's mount, written out here (not read from `sim.fk`): the Menagerie wrist_cam's pos and
# euler="-0.57 0 0" in the gripper body, looking along its -z with y up.
MOUNT_POS = np.array([0.0, 0.055, -0.045])


def model_turn() -> np.ndarray:
    c, s = math.cos(-0.57), math.sin(-0.57)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]]) @ np.diag([1.0, -1.0, -1.0])


def render_views(poses_deg: np.ndarray, width: int = WIDTH, height: int = HEIGHT) -> list[View]:
    from orchestrator.sim.calibration_poses import render_wrist_views

    return [View(np.asarray(q, float), image)
            for q, image in zip(poses_deg, render_wrist_views(poses_deg, width, height), strict=True)]


@pytest.fixture(scope="module")
def views() -> list[View]:
    from orchestrator.sim.calibration_poses import calibration_poses

    poses = calibration_poses(12, seed=0)
    assert len(poses) == 12
    return render_views(poses)


def turned_deg(a: np.ndarray, b: np.ndarray) -> float:
    return math.degrees(float(np.linalg.norm(cv2.Rodrigues(a @ b.T)[0])))


def test_the_models_mount_is_recovered_from_rendered_views(views):
    """With the intrinsics known (the model's), the mount within 0.5 mm and 0.2 degrees (measured on
    seeds 0-4 of 12 views by bench/wrist_calibration.py: at most 0.32 mm and 0.07 degrees); with the
    intrinsics calibrated from the same 12 views, within 1.5 mm and 1 degree and the focal length
    within 1 % (bench: at most 0.93 mm, 0.44 degrees, 0.3 %; this seed 0.35 mm, 0.44, 0.07 %)."""
    assert fk.WRIST_CAMERA_POS == pytest.approx(tuple(MOUNT_POS))
    f_true = (HEIGHT / 2.0) / math.tan(math.radians(48.5) / 2.0)
    known = calibrate_wrist(views, model_geometry(WIDTH, HEIGHT))
    assert known.views_used == 12 and known.intrinsics_rms_px is None
    assert np.linalg.norm(known.geometry.position - MOUNT_POS) < 0.0005
    assert turned_deg(known.geometry.rotation, model_turn()) < 0.2
    assert known.reprojection_px < 1.0
    free = calibrate_wrist(views)
    assert np.linalg.norm(free.geometry.position - MOUNT_POS) < 0.0015
    assert turned_deg(free.geometry.rotation, model_turn()) < 1.0
    assert free.geometry.f_px == pytest.approx(f_true, rel=0.01)
    assert free.intrinsics_rms_px is not None and free.intrinsics_rms_px < 1.0


def test_a_wrong_mount_does_not_close_the_chain(views):
    """Positive control for the reprojection error: the views' joints read with the roll off by
    5 degrees (a mount that is not the one the frames were taken with) leave a larger error."""
    good = calibrate_wrist(views, model_geometry(WIDTH, HEIGHT)).reprojection_px
    rng = np.random.default_rng(3)
    bent = [View(v.joints_deg + np.r_[0, 0, 0, 0, rng.choice([-5.0, 5.0])], v.image) for v in views]
    assert calibrate_wrist(bent, model_geometry(WIDTH, HEIGHT)).reprojection_px > 3 * good


def test_too_few_views_and_views_about_one_axis_are_refused(views):
    with pytest.raises(CalibrationRefused, match="3 of 3 views"):
        calibrate_wrist(views[:3])
    blank = np.full_like(views[0].image, 255)
    with pytest.raises(CalibrationRefused, match="1 of 7 views show"):
        calibrate_wrist([*[View(v.joints_deg, blank) for v in views[:6]], views[0]])
    # the same board seen while only the wrist's roll turns: every relative rotation about one axis
    rolled = [View(views[0].joints_deg + np.r_[0, 0, 0, 0, 12.0 * k], views[0].image) for k in range(8)]
    turns, spread = axis_spread_deg(fk.grasp_pose(np.stack([v.joints_deg for v in rolled]))[1])
    assert turns == 28 and spread < 1.0
    with pytest.raises(CalibrationRefused, match="degenerate"):
        calibrate_wrist(rolled)


def test_the_geometry_file_round_trips_and_bad_values_are_one_line(tmp_path):
    geometry = model_geometry(640, 480)
    path = write_geometry(tmp_path / "wrist.yaml", geometry, {"views": 12})
    back = load_geometry(path)
    assert back.position == pytest.approx(geometry.position, abs=1e-6)
    assert back.rotation == pytest.approx(geometry.rotation, abs=1e-5)
    assert back.matrix == pytest.approx(geometry.matrix, abs=1e-3)
    half = back.scaled_to(320, 240)
    assert half.matrix == pytest.approx(model_geometry(320, 240).matrix, abs=1e-3)
    with pytest.raises(ValueError, match="aspect"):
        back.scaled_to(320, 320)
    spec = geometry.to_spec()
    for field, value, words in ((("intrinsics", "f_px"), [0.0, 500.0], "intrinsics.f_px.0"),
                                (("mount", "position_m"), [0.0, 0.5, 0.0], "within 0.25 m"),
                                (("intrinsics", "distortion"), [0.1, "x", 0, 0, 0], "intrinsics.distortion.1"),
                                (("mount", "rotation"), [0, 0, 0], "mount.rotation")):
        bad = {**spec, field[0]: {**spec[field[0]], field[1]: value}}
        with pytest.raises(BadInput) as caught:
            parse_geometry(bad, "rig.yaml")
        assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_bad_geometry_file_is_one_located_line(tmp_path):
    path = write_geometry(tmp_path / "wrist.yaml", model_geometry(640, 480), {})
    path.write_text(path.read_text().replace("f_px: [", "f_px: [-5, "))
    with pytest.raises(BadInput) as caught:
        load_geometry(path)
    assert str(path) in str(caught.value) and "f_px" in str(caught.value) and "\n" not in str(caught.value)
