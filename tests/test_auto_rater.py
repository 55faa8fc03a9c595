"""The `auto` rater: numpy forward kinematics against MuJoCo's, the lift-and-hold test on
recorded joints against the simulator's physics test, its place in the consensus, the
`--contested-first` order, and `judge --judge auto` in a fresh process without mujoco/torch."""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from orchestrator.judging.auto.rater import arm_moved, rate
from orchestrator.judging.blinding import CampaignSource
from orchestrator.judging.tui.app import JudgeApp
from orchestrator.sim import fk
from orchestrator.store.sqlite import CampaignStore
from support.evidence import accept_edits
from support.textual_screen import screen_text
from support.tiny import ROOT


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
        _, gap = kinematics.jaw_opening_pct(pct)
        assert fk.jaw_gap(pct) == pytest.approx(gap, abs=0.001)   # 10 %-step table, linear between


def lifted_pose(kinematics, height_m: float) -> np.ndarray:
    """Joint degrees putting the grasp point at (0.2, 0, height), gripper pointing down."""
    q, _ = kinematics.ik([0.2, 0.0, height_m], kinematics.down_rotation(0.0))
    return np.degrees(q)


def test_rate_on_synthetic_trajectories(kinematics):
    """Grasp at 3 cm, squeeze, lift the grasp point by 4 cm + seat +- 5 mm, hold for a while."""
    from orchestrator.judging.auto.rater import SEAT_M

    cube = 0.03
    holding = float(np.interp(cube * 0.95, fk.GAP_M, fk.GAP_PCT))   # jaws stopped by the cube
    grasp = lifted_pose(kinematics, 0.03)
    high = lifted_pose(kinematics, 0.03 + 0.04 + SEAT_M + 0.005)     # cube bottom 4.5 cm up
    low = lifted_pose(kinematics, 0.03 + 0.04 + SEAT_M - 0.005)      # 3.5 cm up
    t = np.arange(120) / 30.0                                         # 4 s at 30 Hz

    def run(lifted, held_steps, pct=holding, command=0.0, arm=grasp):
        state = np.tile(np.append(arm, pct), (120, 1))
        state[30:30 + held_steps, :5] = lifted                        # lifted from step 30
        action = state.copy()
        action[10:, 5] = command                                      # squeeze from step 10
        return rate(t, state, cube, 0.04, 1.0, action)

    assert run(high, 40).success                                      # 1.3 s held high
    assert not run(high, 25).success                                  # 0.8 s only
    assert not run(low, 90).success                                   # never high enough
    assert not run(high, 90, pct=0.0).success                         # shut: nothing between the jaws
    assert not run(high, 90, pct=60.0).success                        # open wide
    assert not run(high, 90, command=holding).success                 # at the cube's width, no squeeze
    assert run(high, 90).max_bottom_m == pytest.approx(0.045, abs=1e-4)
    # lifted before the squeeze: the height counts from where the squeeze began
    assert not run(high, 90, arm=high).success
    still = np.tile(np.append(grasp, 30.0), (90, 1))
    moved = still.copy()
    moved[45:, 2] += 3.0                                              # the elbow moved 3 degrees
    assert not arm_moved(still) and arm_moved(moved)
    assert rate(t[:90], still, cube, 0.04, 1.0).reason == "the arm never moved"


