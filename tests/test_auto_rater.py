"""The `auto` rater: numpy forward kinematics against MuJoCo's, the lift-and-hold test on
recorded joints against the simulator's physics test, its place in the consensus, the
`--contested-first` order, and `judge --judge auto` in a fresh process without mujoco/torch."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from orchestrator.auto import fk
from orchestrator.auto.rater import arm_moved, rate
from orchestrator.blinding import CampaignSource
from orchestrator.store import CampaignStore

from support.tiny import ROOT, run_cli


@pytest.fixture(scope="module")
def kinematics():
    from orchestrator.sim.kinematics import arm_kinematics

    return arm_kinematics()


def test_numpy_fk_equals_mujoco(kinematics):
    rng = np.random.default_rng(3)
    degrees = rng.uniform(np.degrees(kinematics.lo), np.degrees(kinematics.hi), size=(40, 5))
    ours, rotations = fk.grasp_pose(np.hstack([degrees, np.full((40, 1), 50.0)]))
    for k, q in enumerate(degrees):
        position, rotation = kinematics.fk(np.append(np.radians(q), 0.0))
        assert ours[k] == pytest.approx(position, abs=1e-6)
        assert rotations[k] == pytest.approx(rotation, abs=1e-6)


def test_jaw_gap_follows_the_model(kinematics):
    for pct in np.random.default_rng(4).uniform(0, 100, 15):
        _, gap = kinematics.jaw_opening(kinematics.units.from_rig(np.array([0, 0, 0, 0, 0, pct]))[5])
        assert fk.jaw_gap(pct) == pytest.approx(gap, abs=0.001)   # 10 %-step table, linear between


def lifted_pose(kinematics, height_m: float) -> np.ndarray:
    """Joint degrees putting the grasp point at (0.2, 0, height), gripper pointing down."""
    q, _ = kinematics.ik([0.2, 0.0, height_m], kinematics.down_rotation(0.0))
    return np.degrees(q)


def test_rate_on_synthetic_trajectories(kinematics):
    cube = 0.03
    holding_pct = float(np.interp(cube, fk.GAP_M, fk.GAP_PCT))   # jaws at the cube's width
    high = lifted_pose(kinematics, 0.04 + cube / 2 + 0.01)       # cube bottom 5 cm up
    low = lifted_pose(kinematics, 0.04 + cube / 2 - 0.01)        # 3 cm up
    t = np.arange(90) / 30.0                                      # 3 s at 30 Hz

    def run(pose, pct, steps_held):
        state = np.tile(np.append(low, pct), (90, 1))
        state[:steps_held] = np.append(pose, pct)
        return rate(t, state[::-1].copy(), cube, 0.04, 1.0)

    assert run(high, holding_pct, 40).success                    # 1.3 s held high
    assert not run(high, holding_pct, 25).success                # 0.8 s only
    assert not run(low, holding_pct, 90).success                 # never high enough
    assert not run(high, 0.0, 90).success                        # shut: nothing between the jaws
    assert not run(high, 60.0, 90).success                       # open wide
    still = np.tile(np.append(high, 30.0), (90, 1))
    moved = still.copy()
    moved[45:, 2] += 3.0                                          # the elbow moved 3 degrees
    assert not arm_moved(still) and arm_moved(moved)
    assert rate(t, still, cube, 0.04, 1.0).reason == "the arm never moved"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("auto") / "tiny"
    assert run_cli(out, "--workers", "1") == 0
    return out


def test_runner_stores_auto_labels_that_agree_with_physics(tiny):
    with CampaignStore.open_readonly(tiny) as store:
        auto = {e: j.label for e, j in store.latest_labels("auto").items()}
        physics = {e: j.label for e, j in store.latest_labels("physics").items()}
        notes = [j.note for j in store.latest_labels("auto").values()]
    assert sorted(auto) == sorted(physics) and len(auto) == 6
    assert auto == physics
    assert {"success", "failure"} <= set(physics.values())       # both outcomes occur
    assert all(notes)


def test_auto_is_advisory_unless_counted(tiny, tmp_path):
    import shutil

    from orchestrator.outcomes import outcomes_from_store

    copy = tmp_path / "c"
    shutil.copytree(tiny, copy)
    with CampaignStore.open_readonly(copy) as store:
        physics = {e: j.label for e, j in store.latest_labels("physics").items()}
        human = sorted(physics)[0]
        store.add_judgment(human, "alice", "failure" if physics[human] == "success" else "success")
    with CampaignStore.open_readonly(copy) as store:
        advisory = outcomes_from_store(store)
    assert "alice" in advisory.label_source and "auto" not in advisory.label_source
    # alice alone decides her episode (against physics and auto)
    assert [o.success for o in advisory.outcomes if o.episode_id == human] == [physics[human] != "success"]
    with CampaignStore.open_readonly(copy) as store:   # pre-registered as counted: it votes
        text = store.campaign()["protocol_text"].replace("judging: {judges: 1,",
                                                         "judging: {auto: counted, judges: 1,")
        assert "auto: counted" in text
        store.conn.execute("UPDATE campaign SET protocol_text = ?", (text,))
        counted = outcomes_from_store(store)
    assert "auto" in counted.label_source and "alice" in counted.label_source
    # one against one on alice's episode: a tie is unsure, so no outcome
    assert [o.success for o in counted.outcomes if o.episode_id == human] == [None]


def test_contested_first_orders_without_showing_auto(tiny, tmp_path):
    import shutil

    copy = tmp_path / "c"
    shutil.copytree(tiny, copy)
    with CampaignStore.open_readonly(copy) as store:
        auto = {e: j.label for e, j in store.latest_labels("auto").items()}
        ids = sorted(auto)
        flip = {"success": "failure", "failure": "success"}
        store.add_judgment(ids[1], "bob", flip[auto[ids[1]]])     # contested
        store.add_judgment(ids[4], "bob", flip[auto[ids[4]]])     # contested
        store.add_judgment(ids[2], "bob", auto[ids[2]])           # agreed
        store.add_judgment(ids[3], "bob", "unsure")               # not a disagreement
    plain = [e.id for e in CampaignSource(copy, "carol").episodes()]
    source = CampaignSource(copy, "carol", contested_first=True)
    ordered = [e.id for e in source.episodes()]
    assert set(ordered[:2]) == {ids[1], ids[4]} and sorted(ordered) == sorted(plain)
    assert [i for i in ordered[2:]] == [i for i in plain if i not in (ids[1], ids[4])]
    with pytest.raises(sqlite3.DatabaseError):                  # still sealed
        source.store.conn.execute("SELECT policy FROM trials").fetchall()
    source.close()
    assert [e.id for e in CampaignSource(copy, "bob", contested_first=True).episodes()] == \
        [e.id for e in CampaignSource(copy, "bob").episodes()]   # bob's own labels do not count


def test_judge_auto_in_a_fresh_process_without_mujoco_or_torch(tiny, tmp_path):
    import shutil

    copy = tmp_path / "c"
    shutil.copytree(tiny, copy)
    with CampaignStore.open_readonly(copy) as store:
        before = {e: j.label for e, j in store.latest_labels("auto").items()}
        store.conn.execute("DELETE FROM judgments WHERE judge = 'auto'")
    blocked = tmp_path / "blocked"
    for name in ("torch", "mujoco", "lerobot"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(f"raise ImportError('{name} is blocked')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COV_CORE_SOURCE")}
    env["PYTHONPATH"] = str(blocked)
    run = subprocess.run([sys.executable, "-m", "orchestrator", "judge", str(copy), "--judge", "auto"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "judge auto: rated 6 episodes (0 were rated already)"
    with CampaignStore.open_readonly(copy) as store:
        assert {e: j.label for e, j in store.latest_labels("auto").items()} == before
    again = subprocess.run([sys.executable, "-m", "orchestrator", "judge", str(copy), "--judge", "auto"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert "rated 0 episodes (6 were rated already)" in again.stdout
