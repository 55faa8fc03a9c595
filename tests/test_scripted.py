"""The scripted top-down pick: aim noise from the seed, IK from the arm model, picks in the sim."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from orchestrator.design.protocol import Mark, ScriptedPolicySpec, load_protocol
from orchestrator.policies.base import EpisodeContext
from orchestrator.rigs.profile import STATE_KEYS
from support.repo import SIM_PROTOCOL

os.environ.setdefault("MUJOCO_GL", "egl")

from orchestrator.policies.factory import make_policy  # noqa: E402
from orchestrator.policies.scripted import ScriptedPickPolicy, aim_noise, plan_pick  # noqa: E402


@pytest.fixture(scope="module")
def loaded():
    return load_protocol(SIM_PROTOCOL)


def test_aim_noise_is_seeded_gaussian_per_axis():
    assert aim_noise(7, 12.0) == aim_noise(7, 12.0)
    assert aim_noise(7, 12.0) != aim_noise(8, 12.0)
    assert aim_noise(7, 0.0) == (0.0, 0.0)
    draws = np.array([aim_noise(s, 12.0) for s in range(4000)])
    assert draws.std(axis=0) == pytest.approx([0.012, 0.012], rel=0.06)
    assert abs(np.corrcoef(draws.T)[0, 1]) < 0.06


def test_plan_reaches_every_mark_from_the_arm_model_alone(loaded):
    """IK on the arm model puts the grasp point on the mark, jaws above the table."""
    from orchestrator.sim.kinematics import arm_kinematics

    kin = arm_kinematics()
    cube = loaded.layout.cube
    for mark in loaded.layout.marks:
        plan = plan_pick(mark.x, mark.y, cube.size_m, mark.yaw_deg)
        grasp = plan.descent[-1]
        pos, rot = kin.fk(np.radians(np.append(grasp[:5], 0.0)))
        assert math.hypot(pos[0] - mark.x, pos[1] - mark.y) < 1e-3, mark.id
        assert pos[2] - kin.tip_drop(rot) > 0.004, mark.id        # fixed jaw tip above the table
        lifted, _ = kin.fk(np.radians(np.append(plan.lift[-1][:5], 0.0)))
        assert lifted[2] - pos[2] > 0.055, mark.id                 # lifts >= 4 cm + margin


def test_actions_are_rig_units_and_start_from_the_observed_pose(loaded):
    policy = make_policy("A", ScriptedPolicySpec(type="scripted", aim_noise_mm=3), loaded)
    assert isinstance(policy, ScriptedPickPolicy) and policy.needs_images is False
    mark = loaded.layout.mark("M10")
    policy.reset(EpisodeContext(mark=mark, cube=loaded.layout.cube, seed=11, fps=30,
                                duration_s=12.0, task=""))
    start = {"shoulder_pan.pos": 5.0, "shoulder_lift.pos": -95.0, "elbow_flex.pos": 90.0,
             "wrist_flex.pos": 10.0, "wrist_roll.pos": 0.0, "gripper.pos": 2.0}
    first = policy.select_action(start)       # a plain dict: no simulator state is needed
    assert list(first) == list(STATE_KEYS)
    assert first == pytest.approx(start, abs=0.5)
    actions = [policy.select_action(start) for _ in range(359)]
    arr = np.array([[a[k] for k in STATE_KEYS] for a in actions])
    assert np.all(arr[:, 5] >= 0) and np.all(arr[:, 5] <= 100)
    assert np.all(np.abs(arr[:, :5]) <= 160)
    assert arr[:, 5].max() > 30 and arr[-1, 5] < 1           # opens, then closes and keeps closed


@pytest.mark.slow
def test_zero_noise_picks_at_least_19_of_20_marks(loaded):
    """The scripted pick with exact aim in the simulation (physics only, no rendering)."""
    from orchestrator.rigs.sim import SimRig
    from support.sim_profile import sim_profile

    rig = SimRig(sim_profile(), fps=loaded.protocol.episode.fps, success=loaded.protocol.success)
    policy = ScriptedPickPolicy(aim_noise_mm=0.0)
    fps, duration = loaded.protocol.episode.fps, loaded.protocol.episode.duration_s
    outcomes, events = {}, {}
    for i, mark in enumerate(loaded.layout.marks):
        ctx = EpisodeContext(mark=mark, cube=loaded.layout.cube, seed=i, fps=fps,
                             duration_s=duration, task=loaded.protocol.task)
        rig.prepare_layout(mark, ctx.cube, ctx.seed)
        policy.reset(ctx)
        for _ in range(round(fps * duration)):
            rig.act(policy.select_action(rig.observe(with_images=False)))
        facts = rig.end_episode()
        outcomes[mark.id] = facts.physics_success
        events[mark.id] = facts.safety_events
        if facts.physics_success:
            assert facts.max_lift_m >= 0.04 and facts.time_to_success_s < duration
    assert sum(outcomes.values()) >= 19, outcomes
    assert sum(1 for e in events.values() if e) <= 1, events   # no table hits, no limit hits


def test_aiming_25mm_off_misses(loaded):
    """The outcome depends on the aim: a pick aimed 25 mm beside the cube does not lift it."""
    from orchestrator.rigs.sim import SimRig
    from support.sim_profile import sim_profile

    rig = SimRig(sim_profile(), fps=30, success=loaded.protocol.success)
    cube = loaded.layout.cube
    true_mark = loaded.layout.mark("M10")
    aimed = Mark(id="off", x=true_mark.x + 0.025, y=true_mark.y, yaw_deg=0.0)
    policy = ScriptedPickPolicy(aim_noise_mm=0.0)
    rig.prepare_layout(true_mark, cube, 1)
    policy.reset(EpisodeContext(mark=aimed, cube=cube, seed=1, fps=30, duration_s=12.0, task=""))
    for _ in range(360):
        rig.act(policy.select_action(rig.observe(with_images=False)))
    facts = rig.end_episode()
    assert facts.physics_success is False and facts.max_lift_m < 0.04


def test_opening_scales_with_the_cube():
    """Other cube sizes get the 3 cm cube's clearance, centred between the jaws."""
    from orchestrator.policies.scripted import OPEN_PCT, opening_for
    from orchestrator.sim.kinematics import arm_kinematics

    kin = arm_kinematics()
    assert opening_for(0.03) == (OPEN_PCT, 0.0)
    gap = lambda pct: kin.jaw_opening(kin.units.from_rig(np.array([0, 0, 0, 0, 0, pct]))[5])[1]  # noqa: E731
    clearance = gap(OPEN_PCT) - 0.03
    for size in (0.015, 0.045, 0.06):
        pct, shift = opening_for(size)
        assert gap(pct) - size == pytest.approx(clearance, abs=2e-4)
        assert (shift > 0) == (size > 0.03)
