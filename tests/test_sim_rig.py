"""The simulated SO-101 rig: cube placement, units and shapes, clipping, timing, determinism.

Physics only (no rendering) except one observation test that renders each camera once.
"""

from __future__ import annotations

import math
import os
import pickle

import numpy as np
import pytest

from orchestrator.design.protocol import Cube, Mark, Success, load_protocol
from orchestrator.policies.base import EpisodeContext
from orchestrator.rigs.profile import STATE_KEYS, load_rig
from support.repo import REPO, SIM_PROTOCOL

os.environ.setdefault("MUJOCO_GL", "egl")   # headless rendering; before mujoco is imported

from orchestrator.rigs.sim import SimRig, substeps_for  # noqa: E402
from support.sim_profile import CLEAR_REST, sim_profile  # noqa: E402


@pytest.fixture(scope="module")
def loaded():
    return load_protocol(SIM_PROTOCOL)


@pytest.fixture(scope="module")
def rig(loaded):
    rig = SimRig(sim_profile(), fps=loaded.protocol.episode.fps, success=loaded.protocol.success)
    rig.connect()
    yield rig
    rig.disconnect()


def _yaw_diff(a: float, b: float) -> float:
    return (a - b + 180.0) % 360.0 - 180.0


def test_cube_placed_at_every_grid20_mark(rig, loaded):
    cube = loaded.layout.cube
    assert len(loaded.layout.marks) == 20
    for mark in loaded.layout.marks:
        rig.prepare_layout(mark, cube, seed=1)
        x, y, z, yaw = rig.cube_pose()
        assert abs(x - mark.x) <= 1e-3 and abs(y - mark.y) <= 1e-3, (mark.id, x, y)
        assert abs(z - cube.size_m / 2) <= 1e-3, (mark.id, z)   # resting on the table (z = 0)
        assert abs(_yaw_diff(yaw, mark.yaw_deg)) <= 1.0, (mark.id, yaw)


@pytest.mark.parametrize("yaw", [17.0, -33.0, 45.0, 90.0, 137.5])
def test_cube_placed_with_yaw(rig, yaw):
    mark = Mark(id="Y", x=0.21, y=-0.04, yaw_deg=yaw)
    cube = Cube(size_m=0.03, mass_kg=0.03)
    rig.prepare_layout(mark, cube, seed=2)
    x, y, z, measured = rig.cube_pose()
    assert math.hypot(x - mark.x, y - mark.y) <= 1e-3
    assert abs(_yaw_diff(measured, yaw)) <= 1.0


def test_observation_keys_units_and_images_match_profile(rig, loaded):
    rig.prepare_layout(loaded.layout.marks[0], loaded.layout.cube, seed=3)
    obs = rig.observe(with_images=False)
    assert set(obs) == set(STATE_KEYS)
    for key, value in CLEAR_REST.items():   # degrees; gripper 0-100 (0 = closed end of range)
        assert obs[key] == pytest.approx(value, abs=1.5), key
    obs = rig.observe(with_images=True)
    assert set(obs) == set(STATE_KEYS) | set(rig.profile.cameras)
    for name, cam in rig.profile.cameras.items():
        img = obs[name]
        assert img.shape == (cam.height, cam.width, 3) and img.dtype == np.uint8
        assert img.std() > 5, f"{name} frame is blank"
    assert rig.camera_names == ("front", "wrist")
    only = rig.observe(with_images=["wrist"])
    assert "wrist" in only and "front" not in only


def test_gripper_units_span_the_joint_range(rig):
    lo, hi = rig.units.ranges_rad[5]
    assert rig.units.to_rig(np.array([0, 0, 0, 0, 0, lo]))[5] == pytest.approx(0.0)
    assert rig.units.to_rig(np.array([0, 0, 0, 0, 0, hi]))[5] == pytest.approx(100.0)
    assert rig.units.to_rig(np.radians([10, -20, 30, -40, 50, 0]))[:5] == pytest.approx([10, -20, 30, -40, 50])


def test_act_advances_one_control_period_and_clips(rig, loaded):
    rig.prepare_layout(loaded.layout.marks[5], loaded.layout.cube, seed=4)
    n, dt = substeps_for(30)
    assert n * dt == pytest.approx(1 / 30, abs=1e-12)
    target = {**CLEAR_REST, "elbow_flex.pos": 150.0}
    for k in range(1, 4):
        sent = rig.act(target)
        assert rig._data.time == pytest.approx(k / 30, abs=1e-9)
    assert sent["elbow_flex.pos"] == pytest.approx(math.degrees(rig._model.joint("elbow_flex").range[1]))
    assert sent["shoulder_pan.pos"] == pytest.approx(0.0)
    facts = rig.end_episode()
    assert "joint_limit:elbow_flex" in facts.safety_events
    assert facts.physics_success is False and facts.max_lift_m < 0.005


