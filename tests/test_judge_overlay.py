"""Zoom on the mark and the success-height guide: the camera model against MuJoCo's own
rendering (the red cube found by colour segmentation), and the keys in the judge app in every
renderer the test environment can draw (half-blocks, textual-image's Unicode, Sixel, Kitty)."""

from __future__ import annotations

import asyncio
import os

import numpy as np
import pytest

from orchestrator.design.protocol import Cube, Mark
from orchestrator.judging.blinding import CampaignSource
from orchestrator.judging.overlay import GUIDE_RGB, CameraPose, guide_segment, zoom_box
from orchestrator.judging.tui.app import JudgeApp
from orchestrator.judging.tui.player import Player
from orchestrator.rigs.profile import load_rig
from support.repo import REPO
from support.textual_screen import screen_text

os.environ.setdefault("MUJOCO_GL", "egl")


def red_centroid(rgb: np.ndarray) -> np.ndarray:
    """Centre (u, v) of the cube's red pixels (HSV segmentation with OpenCV)."""
    import cv2

    hsv = cv2.cvtColor(rgb, cv2.COLOR_RGB2HSV)
    mask = (((hsv[..., 0] < 8) | (hsv[..., 0] > 172)) & (hsv[..., 1] > 120) & (hsv[..., 2] > 60))
    assert mask.sum() > 20, "no red cube in the frame"
    v, u = np.nonzero(mask)
    return np.array([u.mean(), v.mean()])


def test_the_pose_projects_where_mujoco_draws_the_cube():
    from orchestrator.rigs.sim import SimRig

    profile = load_rig(REPO / "hardware" / "sim.yaml").profile
    rig = SimRig(profile, fps=30)
    rig.connect()
    try:
        pose = CameraPose.from_dict(rig.camera_poses()["front"])
        assert set(rig.camera_poses()) == {"front"}            # the wrist camera moves: no pose
        cube = Cube(size_m=0.03)
        for x, y in ((0.22, -0.06), (0.30, 0.04)):
            rig.prepare_layout(Mark(id="M", x=x, y=y), cube, seed=1)
            for z in (0.015, 0.075):                               # on the table, then lifted
                adr = rig._ids["cube_qpos"]
                rig._data.qpos[adr:adr + 3] = [x, y, z]
                rig._mj.mj_forward(rig._model, rig._data)
                found = red_centroid(rig.render("front"))
                assert np.abs(found - pose.project([(x, y, z)])[0]).max() < 4.0, (x, y, z)
    finally:
        rig.disconnect()


def test_zoom_box_and_guide_geometry():
    pose = CameraPose((0.46, -0.19, 0.10), (0.18, 0.0, 0.06), 55.0, 320, 240)
    left, top, right, bottom = zoom_box(pose, 0.2, 0.0, 0.04)
    assert 0 <= left < right <= 320 and 0 <= top < bottom <= 240
    assert (right - left) / (bottom - top) == pytest.approx(320 / 240, rel=0.05)
    mark = pose.project([(0.2, 0.0, 0.0)])[0]
    assert left <= mark[0] <= right and top <= mark[1] <= bottom
    seg = guide_segment(pose, 0.2, 0.0, 0.04)
    table = pose.project([(0.2, 0.0, 0.0)])[0]
    assert seg[:, 1].mean() < table[1]                      # the guide is above the mark's spot
    assert abs(seg[0, 1] - seg[1, 1]) < abs(seg[0, 0] - seg[1, 0])   # and runs across the image


@pytest.fixture
def tiny(tiny_reference, tmp_path):
    """A copy of the session's tiny simulated campaign (the judge writes labels into it)."""
    import shutil

    shutil.copytree(tiny_reference, tmp_path / "tiny")
    return tmp_path / "tiny"


