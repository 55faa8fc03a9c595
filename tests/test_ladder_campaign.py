"""The progress ladder in a campaign: the runner stores the joints' ladder beside
the `auto` label and the simulator's beside the physics label, in the episode's transaction, so
both survive a resume; `judge --judge auto` adds it to an older campaign; `orchestrator report`
(a fresh process) shows the funnel per policy in Markdown, HTML and JSON, checked against the
store read with sqlite3 alone."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.store import chain
from orchestrator.store.sqlite import CampaignStore
from support.cli import run_module

STAGES = ("reached", "grasped", "lifted", "held")   # the oracle's own copy of the ladder's words


@pytest.fixture(scope="module")
def resumed(tiny_resumed) -> Path:
    """The tiny campaign run 2 episodes, stopped, then resumed to its end (one episode at a time:
    `tiny_resumed`, shared with test_report_timing.py)."""
    return tiny_resumed[0]


def _rows(campaign: Path) -> list[tuple]:
    """(episode, policy, mark, judge, stage, stage_times JSON, physics_success, time_to_success_s)
    of every live machine label, read with sqlite3 (not the project's store)."""
    db = sqlite3.connect(campaign / "campaign.db")
    try:
        return db.execute(
            "SELECT j.episode_id, t.policy, t.mark_id, j.judge, j.stage, j.stage_times, e.physics_success,"
            " e.time_to_success_s FROM judgments j JOIN episodes e ON e.id = j.episode_id"
            " JOIN trials t ON t.slot = e.slot WHERE j.retracted_at IS NULL AND j.judge IN ('auto', 'physics')"
            " ORDER BY j.id").fetchall()
    finally:
        db.close()


def test_both_ladders_are_stored_beside_their_labels_across_a_resume(resumed):
    rows = _rows(resumed)
    with sqlite3.connect(resumed / "campaign.db") as db:
        sessions = db.execute("SELECT count(*) FROM sessions").fetchone()[0]
        episodes = db.execute("SELECT count(*) FROM episodes").fetchone()[0]
    assert sessions == 2 and episodes == 6
    assert len(rows) == 2 * episodes                            # count guard: auto and physics, every episode
    for episode, _, _, judge, stage, times, physics, to_success in rows:
        ladder = json.loads(times)
        assert list(ladder) == list(STAGES), (episode, judge)
        reached = [s for s in STAGES if ladder[s] is not None]
        assert reached == list(STAGES[:len(reached)])           # monotone: no stage without the ones below
        assert stage == (reached[-1] if reached else "none")
        assert [ladder[s] for s in reached] == sorted(ladder[s] for s in reached)
        if judge == "physics":                                  # held is the physics test's success
            assert (ladder["held"] is not None) == bool(physics)
            assert ladder["held"] == (pytest.approx(to_success) if physics else None)
    assert any(json.loads(r[5])["held"] is not None for r in rows)          # positive controls: a success ...
    assert any(r[4] in ("reached", "grasped", "lifted") for r in rows if r[3] == "physics") or \
        any(r[4] == "none" for r in rows)                                    # ... and one that fell short


def test_the_physics_label_carries_the_simulators_truth(resumed):
    """Every physics label's note gives the simulator's highest cube bottom (the episode row's
    max_lift_m, to the note's 0.01 mm) and its longest hold, so the `auto` rater's rules are
    checked against the truth per episode (bench/auto_rater.py): the hold reaches the protocol's
    1 s exactly on the physics successes. Parsed here by the test's own pattern, and read back by
    `records.physics_truth` the same."""
    import re

    from orchestrator.store.records import physics_truth

    with sqlite3.connect(resumed / "campaign.db") as db:
        rows = db.execute("SELECT j.note, e.max_lift_m, e.physics_success FROM judgments j JOIN episodes e"
                          " ON e.id = j.episode_id WHERE j.judge = 'physics' AND j.retracted_at IS NULL").fetchall()
    assert len(rows) == 6                                        # count guard
    for note, lift, success in rows:
        found = re.fullmatch(r"physics: cube bottom up to ([0-9.]+) mm; longest hold ([0-9.]+) s", note or "")
        assert found, note
        assert float(found[1]) == pytest.approx(1000 * lift, abs=0.006)
        assert (float(found[2]) >= 1.0 - 1e-9) == bool(success), note
        assert physics_truth(note) == pytest.approx((float(found[1]) / 1000, float(found[2])))
    assert {bool(r[2]) for r in rows} == {True, False}          # positive controls: a hold of 1 s and a shorter one
    assert physics_truth(None) is None and physics_truth("held 1.2 s") is None


def test_judge_auto_gives_an_older_campaign_its_ladder(resumed, tmp_path, capsys):
    """An older campaign's `auto` labels have no ladder (planted: NULL, re-chained as the tool
    writes); `orchestrator judge CAMPAIGN --judge auto` rates those episodes again, the new
    label carries the ladder, the old one is retracted, the chain verifies."""
    import shutil

    old = Path(shutil.copytree(resumed, tmp_path / "old"))
    with CampaignStore.open_for_run(old) as store, store.transaction() as c:
        for (label_id,) in c.execute("SELECT id FROM judgments WHERE judge = 'auto'").fetchall():
            with chain.change(c, "judgments", label_id):
                c.execute("UPDATE judgments SET stage = NULL, stage_times = NULL WHERE id = ?", (label_id,))
    before = {r[0]: r[5] for r in _rows(resumed) if r[3] == "auto"}
    assert main(["judge", str(old), "--judge", "auto"]) == 0
    assert "rated 6 episodes (0 were rated already)" in capsys.readouterr().out
    after = {r[0]: r[5] for r in _rows(old) if r[3] == "auto"}
    assert after == before and len(after) == 6                  # the same ladders as the runner stored
    assert main(["judge", str(old), "--judge", "auto"]) == 0   # nothing left to do
    assert "rated 0 episodes (6 were rated already)" in capsys.readouterr().out
    with CampaignStore.open_readonly(old) as store:
        assert store.evidence.intact
        assert len(store.judgments("auto", include_retracted=True)) == 12


@pytest.mark.subprocess
def test_report_shows_the_funnel_per_policy_in_every_format(resumed, tmp_path):
    out = {}
    for fmt in ("md", "html", "json"):
        done = run_module("report", resumed, "--format", fmt, "--out", tmp_path / f"r.{fmt}")
        assert done.code == 0, done.err
        out[fmt] = (tmp_path / f"r.{fmt}").read_text()
    for fmt in ("md", "html"):
        assert "Progress ladder (recorded; no decision uses it)" in out[fmt], fmt
        assert "pre-registered later" in out[fmt] and "median time" in out[fmt], fmt
    doc = json.loads(out["json"])["progress_ladder"]
    assert "no decision" in doc["note"] and doc["unit"] == "mark"
    rows = _rows(resumed)
    checked = 0
    for row in doc["rows"]:
        mine = [r for r in rows if r[3] == row["source"] and r[1] == row["policy"]]
        assert row["episodes"] == len(mine) == 3 and row["marks"] == 3
        for k, stage in enumerate(STAGES):
            reached = [json.loads(r[5])[stage] for r in mine if json.loads(r[5])[stage] is not None]
            cell = row["stages"][stage]
            assert cell["reached"] == len(reached) and cell["rate"] == pytest.approx(len(reached) / 3)
            assert cell["ci95"][0] <= cell["rate"] <= cell["ci95"][1]
            median = sorted(reached)[len(reached) // 2] if len(reached) % 2 else \
                (sum(sorted(reached)[len(reached) // 2 - 1:len(reached) // 2 + 1]) / 2 if reached else None)
            assert cell["median_time_s"] == (pytest.approx(median) if reached else None)
            checked += 1
            assert k < 4
    assert {(r["source"], r["policy"]) for r in doc["rows"]} == {(s, p) for s in ("auto", "physics")
                                                                 for p in ("A", "B")}
    assert checked == 16                                        # 2 sources x 2 policies x 4 stages