@pytest.fixture
def tiny(tiny_reference) -> Path:
    """The tiny simulated campaign, run once per session by a fresh process (read-only: the
    tests that write copy it)."""
    return tiny_reference


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

    from orchestrator.analysis.outcomes import outcomes_from_store

    copy = tmp_path / "c"
    shutil.copytree(tiny, copy)
    with CampaignStore.open_for_labels(copy) as store:
        physics = {e: j.label for e, j in store.latest_labels("physics").items()}
        human, abstained = sorted(physics)[:2]
        store.add_judgment(human, "alice", "failure" if physics[human] == "success" else "success")
        store.add_judgment(abstained, "auto", "unsure", note="planted: the rater abstains", source="auto")
        store.add_judgment(abstained, "alice", physics[abstained])
    with CampaignStore.open_readonly(copy) as store:
        advisory = outcomes_from_store(store)
    assert "alice" in advisory.label_source and "auto" not in advisory.label_source
    # alice alone decides her episode (against physics and auto)
    assert [o.success for o in advisory.outcomes if o.episode_id == human] == [physics[human] != "success"]
    with CampaignStore.open_for_labels(copy) as store:   # pre-registered as counted: it votes
        text = store.campaign()["protocol_text"].replace("judging: {judges: 1,",
                                                         "judging: {auto: counted, judges: 1,")
        assert "auto: counted" in text
        # as if the campaign had frozen this protocol: its text and its identity hash
        store.conn.execute("UPDATE campaign SET protocol_text = ?, protocol_sha256 = ?",
                           (text, hashlib.sha256(text.encode("utf-8")).hexdigest()))
        counted = outcomes_from_store(store)
    assert "auto" in counted.label_source and "alice" in counted.label_source
    # one against one on alice's episode: a tie is unsure, so no outcome
    assert [o.success for o in counted.outcomes if o.episode_id == human] == [None]
    assert counted.label_source.startswith("consensus of 1 human judge (alice) and the auto rater")
    # where the rater abstains (`unsure`), it casts no vote: alice's label decides (the audit's
    # queue sends exactly those episodes to people); before, her label against the abstention was a tie
    assert [o.success for o in counted.outcomes if o.episode_id == abstained] == [physics[abstained] == "success"]


def test_contested_first_orders_without_showing_auto(tiny, tmp_path):
    import shutil

    copy = tmp_path / "c"
    shutil.copytree(tiny, copy)
    with CampaignStore.open_for_labels(copy) as store:
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
    assert [e.id for e in CampaignSource(copy, "bob", contested_first=True).episodes()] == \
        [e.id for e in CampaignSource(copy, "bob").episodes()]   # bob's own labels do not count
    with CampaignStore.open_readonly(copy) as store:
        notes = {j.note for j in store.latest_labels("auto").values()}
    app = JudgeApp(source, renderer="halfcell", autoplay=False)

    async def session():   # nothing of auto's verdict on screen, before or after labelling
        async with app.run_test(size=(110, 32)) as pilot:
            await pilot.pause()
            for key in ("s", "f", ""):
                text = screen_text(app)
                assert "auto" not in text.lower() and not any(n in text for n in notes)
                if key:
                    await pilot.press(key)

    asyncio.run(session())
    assert set(ordered[:2]) == {ids[1], ids[4]} and sorted(ordered) == sorted(plain)
    assert [i for i in ordered[2:]] == [i for i in plain if i not in (ids[1], ids[4])]
    with pytest.raises(sqlite3.DatabaseError):                  # still sealed
        source.store.conn.execute("SELECT policy FROM trials").fetchall()
    source.close()


def test_judge_auto_in_a_fresh_process_without_mujoco_or_torch(tiny, tmp_path):
    import shutil

    copy = tmp_path / "c"
    shutil.copytree(tiny, copy)
    with CampaignStore.open_for_labels(copy) as store:
        before = {e: j.label for e, j in store.latest_labels("auto").items()}
        store.conn.execute("DELETE FROM judgments WHERE judge = 'auto'")
    accept_edits(copy)   # the campaign as if it had been run without the automatic rater
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


def test_binary_agreement_against_statsmodels():
    from statsmodels.stats.inter_rater import cohens_kappa
    from statsmodels.stats.proportion import proportion_confint

    from orchestrator.analysis.stats import binary_agreement

    rng = np.random.default_rng(5)
    for n in (12, 40, 100):
        truth = rng.random(n) < 0.6
        rater = np.where(rng.random(n) < 0.85, truth, ~truth)
        result = binary_agreement(list(rater), list(truth))
        table = np.array([[np.sum(rater & truth), np.sum(rater & ~truth)],
                          [np.sum(~rater & truth), np.sum(~rater & ~truth)]])
        assert [result["table"][k] for k in ("success_success", "success_failure", "failure_success",
                                             "failure_failure")] == table.ravel().tolist()
        assert result["kappa"] == pytest.approx(cohens_kappa(table).kappa, abs=1e-12)
        lo, hi = proportion_confint(int(np.trace(table)), n, method="wilson")
        pe = (table[0].sum() * table[:, 0].sum() + table[1].sum() * table[:, 1].sum()) / n ** 2
        assert result["kappa_ci95"] == pytest.approx([max(-1, (lo - pe) / (1 - pe)), min(1, (hi - pe) / (1 - pe))])
        assert result["kappa_ci95"][0] <= result["kappa"] <= result["kappa_ci95"][1]
    perfect = binary_agreement([True] * 31 + [False] * 9, [True] * 31 + [False] * 9)
    assert perfect["kappa"] == 1.0 and 0.7 < perfect["kappa_ci95"][0] < 0.8   # not a point


