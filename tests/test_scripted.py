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
    tilted = 0
    for mark in loaded.layout.marks:
        plan = plan_pick(mark.x, mark.y, cube.size_m, mark.yaw_deg)
        grasp = plan.descent[-1]
        pos, rot = kin.fk(np.radians(np.append(grasp[:5], 0.0)))
        middle = _opening_middle(kin, pos, rot, plan.open_pct)   # on the mark, or where a tilt centres it
        want = (mark.x + plan.centre_xy_m[0], mark.y + plan.centre_xy_m[1])
        assert math.hypot(middle[0] - want[0], middle[1] - want[1]) < 1e-3, mark.id
        tilted += plan.tilt_deg > 0 and math.hypot(*plan.centre_xy_m) > 1e-3
        assert pos[2] - kin.tip_drop(rot) > 0.004, mark.id        # fixed jaw tip above the table
        lifted, _ = kin.fk(np.radians(np.append(plan.lift[-1][:5], 0.0)))
        assert lifted[2] - pos[2] > 0.055, mark.id                 # lifts >= 4 cm + margin
    assert tilted >= 4      # the far marks: the case the centring is for


def _opening_middle(kin, site, rot, open_pct):
    """The middle of the open jaws (world, metres): the grasp site is the middle at `OPEN_PCT`."""
    from orchestrator.policies.scripted import OPEN_PCT

    return site + (kin.jaw_opening_pct(open_pct)[0] - kin.jaw_opening_pct(OPEN_PCT)[0]) * rot[:, 0]


# the demo's scripted pick (None: its clearance) and the reset's (5 mm); a turned cube, whose
# jaw axis is off the arm's plane (the lean is less); a bigger cube
@pytest.mark.parametrize("clearance_mm, yaw_deg, size", [(None, 0.0, 0.03), (5.0, 0.0, 0.03), (5.0, 35.0, 0.03),
                                                         (5.0, 0.0, 0.045), (None, 20.0, 0.045)])
def test_tilted_jaws_clear_the_cube_by_the_clearance_on_both_sides(clearance_mm, yaw_deg, size):
    """Where straight down is out of reach the gripper tilts, and its jaw faces lean while the
    cube's faces stand upright. In the grasp pose, over the height the jaws pass (their tips to
    the cube's top), each face stays at least the clearance (less 1 mm) off the cube: at 0.30 m
    the reset's plan once brought the lower jaw's tip 3 mm inside the cube's face, and it pushed
    the cube out of reach."""
    from orchestrator.policies.scripted import NOMINAL_CUBE_M, OPEN_PCT
    from orchestrator.sim.kinematics import arm_kinematics

    kin = arm_kinematics()
    _, nominal_gap = kin.jaw_opening_pct(OPEN_PCT)
    clearance = (nominal_gap - NOMINAL_CUBE_M) / 2 if clearance_mm is None else clearance_mm / 1000
    tilts = set()
    for radius in np.arange(0.16, 0.305, 0.01):
        for bearing in (-15.0, 0.0, 15.0):
            x, y = radius * math.cos(math.radians(bearing)), radius * math.sin(math.radians(bearing))
            plan = plan_pick(x, y, size, yaw_deg, clearance_m=None if clearance_mm is None else clearance)
            assert plan.ik_error < 1e-3, (x, y)
            site, rot = kin.fk(np.radians(np.append(plan.descent[-1][:5], 0.0)))
            _, gap = kin.jaw_opening_pct(plan.open_pct)
            middle = _opening_middle(kin, site, rot, plan.open_pct)
            along = np.array([math.cos(math.radians(plan.jaw_yaw_deg)), math.sin(math.radians(plan.jaw_yaw_deg)), 0.0])
            tip = site[2] - kin.tip_drop(rot)
            corners = [np.array([x, y, 0.0]) + u * along + np.array([0, 0, h])
                       for u in (-size / 2, size / 2) for h in (tip, size)]
            across = [float((c - middle) @ rot[:, 0]) for c in corners]
            assert min(across) >= -gap / 2 + clearance - 1e-3, (x, y, plan.tilt_deg, min(across), gap)
            assert max(across) <= gap / 2 - clearance + 1e-3, (x, y, plan.tilt_deg, max(across), gap)
            tilts.add(plan.tilt_deg)
    assert 0.0 in tilts and len(tilts) >= 3, tilts   # straight down near the base, tilted farther out


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
    clearance = kin.jaw_opening_pct(OPEN_PCT)[1] - 0.03
    for size in (0.015, 0.045, 0.06):
        pct, shift = opening_for(size)
        assert kin.jaw_opening_pct(pct)[1] - size == pytest.approx(clearance, abs=2e-4)
        assert (shift > 0) == (size > 0.03)
