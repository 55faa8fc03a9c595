"""`orchestrator view`: a Rerun recording of episodes, read back with the Rerun SDK; refused while
the campaign is blinded unless its owner says `--unblinded`.

The campaign is the small one of `tests/support/export_campaign.py` (3 marks x 2 policies, 10 fps x
1 s; `front` at 10 fps, `wrist` at 5 fps). Each CLI path runs as `python -m orchestrator` on a
campaign written by this process."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from orchestrator.rigs.profile import STATE_KEYS
from orchestrator.store.sqlite import CampaignStore
from support.cli import run_module
from support.export_campaign import STEPS, label_all, make_campaign
from support.requires import require_module


@pytest.fixture(autouse=True)
def rerun_installed():
    """The `rerun` extra: missing, every test here fails with the install line (never skips);
    checked when a test runs, so a core install still collects the file (tests/test_lanes.py)."""
    require_module("rerun")


def read_rrd(path: Path) -> tuple[Counter, set[str], list]:
    """(rows per entity on the timelines, the static entities, the static chunks) of an .rrd."""
    from rerun.experimental import RrdReader

    rows: Counter = Counter()
    static: set[str] = set()
    chunks = []
    for chunk in RrdReader(path).stream():
        if chunk.is_static:
            static.add(chunk.entity_path)
            chunks.append(chunk)
        else:
            rows[chunk.entity_path] += chunk.num_rows
    return rows, static, chunks


@pytest.fixture(scope="module")
def sim_campaign(tmp_path_factory) -> Path:
    return make_campaign(tmp_path_factory.mktemp("sim"))


def first_trial(campaign: Path):
    store = CampaignStore.open_readonly(campaign)
    try:
        return next(t for t in store.trials() if t.slot == 0)
    finally:
        store.close()


def test_view_saves_a_recording_with_every_episode_signal(sim_campaign, tmp_path):
    out = tmp_path / "trial1.rrd"
    result = run_module("view", sim_campaign, "--trial", "1", "--save", out)
    assert result.code == 0, result.err
    assert "1 episode(s)" in result.out and "saved to" in result.out
    assert not [p for p in tmp_path.iterdir() if p.name != out.name]       # no partial left
    trial = first_trial(sim_campaign)
    prefix = f"/trial_01_{trial.policy}"
    rows, static, chunks = read_rrd(out)
    assert rows[f"{prefix}/cameras/front"] == STEPS                        # 10 fps: one frame a step
    assert rows[f"{prefix}/cameras/wrist"] == STEPS // 2                   # 5 fps
    assert {f"{prefix}/cameras/front", f"{prefix}/cameras/wrist", f"{prefix}/labels",
            f"{prefix}/telemetry/timing"} <= static
    assert f"{prefix}/telemetry/frame_age_ms/front" not in rows            # NaN: the rig did not report it
    joints = [k.removesuffix(".pos") for k in STATE_KEYS]
    checked = 0
    for joint in joints:
        for column in ("state", "action", "sent"):
            assert rows[f"{prefix}/joints/{joint}/{column}"] == STEPS, (joint, column)
            checked += 1
    assert checked == 18
    for name in ("cube_bottom_m", "min_height_m", "hold_s", "hold_needed_s"):
        assert rows[f"{prefix}/success/{name}"] == STEPS, name
    assert rows[f"{prefix}/events"] == 1                                    # trial 1's safety event
    assert not any(entity.startswith("/trial_02") for entity in rows)      # only the trial asked for
    text = " ".join(str(c.to_record_batch()) for c in chunks if c.entity_path == f"{prefix}/labels")
    assert "physics" in text and f"policy {trial.policy}" in text
    timing = " ".join(str(c.to_record_batch()) for c in chunks if c.entity_path == f"{prefix}/telemetry/timing")
    assert "period_p50_ms" in timing and "policy_p50_ms" in timing


def test_view_of_a_mark_holds_both_policies(sim_campaign, tmp_path):
    out = tmp_path / "m01.rrd"
    result = run_module("view", sim_campaign, "--mark", "M01", "--save", out)
    assert result.code == 0, result.err
    rows, _, _ = read_rrd(out)
    prefixes = {entity.split("/")[1] for entity in rows if entity.startswith("/trial_")}
    assert len(prefixes) == 2 and {p.rsplit("_", 1)[1] for p in prefixes} == {"A", "B"}


def test_view_refuses_while_blinded_unless_the_owner_says_unblinded(tmp_path):
    campaign = make_campaign(tmp_path / "hw", simulated=False)             # nobody judged yet
    out = tmp_path / "x.rrd"
    refused = run_module("view", campaign, "--trial", "1", "--save", out)
    assert refused.code == 2 and len(refused.err_lines) == 1, refused.err
    assert "still blinded" in refused.err and "--unblinded" in refused.err
    assert not out.exists()
    if os.geteuid() == 0:                                                  # root can give the store away
        db = campaign / "campaign.db"
        owner = db.stat().st_uid
        os.chown(db, owner + 4242, -1)                                     # someone else's campaign
        try:
            other = run_module("view", campaign, "--trial", "1", "--save", out, "--unblinded")
        finally:
            os.chown(db, owner, -1)
        assert other.code == 2 and "only the campaign's owner" in other.err and not out.exists(), other.err
    allowed = run_module("view", campaign, "--trial", "1", "--save", out, "--unblinded")   # positive control
    assert allowed.code == 0 and out.is_file(), allowed.err


def test_a_simulated_campaign_is_viewable_once_complete_whether_or_not_a_judge_has_started(tmp_path):
    """One rule: without --judge a simulated campaign's labels are physics' (it was viewable
    before any judge started and blinded once one had labelled an episode)."""
    campaign = make_campaign(tmp_path / "sim")
    with CampaignStore.open_for_labels(campaign) as store:
        store.add_judgment(store.episodes()[0]["id"], "alice", "success")   # a judge has started
    out = tmp_path / "x.rrd"
    started = run_module("view", campaign, "--trial", "1", "--save", out)
    assert started.code == 0 and out.is_file(), started.err
    partial = make_campaign(tmp_path / "partial", run=4, abort_slot=None)    # the negative control
    refused = run_module("view", partial, "--trial", "1", "--save", tmp_path / "y.rrd")
    assert refused.code == 2 and "incomplete campaign: 4 of 6 trials done" in refused.err, refused.err
    assert "`orchestrator run` resumes it" in refused.err


def test_the_refusal_names_the_labels_that_would_decide_every_episode(tmp_path):
    """Under the consensus one judge's unsure leaves an episode undecided; the refusal names
    `--judge NAME` with the judges whose labels decide them all, and that works."""
    campaign = make_campaign(tmp_path / "hw", simulated=False)
    label_all(campaign, "alice")
    with CampaignStore.open_for_labels(campaign) as store:
        store.add_judgment(store.episodes()[0]["id"], "bob", "unsure")
    out = tmp_path / "x.rrd"
    refused = run_module("view", campaign, "--trial", "1", "--save", out)
    assert refused.code == 2 and len(refused.err_lines) == 1, refused.err
    assert "(`--judge NAME`: alice), or as its owner, pass --unblinded" in refused.err, refused.err
    allowed = run_module("view", campaign, "--trial", "1", "--save", out, "--judge", "alice")
    assert allowed.code == 0 and out.is_file(), allowed.err


def test_view_of_a_trial_that_does_not_exist_is_one_line(sim_campaign, tmp_path):
    result = run_module("view", sim_campaign, "--trial", "99", "--save", tmp_path / "x.rrd")
    assert result.code == 2 and len(result.err_lines) == 1 and "no recorded episode for trial 99" in result.err


def test_the_layout_puts_a_marks_episodes_side_by_side_and_each_joints_series_in_one_plot(sim_campaign, tmp_path):
    """The blueprint `view` sends: one tab per mark, holding that mark's two episodes side by side
    (A beside B, in trial order), each with one plot per joint whose origin holds its state,
    action and sent series (so they share one plot), and the saved recording carries it."""
    import rerun.blueprint as rrb

    from orchestrator.export.rerun_view import layout, select_episodes

    store = CampaignStore.open_readonly(sim_campaign)
    try:
        views = select_episodes(store, None, None)
    finally:
        store.close()
    tabs = layout(rrb, views).root_container.contents
    marks = list(dict.fromkeys(v.trial.mark_id for v in sorted(views, key=lambda v: v.trial.slot)))
    assert [tab.name for tab in tabs] == [f"mark {m}" for m in marks] and len(marks) == 3
    checked = 0
    for tab, mark in zip(tabs, marks, strict=True):
        mine = sorted((v for v in views if v.trial.mark_id == mark), key=lambda v: v.trial.slot)
        assert isinstance(tab, rrb.Horizontal) and {v.trial.policy for v in mine} == {"A", "B"}
        assert [column.name for column in tab.contents] == [f"trial {v.trial.slot + 1}: {v.trial.policy}" for v in mine]
        for column, view in zip(tab.contents, mine, strict=True):
            joints = column.contents[1].contents
            assert [str(plot.origin) for plot in joints] == [
                f"/{view.prefix}/joints/{k.removesuffix('.pos')}" for k in STATE_KEYS]
            checked += 1
    assert checked == 6
    out = tmp_path / "m01.rrd"
    assert run_module("view", sim_campaign, "--mark", "M01", "--save", out).code == 0
    from rerun.experimental import RrdReader

    reader = RrdReader(out)
    blueprints = reader.blueprints()
    assert len(blueprints) == 1, blueprints   # the layout travels with the recording
    paths = {chunk.entity_path for chunk in reader.stream(store=blueprints[0])}
    assert sum("/container/" in p for p in paths) >= 4 and sum("/view/" in p for p in paths) >= 20, sorted(paths)
