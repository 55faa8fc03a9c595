"""The wrist camera measures the cube in the jaws (`vision.wrist_cube`) and enters the `auto` rater
as the seat it measures over the hold (`judging.auto.wrist_sense`): its pose from the joints against
MuJoCo's; the cube's bottom fitted in frames MuJoCo renders with the cube planted in the jaws at
known depths (the renderer is the oracle); and planted lifts around the success height that the
front camera's pooled seat cannot settle and the wrist camera's does, both ways, with a wrist
camera that contradicts the front camera making the rater abstain."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.judging.auto.rater import SEAT_HIGH_M, SEAT_LOW_M, rate
from orchestrator.sim import fk
from orchestrator.vision.camera_model import Intrinsics
from orchestrator.vision.wrist_cube import WristTrack, bottom_height, fit_in_jaws, measure_in_jaws, start_pose

CUBE = 0.03


@pytest.fixture(scope="module")
def scene():
    import mujoco

    from orchestrator.sim.scene import build_scene

    model = build_scene(CUBE, 0.03)
    return mujoco, model, mujoco.MjData(model)


def set_arm(scene, degrees: np.ndarray, gripper_rad: float = 0.0) -> None:
    from orchestrator.sim.scene import ARM_JOINTS

    mujoco, model, data = scene
    for name, value in zip(ARM_JOINTS, [*np.radians(degrees[:5]), gripper_rad], strict=True):
        data.qpos[model.joint(name).qposadr[0]] = value
    mujoco.mj_forward(model, data)


def test_the_wrist_camera_pose_from_the_joints_is_mujocos(scene):
    from orchestrator.sim.kinematics import arm_kinematics

    mujoco, model, data = scene
    kinematics = arm_kinematics()
    degrees = np.random.default_rng(7).uniform(np.degrees(kinematics.lo), np.degrees(kinematics.hi), size=(12, 5))
    positions, rotations = fk.wrist_camera_pose(degrees)
    camera = model.camera("wrist").id
    assert model.cam_fovy[camera] == pytest.approx(fk.WRIST_CAMERA_FOVY_DEG)
    for k, q in enumerate(degrees):
        set_arm(scene, q)
        assert positions[k] == pytest.approx(data.cam_xpos[camera], abs=1e-6)
        # MuJoCo's camera looks along its -z with y up; OpenCV's along z with y down
        assert rotations[k] == pytest.approx(data.cam_xmat[camera].reshape(3, 3) @ np.diag([1.0, -1.0, -1.0]), abs=1e-6)
    assert len(degrees) == 12


def grasp_pose_down(kinematics, height_m: float) -> np.ndarray:
    q, _ = kinematics.ik([0.2, 0.0, height_m], kinematics.down_rotation(0.0))
    return np.degrees(q)


def render_held(scene, degrees: np.ndarray, sunk_m: float, tilt_deg: float, away: bool = False,
                twist_deg: float = 0.0, size: tuple[int, int] = (320, 240)):
    """A wrist frame (`size`, default 320x240) MuJoCo renders with the cube `sunk_m` below the grasp point along the
    gripper, turned `tilt_deg` about the gripper's y axis and then `twist_deg` about its z axis (or
    out of view on the table), and the cube bottom's true height (its lowest corner)."""
    mujoco, model, data = scene
    set_arm(scene, degrees, gripper_rad=0.25)
    point, rotation = fk.grasp_pose(degrees[None])
    a, b = np.radians(tilt_deg), np.radians(twist_deg)
    turn = (rotation[0] @ np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])
            @ np.array([[np.cos(b), -np.sin(b), 0], [np.sin(b), np.cos(b), 0], [0, 0, 1]]))
    centre = point[0] - rotation[0] @ np.array([0.0, 0.0, sunk_m])
    if away:
        centre, turn = np.array([0.2, 0.5, CUBE / 2]), np.eye(3)
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, turn.reshape(-1))
    adr = model.joint("cube").qposadr[0]
    data.qpos[adr:adr + 3], data.qpos[adr + 3:adr + 7] = centre, quat
    mujoco.mj_forward(model, data)
    with mujoco.Renderer(model, height=size[1], width=size[0]) as renderer:
        renderer.update_scene(data, camera="wrist")
        image = renderer.render().copy()
    truth = float(data.xpos[model.body("cube").id][2]
                  - CUBE / 2 * np.abs(data.xmat[model.body("cube").id].reshape(3, 3)[2]).sum())
    return image, point[0], rotation[0], truth