def test_nonfinite_action_is_refused(rig, loaded):
    rig.prepare_layout(loaded.layout.marks[0], loaded.layout.cube, seed=4)
    with pytest.raises(ValueError):
        rig.act({"shoulder_pan.pos": float("nan")})


def test_preflight_flags_a_rest_pose_inside_the_table():
    good = SimRig(sim_profile())
    assert good.preflight() == []
    shipped = SimRig(load_rig(REPO / "hardware" / "sim.yaml").profile)   # gripper on the table
    assert shipped.preflight() == []
    bad = SimRig(sim_profile({**CLEAR_REST, "shoulder_lift.pos": 60, "elbow_flex.pos": 30,
                              "wrist_flex.pos": 60}))
    problems = bad.preflight()
    assert any("into the table" in p for p in problems), problems


def test_rig_pickles_for_worker_processes(rig, loaded):
    rig.prepare_layout(loaded.layout.marks[3], loaded.layout.cube, seed=5)
    clone = pickle.loads(pickle.dumps(rig))
    assert clone._model is None          # MuJoCo state is rebuilt lazily in the worker
    clone.prepare_layout(loaded.layout.marks[3], loaded.layout.cube, seed=5)
    assert clone.cube_pose() == pytest.approx(rig.cube_pose(), abs=1e-9)


def _episode(rig, policy, mark, cube, seed, fps=30, duration_s=12.0):
    ctx = EpisodeContext(mark=mark, cube=cube, seed=seed, fps=fps, duration_s=duration_s, task="")
    rig.prepare_layout(mark, cube, seed)
    policy.reset(ctx)
    for _ in range(round(fps * duration_s)):
        rig.act(policy.select_action(rig.observe(with_images=False)))
    return rig.end_episode(), rig._data.qpos.copy()


def test_same_seed_same_outcome(loaded):
    """Same trial twice, identical facts and final state: on a fresh rig, and on a rig that
    has just run another episode (episodes do not depend on what ran before them)."""
    from orchestrator.policies.scripted import ScriptedPickPolicy

    mark, cube = loaded.layout.mark("M07"), loaded.layout.cube
    results = []
    for history in (False, True):
        rig = SimRig(sim_profile(), fps=30, success=Success())
        if history:
            _episode(rig, ScriptedPickPolicy(aim_noise_mm=12.0), loaded.layout.mark("M18"), cube,
                     seed=99, duration_s=3.0)
        facts, qpos = _episode(rig, ScriptedPickPolicy(aim_noise_mm=8.0), mark, cube, seed=424242)
        results.append((facts, qpos))
    (f1, q1), (f2, q2) = results
    assert f1.physics_success == f2.physics_success
    assert f1.max_lift_m == f2.max_lift_m
    assert f1.time_to_success_s == f2.time_to_success_s
    assert f1.safety_events == f2.safety_events
    assert np.array_equal(q1, q2)


def test_render_settings_come_from_the_profile():
    from orchestrator.sim.scene import RenderSettings

    profile = sim_profile()
    assert SimRig(profile).render_settings() == RenderSettings()
    robot = profile.robot.model_validate({"type": "sim_so101", "mesh_cell_mm": 0, "key_light": True})
    custom = SimRig(profile.model_copy(update={"robot": robot})).render_settings()
    assert custom.mesh_cell_mm is None and custom.key_light is True


def test_rendering_does_not_change_the_physics(loaded):
    """An episode recorded on video ends exactly as the same episode run without images."""
    from orchestrator.policies.scripted import ScriptedPickPolicy

    rig = SimRig(sim_profile(), fps=30, success=Success())
    mark, cube = loaded.layout.mark("M12"), loaded.layout.cube
    finals = []
    for every in (0, 30):
        ctx = EpisodeContext(mark=mark, cube=cube, seed=5, fps=30, duration_s=12.0, task="")
        rig.prepare_layout(mark, cube, 5)
        policy = ScriptedPickPolicy(aim_noise_mm=12.0)
        policy.reset(ctx)
        for k in range(360):
            obs = rig.observe(with_images=bool(every) and k % every == 0)
            assert ("front" in obs) == (bool(every) and k % every == 0)
            rig.act(policy.select_action(obs))
        finals.append((rig.end_episode().max_lift_m, rig._data.qpos.copy()))
    assert finals[0][0] == finals[1][0]
    assert np.array_equal(finals[0][1], finals[1][1])
    rig.disconnect()