def test_auto_renderer_follows_textual_image_detection(monkeypatch):
    import textual_image.renderable as tir
    import textual_image.widget as tiw

    from orchestrator.run.halfblock import HalfBlockImage, image_widget_class

    monkeypatch.setattr(tir, "Image", tir.HalfcellImage)
    assert image_widget_class("auto") is HalfBlockImage          # no graphics: half-blocks
    for detected in (tir.SixelImage, tir.TGPImage):
        monkeypatch.setattr(tir, "Image", detected)
        assert image_widget_class("auto") is tiw.Image           # textual-image's own choice


@pytest.mark.parametrize("renderer", ["halfcell", "unicode", "sixel", "tgp"])
def test_zoom_and_guide_keys_in_each_renderer(tiny, renderer):
    app = JudgeApp(CampaignSource(tiny, "alice"), renderer=renderer, autoplay=False)
    episode = app.session.order[0]
    assert set(episode.camera_poses) == {"front"}

    def yellow(image: np.ndarray) -> np.ndarray:
        return np.all(np.abs(image.astype(int) - GUIDE_RGB) < 60, axis=2)

    async def session():
        async with app.run_test(size=(110, 32)) as pilot:
            await pilot.pause(0.3)
            player = app.query_one(Player)
            plain = player.current_image().copy()
            assert np.array_equal(plain, player.sources["front"].get(0))       # paused on the first frame
            await pilot.press("g")
            guided = player.current_image()
            drawn = yellow(guided) & ~yellow(plain)                            # the guide's own pixels
            assert drawn.sum() > plain.shape[1] // 2 and len(set(np.nonzero(drawn)[1])) > plain.shape[1] // 2
            assert "Success-height guide (4 cm" in screen_text(app)
            assert "on (cameras: front)" in screen_text(app)
            await pilot.press("m")
            zoomed = player.current_image()
            assert zoomed.shape == plain.shape and not np.array_equal(zoomed, guided)
            assert "Zoom on the mark on (cameras: front)" in screen_text(app)
            await pilot.press("c")                                   # the wrist camera: no pose
            wrist = player.sources["wrist"].get(0)
            assert not np.array_equal(wrist, plain)                  # control: the cameras' frames differ
            assert np.array_equal(player.current_image(), wrist)     # drawn as recorded, overlays on
            await pilot.press("c", "m")                              # all side by side; zoom off
            assert "Zoom on the mark off (cameras: front)" in screen_text(app)
            await pilot.press("g", "c")                              # guide off; back to the front camera
            assert player.view_name == "front"
            assert np.array_equal(player.current_image(), plain)     # both overlays off: the plain frame
            await pilot.press("s")
            await pilot.pause(0.2)
            assert len({e for _, e, _ in app.shown_log}) == 2            # frames reached the widget

    asyncio.run(session())
    app.source.close()


def test_a_rig_profile_can_give_a_camera_pose(tmp_path):
    """Real or twin cameras get zoom and guide when the profile says where they are."""
    from orchestrator.core.errors import BadInput
    from orchestrator.rigs.profile import profile_camera_poses

    text = (REPO / "hardware" / "so101.example.yaml").read_text()
    assert "front: {type: opencv" in text
    posed = text.replace("front: {type: opencv", "front: {pose: {position: [0.5, -0.2, 0.12], "
                         "target: [0.2, 0.0, 0.05], fovy_deg: 50}, type: opencv")
    (tmp_path / "rig.yaml").write_text(posed)
    profile = load_rig(tmp_path / "rig.yaml").profile
    poses = profile_camera_poses(profile)
    assert set(poses) == {"front"}
    pose = CameraPose.from_dict(poses["front"])
    assert (pose.width, pose.height) == (profile.cameras["front"].width, profile.cameras["front"].height)
    assert pose.project([(0.2, 0.0, 0.05)])[0] == pytest.approx([pose.width / 2, pose.height / 2])
    (tmp_path / "bad.yaml").write_text(posed.replace("fovy_deg: 50", "fovy_deg: 0"))
    with pytest.raises(BadInput, match=r"bad.yaml:\d+:\d+: .*fovy_deg"):
        load_rig(tmp_path / "bad.yaml")