def test_the_cube_bottom_is_fitted_in_frames_mujoco_renders(scene):
    """Cubes planted 2, 4 (turned 3 degrees) and 6 mm deep in the jaws, some 3 cm up: each bottom
    within 1 mm of the renderer's truth (the bench's largest per-frame error: 0.98 mm), so the 4 mm
    between the shallow and the deep one is seen to 1 mm (the front camera's pooled seat is known
    to -3/+1.5 mm); a cube out of the camera's view is not measured (positive control of the reasons)."""
    from orchestrator.sim.kinematics import arm_kinematics

    degrees = grasp_pose_down(arm_kinematics(), 0.06)
    intrinsics = Intrinsics.from_fovy(fk.WRIST_CAMERA_FOVY_DEG, 320, 240)
    measured = {}
    for sunk, tilt in ((0.002, 0.0), (0.006, 0.0), (0.004, 3.0)):
        image, point, rotation, truth = render_held(scene, degrees, sunk, tilt)
        centre, rotation_g = start_pose(rotation)
        fitted, turned, why = fit_in_jaws(image, intrinsics, CUBE, centre, rotation_g, prior=rotation_g)[:3]
        assert why == ""
        measured[sunk] = (bottom_height(point, rotation, fitted, turned, CUBE), truth)
        assert abs(measured[sunk][0] - truth) < 0.001, (sunk, tilt, measured[sunk])
    (deep, deep_truth), (shallow, shallow_truth) = measured[0.006], measured[0.002]
    assert abs((shallow - deep) - (shallow_truth - deep_truth)) < 0.001
    assert shallow_truth - deep_truth == pytest.approx(0.004, abs=1e-6)
    image, point, rotation, _ = render_held(scene, degrees, 0.0, 0.0, away=True)
    why = fit_in_jaws(image, intrinsics, CUBE, *start_pose(rotation), prior=start_pose(rotation)[1])[2]
    assert why.startswith(("occluded", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9")), why


# ---------------------------------------------------------------- the rater's rule, planted lifts

def wrist_track(bottom_of_t, times: np.ndarray, turn_y_deg: float = 0.0,
                frame_px: tuple[int, int] | None = None, measured_camera: bool = False) -> WristTrack:
    """A wrist track with the planted bottom at `times` (NaN: not fitted), each fit turned
    `turn_y_deg` about the gripper's y axis, fitted on frames of `frame_px` (None: not known) with
    the model's camera or a rig's measured one."""
    bottom = np.array([bottom_of_t(t) for t in times], float)
    nan3 = np.full((len(times), 3), np.nan)
    turns = np.where(np.isnan(bottom)[:, None], np.nan, np.array([0.0, turn_y_deg, 0.0]))
    return WristTrack(times, nan3, np.full((len(times), 3, 3), np.nan), bottom,
                      tuple("" if b == b else "not fitted" for b in bottom), np.zeros(len(times)), turns, frame_px,
                      measured_camera)


def test_the_wrist_cameras_seat_settles_lifts_the_front_camera_cannot_both_ways():
    """Lifts 0.5 mm beyond the wrist camera's band on either side of the success height, whose
    front camera sees the pooled bottom at the height itself (its band, BELOW_M under to ABOVE_M over,
    straddles it: `unsure` without the wrist camera, the positive control on the old rule): with the
    wrist camera's seat the label is the truth's, decided by the joints with the wrist camera; a wrist
    camera that sees the cube 3 mm lower than the front camera for the whole hold (one wholly under the
    height, the other wholly over) makes the rater abstain, naming it."""
    from orchestrator.judging.auto import wrist_sense
    from test_two_senses import CUBE as C
    from test_two_senses import HEIGHT, HOLD, T, joints, label, lifted_between, track

    frames = np.arange(0, T[-1] + 1e-9, 1 / 15)
    cases = {"success": (HEIGHT + wrist_sense.BELOW_M + 0.0005, SEAT_LOW_M + 0.0005),   # the joints straddle
             "failure": (HEIGHT - wrist_sense.ABOVE_M - 0.0005, SEAT_HIGH_M - 0.0005)}
    for expected, (bottom, seat) in cases.items():
        state, action = joints(bottom + seat, 60)                         # held 2 s from 1 s
        front = track(lifted_between(1.0, 3.0, HEIGHT), band=0.004)        # the front camera at the height
        assert label(rate(T, state, C, HEIGHT, HOLD, action, front)) == "unsure"
        wrist = wrist_track(lambda t, b=bottom: b if 1.2 <= t < 2.8 else np.nan, frames)
        verdict = rate(T, state, C, HEIGHT, HOLD, action, front, wrist=wrist)
        assert label(verdict) == expected, (expected, verdict.reason)
        assert "joints with the wrist camera" in verdict.decided_by and "the wrist camera's seat" in verdict.reason
    state, action = joints(HEIGHT + 0.0015 + 0.005, 60)
    front = track(lifted_between(1.0, 3.0, HEIGHT + 0.0015), band=0.001)
    low = wrist_track(lambda t: HEIGHT - 0.0015 if 1.2 <= t < 2.8 else np.nan, frames)
    verdict = rate(T, state, C, HEIGHT, HOLD, action, front, wrist=low)
    assert label(verdict) == "unsure" and "the wrist camera" in verdict.reason, verdict.reason
    assert len(cases) == 2


def test_a_wedged_cube_is_found_from_three_starts_and_not_measured(scene):
    """A cube wedged in the jaws, turned 10 degrees about the gripper's y axis and 1 about its z
    axis, 4 mm deep, in a frame MuJoCo renders: fitted from the jaws' pose alone (the old fit, the
    positive control) it lands at a small turn and more than 2.5 mm high (outside even the old
    band); a squeeze's first fit (`measure_in_jaws`, three starts) finds the turn and the bottom
    within 1 mm, and the rater's sense flags the frame wedged and does not use it (`wrist_bounds`
    NaN), while the same frame planted well seated is used."""
    from orchestrator.judging.auto import wrist_sense
    from orchestrator.sim.kinematics import arm_kinematics

    degrees = grasp_pose_down(arm_kinematics(), 0.06)
    image, point, rotation, truth = render_held(scene, degrees, 0.004, 10.0, twist_deg=-1.0)
    intrinsics = Intrinsics.from_fovy(fk.WRIST_CAMERA_FOVY_DEG, 320, 240)
    centre, rotation_g = start_pose(rotation)
    old = fit_in_jaws(image, intrinsics, CUBE, centre, rotation_g, prior=rotation_g, starts_deg=(0.0,))
    assert bottom_height(point, rotation, old.centre, old.rotation, CUBE) - truth > 0.0025
    assert abs(old.turn_deg[1]) < wrist_sense.WEDGED_TURN_DEG
    track = measure_in_jaws([image], np.array([0.0]), degrees[None], np.array([True]), CUBE)
    assert track.reasons == ("",)
    assert abs(track.bottom_m[0] - truth) < 0.001, (track.bottom_m[0], truth)
    assert abs(track.turn_deg[0, 1] - 10.0) < 2.0
    assert wrist_sense.wedged(track).tolist() == [True]
    t, closed, z = np.array([0.0, 0.1]), np.array([True, True]), np.array([point[2], point[2]])
    two = WristTrack(np.array([0.0, 0.1]), np.repeat(track.centre_g, 2, 0), np.repeat(track.rotation_g, 2, 0),
                     np.repeat(track.bottom_m, 2), ("", ""), np.repeat(track.mismatch, 2), np.repeat(track.turn_deg, 2, 0))
    assert np.isnan(wrist_sense.wrist_bounds(t, closed, z, two)[0]).all()
    seated = WristTrack(two.times_s, two.centre_g, two.rotation_g, two.bottom_m, two.reasons, two.mismatch,
                        np.zeros((2, 3)))
    assert not np.isnan(wrist_sense.wrist_bounds(t, closed, z, seated)[0]).any()


def test_the_wrist_camera_fits_only_where_the_height_is_in_question():
    """A squeeze whose grasp point rises 0-70 mm and stays there: with the success height given,
    the frames fitted are those whose joints' bottom (the rise less the 3-7 mm seat) comes within
    `QUESTION_M` of it, and one frame either side (the oracle below lists them from the rise
    alone); the held frames at the top are not fitted. Without the height (the old sampling, the
    positive control) every frame risen 2 cm is."""
    from orchestrator.judging.auto.wrist import QUESTION_M, in_question, sample

    t = np.arange(0, 4.0, 1 / 30)
    rise = np.clip(t - 0.5, 0, 1) * 0.07
    closed = t >= 0.5
    frame_t = np.arange(0, 4.0, 1 / 15)
    every = sample(t, closed, rise, frame_t)[2]
    asked = sample(t, closed, rise, frame_t, in_question(0.040, (SEAT_LOW_M, SEAT_HIGH_M)))[2]
    frame_rise = rise[np.searchsorted(t, frame_t + 1e-9, side="right") - 1]
    in_question = (frame_rise - SEAT_HIGH_M - QUESTION_M <= 0.040) & (0.040 <= frame_rise - SEAT_LOW_M + QUESTION_M)
    expected = set(np.flatnonzero(in_question & closed[::2]))
    expected |= {k - 1 for k in expected} | {k + 1 for k in expected}
    assert set(np.flatnonzero(asked)) == expected
    assert 4 <= len(expected) < 16 and every.sum() >= 45
    assert not asked[frame_rise >= 0.0699].any() and every[frame_rise >= 0.0699].all()


def test_well_seated_fits_settle_lifts_inside_the_old_band_and_wedged_ones_do_not():
    """Lifts 2.2 mm over and 0.9 mm under the success height (inside the old 2.5 mm under / 1.0 mm
    over band: `unsure` there, the positive control) seen by a well-seated wrist fit: labelled as
    the truth; the same frames fitted turned 9 degrees about the gripper's y axis (wedged): not
    measured, so `unsure`, never a label from them."""
    from test_two_senses import CUBE as C
    from test_two_senses import HEIGHT, HOLD, T, joints, label, lifted_between, track

    frames = np.arange(0, T[-1] + 1e-9, 1 / 15)
    cases = {"success": (HEIGHT + 0.0022, SEAT_LOW_M + 0.0005), "failure": (HEIGHT - 0.0009, SEAT_HIGH_M - 0.0005)}
    for expected, (bottom, seat) in cases.items():
        state, action = joints(bottom + seat, 60)
        front = track(lifted_between(1.0, 3.0, HEIGHT), band=0.004)
        for turn, want in ((0.0, expected), (9.0, "unsure")):
            wrist = wrist_track(lambda t, b=bottom: b if 1.2 <= t < 2.8 else np.nan, frames, turn_y_deg=turn)
            verdict = rate(T, state, C, HEIGHT, HOLD, action, front, wrist=wrist)
            assert label(verdict) == want, (expected, turn, verdict.reason)
    assert len(cases) == 2


def test_the_narrow_band_holds_only_for_the_frame_size_it_was_measured_at():
    """A lift 0.25 mm over the 640x480 band's lower end (inside the 320x240 band, `BELOW_M`: the
    old constant), whose front camera and joints straddle the success height: a well-seated wrist
    track fitted on 640x480 frames labels it a success; the same track from 320x240 frames, or of
    an unknown size, or from a real arm's 640x480 camera (a rig's measured geometry: the band was
    measured on the model's camera only) is `unsure` (the positive control: the old band, and a narrow band never lent
    to frames it was not measured on). A lift 0.25 mm inside the 640x480 band is `unsure` at every
    size (the band is applied, not dropped)."""
    from orchestrator.judging.auto import wrist_sense
    from test_two_senses import CUBE as C
    from test_two_senses import HEIGHT, HOLD, T, joints, label, lifted_between, track

    below, above = wrist_sense.BANDS_M[(640, 480)]
    assert below + 0.0005 < wrist_sense.BELOW_M and above <= wrist_sense.ABOVE_M
    frames = np.arange(0, T[-1] + 1e-9, 1 / 15)
    cases = {HEIGHT + below + 0.00025: {(640, 480): "success", (320, 240): "unsure", None: "unsure", "arm": "unsure"},
             HEIGHT + below - 0.00025: {(640, 480): "unsure", (320, 240): "unsure", None: "unsure", "arm": "unsure"}}
    checked = 0
    for bottom, wanted in cases.items():
        state, action = joints(bottom + SEAT_LOW_M + 0.0005, 60)        # the joints straddle the height
        front = track(lifted_between(1.0, 3.0, HEIGHT), band=0.004)      # so does the front camera
        for size, want in wanted.items():
            wrist = wrist_track(lambda t, b=bottom: b if 1.2 <= t < 2.8 else np.nan, frames,   # "arm": 640x480, a
                                frame_px=(640, 480) if size == "arm" else size, measured_camera=size == "arm")  # rig's camera
            verdict = rate(T, state, C, HEIGHT, HOLD, action, front, wrist=wrist)
            assert label(verdict) == want, (bottom, size, verdict.reason)
            checked += 1
    assert checked == 8


def test_measure_in_jaws_says_the_frame_size_and_fits_640x480_within_its_band(scene):
    """A cube 4 mm deep and turned 3 degrees in a 640x480 frame MuJoCo renders: `measure_in_jaws`
    records the size it fitted and the bottom within the 640x480 band of the renderer's truth."""
    from orchestrator.judging.auto import wrist_sense
    from orchestrator.sim.kinematics import arm_kinematics

    degrees = grasp_pose_down(arm_kinematics(), 0.06)
    image, _, _, truth = render_held(scene, degrees, 0.004, 3.0, size=(640, 480))
    track = measure_in_jaws([image], np.array([0.0]), degrees[None], np.array([True]), CUBE)
    assert track.frame_px == (640, 480) and track.reasons == ("",)
    below, above = wrist_sense.BANDS_M[(640, 480)]
    assert -above < track.bottom_m[0] - truth < below, (track.bottom_m[0], truth)