def test_report_json_rater_agreement_and_a_still_arm(tiny, tmp_path, capsys):
    import json
    import shutil

    from orchestrator.cli import main

    copy = tmp_path / "c"
    shutil.copytree(tiny, copy)
    with CampaignStore.open_for_labels(copy) as store:
        episodes = store.episodes()
        physics = {e: j.label for e, j in store.latest_labels("physics").items()}
        flip = {"success": "failure", "failure": "success"}
        for k, e in enumerate(sorted(physics)):    # alice errs once, bob never
            store.add_judgment(e, "alice", flip[physics[e]] if k == 0 else physics[e])
            store.add_judgment(e, "bob", physics[e])
    still = episodes[0]
    series = copy / still["files"]["timeseries"]
    with np.load(series) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["state"] = np.repeat(arrays["state"][:1], len(arrays["state"]), axis=0)
    np.savez(series, **arrays)
    capsys.readouterr()
    assert main(["report", str(copy), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {(r["rater"], r["reference"]): r for r in doc["rater_agreement"]}
    assert set(rows) == {("alice", "physics"), ("alice", "consensus"), ("bob", "physics"),
                         ("bob", "consensus"), ("auto", "physics"), ("auto", "consensus")}
    assert rows[("bob", "physics")]["kappa"] == 1.0 and rows[("alice", "physics")]["agreement"] == 5 / 6
    assert rows[("alice", "consensus")]["items"] == 6          # bob alone is alice's consensus
    assert rows[("auto", "physics")]["table"]["success_failure"] == 0
    assert doc["arm_never_moved"] == [{"episode": still["id"], "layout": doc["arm_never_moved"][0]["layout"],
                                       "policy": doc["arm_never_moved"][0]["policy"]}]
    source = CampaignSource(copy, "carol")
    assert [e.arm_still for e in source.episodes() if e.id == still["id"]] == [True]
    assert sum(e.arm_still for e in source.episodes()) == 1
    app = JudgeApp(source, renderer="halfcell", autoplay=False)

    async def session():
        async with app.run_test(size=(110, 32)) as pilot:
            await pilot.pause()
            app.go(app.session.episode(still["id"]))
            await pilot.pause()
            assert "the arm never moved" in " ".join(screen_text(app).split())
            app.go(next(e for e in app.session.order if e.id != still["id"]))
            await pilot.pause()
            assert "never moved" not in screen_text(app)

    asyncio.run(session())
    source.close()


def test_contested_first_on_a_bundle_is_refused_in_a_fresh_process(tiny, tmp_path):
    from orchestrator.cli import main

    assert main(["bundle", str(tiny), "--out", str(tmp_path / "b")]) == 0
    run = subprocess.run([sys.executable, "-m", "orchestrator", "judge", str(tmp_path / "b"), "--judge",
                          "eve", "--contested-first"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1
    assert "--contested-first needs the campaign" in run.stderr and "Traceback" not in run.stderr


def test_auto_abstains_where_its_error_band_straddles_the_test(kinematics):
    """The rater's own error band: the seat range SEAT_LOW_M-SEAT_HIGH_M and the hold's one-sided
    band (the true hold is never shorter than the certain one, HOLD_EARLY_S = 0, and at most
    HOLD_LATE_S longer: the jaws open after the command). A lift that ends inside the band of the
    success height, or a hold from hold_s - HOLD_LATE_S up to just under hold_s, is `unsure` (and
    labelled so); outside the band the verdict stands. Holds are (steps - 1) / 30 s."""
    from orchestrator.judging.auto.labels import verdict_label
    from orchestrator.judging.auto.rater import HOLD_EARLY_S, HOLD_LATE_S, SEAT_HIGH_M, SEAT_LOW_M, SEAT_M

    cube = 0.03
    holding = float(np.interp(cube * 0.95, fk.GAP_M, fk.GAP_PCT))
    grasp = lifted_pose(kinematics, 0.03)
    t = np.arange(150) / 30.0

    def run(rise_above_height_m, held_steps):
        lifted = lifted_pose(kinematics, 0.03 + 0.04 + rise_above_height_m)
        state = np.tile(np.append(grasp, holding), (150, 1))
        state[30:30 + held_steps, :5] = lifted
        action = state.copy()
        action[10:, 5] = 0.0
        return rate(t, state, cube, 0.04, 1.0, action)

    mid_seat = (SEAT_LOW_M + SEAT_HIGH_M) / 2
    cases = {
        "inside the seat band, held long": (run(mid_seat, 60), "unsure"),
        "above the deepest seat, held long": (run(SEAT_HIGH_M + 0.002, 60), "success"),
        "below the shallowest seat": (run(SEAT_LOW_M - 0.002, 60), "failure"),
        "held exactly hold_s": (run(SEAT_HIGH_M + 0.002, 31), "success"),
        "held hold_s - a step": (run(SEAT_HIGH_M + 0.002, 30), "unsure"),
        "held hold_s + a step": (run(SEAT_HIGH_M + 0.002, 32), "success"),
    }
    shortest = math.ceil((1.0 - HOLD_LATE_S) * 30 - 1e-9) + 1      # the fewest steps whose hold + HOLD_LATE_S >= 1 s
    cases[f"held just hold_s - {HOLD_LATE_S:g} s"] = (run(SEAT_HIGH_M + 0.002, shortest), "unsure")
    cases[f"held hold_s - {HOLD_LATE_S:g} s - under a step"] = (run(SEAT_HIGH_M + 0.002, shortest - 1), "failure")
    for name, (verdict, expected) in cases.items():
        assert verdict_label(verdict)[0] == expected, (name, verdict)
    assert len(cases) == 8 and HOLD_EARLY_S == 0.0 and 0.1 <= HOLD_LATE_S <= 0.2
    assert "unsure" in cases["inside the seat band, held long"][0].reason
    # the old point estimate decided the band's cases (the seat of the demo, 4.3 mm)
    assert SEAT_LOW_M < SEAT_M < SEAT_HIGH_M and cases["inside the seat band, held long"][0].success is False


@pytest.mark.slow
def test_near_threshold_campaign_auto_is_right_where_it_rates(tmp_path):
    """protocols/sim_near.yaml's policies (lifts within a few mm of the success height, releases
    within a fraction of a second of the hold) on the tiny layout: `auto` is right on >= 95 % of
    the episodes it rates, against physics, and abstains on at most half (the full 80-episode
    campaign: bench/auto_rater.py)."""
    import yaml

    from orchestrator.cli import main
    from orchestrator.store.sqlite import CampaignStore
    from support.tiny import DATA, RIG

    spec = yaml.safe_load((Path(__file__).parents[1] / "protocols" / "sim_near.yaml").read_text())
    spec["layout"] = str(DATA / "tiny_layout.yaml")
    protocol = tmp_path / "near.yaml"
    protocol.write_text(yaml.safe_dump(spec))
    out = tmp_path / "c"
    assert main(["run", str(protocol), "--rig", str(RIG), "--out", str(out), "--workers", "1"]) == 0
    with CampaignStore.open_readonly(out) as store:
        physics = {e["id"]: bool(e["physics_success"]) for e in store.episodes()}
        auto = {ep: j.label for ep, j in store.latest_labels("auto").items()}
    assert len(physics) == 12 and set(auto) == set(physics)
    rated = [ep for ep, label in auto.items() if label != "unsure"]
    right = sum((auto[ep] == "success") == physics[ep] for ep in rated)
    assert right >= 0.95 * len(rated) and len(rated) >= len(physics) / 2, (right, len(rated), auto)
    assert 0 < len(physics) - len(rated)          # near the threshold it does abstain
