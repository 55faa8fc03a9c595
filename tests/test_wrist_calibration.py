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


def test_the_raters_wrist_sense_uses_the_recorded_geometry_and_a_wrong_mount_fails(tmp_path):
    """The geometry a profile names goes with every episode (`profile_camera_poses` ->
    cameras.json -> `recorded_geometry`), and the wrist fit measures with it: a cube planted 4 mm
    deep in the jaws some 3 cm up, in a frame MuJoCo renders, is measured within 1 mm of the
    renderer's truth with the model's geometry read back from the file (-0.28 mm), and with the
    same frame barrel-distorted (k1 = -0.25, as a wide wrist lens) and that distortion in the file
    (-0.28 mm); positive controls: the mount 5 mm off along the gripper's axis (+4.7 mm), or the distortion
    left out of the file (-6.6 mm), put the bottom more than 2 mm off (past the rater's wrist band,
    2 mm under / 0.75 mm over)."""
    import json

    import mujoco

    from orchestrator.judging.auto.wrist import recorded_geometry
    from orchestrator.rigs.profile import load_rig, profile_camera_poses
    from orchestrator.sim.kinematics import arm_kinematics
    from orchestrator.sim.scene import build_scene
    from orchestrator.vision.wrist_cube import bottom_height, fit_in_jaws, start_pose
    from test_wrist_camera import CUBE, grasp_pose_down, render_held

    model = build_scene(CUBE, 0.03)
    scene = (mujoco, model, mujoco.MjData(model))
    write_geometry(tmp_path / "wrist_geometry.yaml", model_geometry(WIDTH, HEIGHT), {})
    rig = tmp_path / "rig.yaml"
    rig.write_text("robot: {type: so101_follower, port: /dev/null, id: x}\ncameras:\n"
                   f"  wrist: {{type: opencv, index_or_path: 2, width: {WIDTH}, height: {HEIGHT}, fps: 30, "
                   "geometry: wrist_geometry.yaml}\n")
    poses = tmp_path / "cameras.json"
    poses.write_text(json.dumps(profile_camera_poses(load_rig(rig).profile)))
    geometry = recorded_geometry(poses)
    assert geometry is not None and geometry.position == pytest.approx(MOUNT_POS, abs=1e-6)

    degrees = grasp_pose_down(arm_kinematics(), 0.06)
    image, point, rotation, truth = render_held(scene, degrees, 0.004, 0.0)

    def error_mm(frame, camera) -> float:
        centre, rotation_g = start_pose(rotation)
        fit = fit_in_jaws(frame, camera, CUBE, centre, rotation_g, prior=rotation_g)
        assert fit.reason == ""
        return 1000.0 * (bottom_height(point, rotation, fit.centre, fit.rotation, CUBE) - truth)

    assert abs(error_mm(image, geometry)) < 1.0
    shifted = replace_geometry(geometry, position=geometry.position + np.array([0.0, 0.0, 0.005]))
    assert abs(error_mm(image, shifted)) > 2.0
    barrel = replace_geometry(geometry, distortion=np.array([-0.25, 0.0, 0.0, 0.0, 0.0]))
    distorted = distort(image, barrel)
    assert abs(error_mm(distorted, barrel)) < 1.0
    assert abs(error_mm(distorted, geometry)) > 2.0


def replace_geometry(geometry, **changes):
    import dataclasses

    return dataclasses.replace(geometry, **changes)


def distort(image: np.ndarray, geometry) -> np.ndarray:
    """`image` (an ideal pinhole of `geometry.matrix`) as a lens of `geometry.distortion` sees it:
    each output pixel's undistorted place by `cv2.undistortPoints`, sampled there."""
    height, width = image.shape[:2]
    grid = np.stack(np.meshgrid(np.arange(width), np.arange(height)), axis=-1).reshape(-1, 1, 2).astype(np.float32)
    ideal = cv2.undistortPoints(grid, geometry.matrix, geometry.distortion, P=geometry.matrix).reshape(height, width, 2)
    return cv2.remap(image, ideal[..., 0], ideal[..., 1], cv2.INTER_LINEAR)


class GuidedArm:
    """A hand-guidable arm at the command's level: a person moves it only after each prompt is
    answered (the next pose of `poses`), its frames are the simulated wrist camera's there; it
    records every call, and any call that would move it by itself fails the test."""

    posed_by_a_scripted_hand = False
    hand_guidable = True

    def __init__(self, poses: np.ndarray, frames: list[np.ndarray]) -> None:
        self.poses, self.frames, self.pose, self.calls = poses, frames, -1, []

    def answered(self) -> None:
        self.calls.append("enter")
        self.pose += 1

    def release_torque(self) -> list[str]:
        self.calls.append("torque off")
        return []

    def observe(self, with_images=True):
        from orchestrator.design.joints import STATE_KEYS

        q = self.poses[min(max(self.pose - 1, 0), len(self.poses) - 1)]
        return {k: float(v) for k, v in zip(STATE_KEYS, [*q, 0.0], strict=True)}

    def camera_still(self, camera: str) -> np.ndarray:
        self.calls.append("frame")
        return self.frames[min(max(self.pose - 1, 0), len(self.frames) - 1)]

    def __getattr__(self, name: str):
        raise AssertionError(f"the command called {name}: the arm must not move by itself")


def test_a_guided_arm_is_released_only_after_the_go_ahead_and_never_moved(monkeypatch, views):
    """The hand-guided path: torque goes off only after the operator's first Enter (starting the
    command is not one), one view per Enter once the joints stand still, nothing that moves the arm
    (a call to anything but reading, releasing torque or a frame fails)."""
    import argparse

    from orchestrator.commands import calibrate_wrist

    arm = GuidedArm(np.stack([v.joints_deg for v in views[:6]]), [v.image for v in views[:6]])
    monkeypatch.setattr(calibrate_wrist, "_asker", lambda: lambda text: arm.answered())
    monkeypatch.setattr(calibrate_wrist, "STILL_S", 0.1)
    taken = calibrate_wrist._guided_views(arm, argparse.Namespace(views=6, camera="wrist"))
    assert arm.calls[:2] == ["enter", "torque off"]
    assert arm.calls[2:] == ["enter", "frame"] * 6 + ["enter"]
    assert np.stack([v.joints_deg for v in taken]) == pytest.approx(np.stack([v.joints_deg for v in views[:6]]))


def test_a_real_arms_episode_reads_the_wrist_video_only_with_a_recorded_geometry(tmp_path, monkeypatch):
    """`rate_file` on an episode the front camera and the joints leave unsure: a real arm's episode
    (`simulated=False`) is measured in the wrist video with the geometry its cameras.json recorded;
    without one it is not read at all (the positive control of that "never reads": the simulated
    scene's episode is read, with the model's geometry)."""
    import json

    from orchestrator.judging.auto import camera as camera_sense
    from orchestrator.judging.auto import wrist as wrist_sense
    from orchestrator.judging.auto.rater import rate_file
    from test_two_senses import CUBE as C
    from test_two_senses import HEIGHT, HOLD, T, joints, label, lifted_between, track

    state, action = joints(HEIGHT + 0.005, 60)
    series = tmp_path / "episodes" / "ep_1" / "timeseries.npz"
    series.parent.mkdir(parents=True)
    np.savez(series, t=T, state=state, action=action)
    folder = tmp_path / "videos" / "ep_1"
    folder.mkdir(parents=True)
    (folder / "front.mp4").write_bytes(b"")
    lift = track(lifted_between(1.0, 3.0, HEIGHT + 0.0005), band=0.003)
    monkeypatch.setattr(camera_sense, "front_lift", lambda *a, **k: (lift, ""))
    asked: list = []
    monkeypatch.setattr(wrist_sense, "wrist_track", lambda *a: asked.append(a[-1]) or (None, "none measured"))
    assert label(rate_file(series, C, HEIGHT, HOLD)) == "unsure"
    assert asked == []                                                       # a real arm, no geometry
    rate_file(series, C, HEIGHT, HOLD, simulated=True)
    assert asked == [None]                                                   # the model's
    measured = model_geometry(320, 240)
    (folder / "cameras.json").write_text(json.dumps({"wrist": {"geometry": measured.to_spec(), "width": 320,
                                                               "height": 240}}))
    rate_file(series, C, HEIGHT, HOLD)
    assert len(asked) == 2 and asked[1] is not None
    assert asked[1].position == pytest.approx(measured.position, abs=1e-6)


def test_an_inline_geometry_in_the_profile_is_read_and_a_bad_one_is_located(tmp_path):
    from orchestrator.rigs.profile import load_rig, profile_camera_poses

    spec = model_geometry(WIDTH, HEIGHT).to_spec()
    inline = (f"mount: {{position_m: {spec['mount']['position_m']}, rotation_deg: {spec['mount']['rotation_deg']}}}, "
              f"intrinsics: {{width: {WIDTH}, height: {HEIGHT}, f_px: {spec['intrinsics']['f_px']}, "
              f"principal_px: {spec['intrinsics']['principal_px']}}}")
    rig = tmp_path / "rig.yaml"
    rig.write_text("robot: {type: so101_follower, port: /dev/null, id: x}\ncameras:\n"
                   f"  wrist: {{type: opencv, index_or_path: 2, width: {WIDTH}, height: {HEIGHT}, fps: 30,\n"
                   f"          geometry: {{{inline}}}}}\n")
    record = profile_camera_poses(load_rig(rig).profile)["wrist"]
    assert record["geometry"]["mount"]["position_m"] == pytest.approx(list(MOUNT_POS), abs=1e-6)
    rig.write_text(rig.read_text().replace("f_px: [", "f_px: [0.5, "))
    with pytest.raises(BadInput) as caught:
        load_rig(rig)
    assert "rig.yaml:4" in str(caught.value) and "f_px" in str(caught.value) and "\n" not in str(caught.value)
