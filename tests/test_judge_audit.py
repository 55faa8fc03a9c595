"""Start-state audit: first frame beside last, invalid starts sent back for a re-run.

An invalid start goes through the judge's sealed store connection (SQLite refuses any read of
the key there), is recorded as an aborted attempt with its reason, is never an outcome, and
the next `orchestrator run` re-runs the trial. From a bundle it travels as an
`invalid_start` line and `import-labels` sends the trial back.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.judging.blinding import CampaignSource
from orchestrator.judging.bundle import BundleSource
from orchestrator.judging.tui.app import JudgeApp
from orchestrator.judging.tui.player import Player
from orchestrator.store.sqlite import CampaignStore
from support.evidence import accept_edits
from support.judge_campaign import campaign_rows, make_campaign
from support.textual_screen import screen_text
from support.tiny import run_cli


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return make_campaign(tmp_path_factory.mktemp("audit"), marks=2)


@pytest.fixture
def campaign(template, tmp_path) -> Path:
    target = tmp_path / template.name
    shutil.copytree(template, target)
    return target


def drive(app: JudgeApp, keys: list[str]) -> None:
    async def session():
        async with app.run_test(size=(110, 32)) as pilot:
            await pilot.pause()
            for key in keys:
                await pilot.press(key)
            await pilot.pause()
            app.final_text = screen_text(app)

    asyncio.run(session())


def test_first_beside_last_and_an_invalid_start_from_the_app(campaign):
    app = JudgeApp(CampaignSource(campaign, "alice"), renderer="halfcell", autoplay=False)
    victim = app.session.order[0].id
    with CampaignStore.open_for_labels(campaign) as store:    # bob had labelled it already
        store.add_judgment(victim, "bob", "success")
        slot = [t.slot for t in store.trials() if t.episode_id == victim][0]

    async def session():
        async with app.run_test(size=(110, 32)) as pilot:
            await pilot.pause(0.3)
            player = app.query_one(Player)
            player.playing = True
            app.action_invalid()                                     # `x` while playing the start
            assert app.invalid_prompt and not player.playing         # paused while the reason is chosen
            await pilot.press("escape")
            await pilot.press("x")
            assert "Invalid start" in screen_text(app) and "1: cube not on its mark" in screen_text(app)
            await pilot.press("escape")                              # cancelled: nothing written
            assert app.current_id == victim and not app.invalid_prompt
            await pilot.press("x", "2")
            await pilot.pause()
            assert app.current_id != victim and victim not in [e.id for e in app.session.order]
            assert "invalid start (cube knocked before the start)" in screen_text(app)
            assert "0 of 3 judged" in screen_text(app)

    asyncio.run(session())
    app.source.close()
    assert campaign_rows(campaign, f"SELECT 1 FROM episodes WHERE id='{victim}'") == []
    assert campaign_rows(campaign, f"SELECT episode_id FROM judgments WHERE episode_id='{victim}'") == []
    assert campaign_rows(campaign, f"SELECT state FROM trials WHERE slot={slot}") == [("aborted",)]
    assert campaign_rows(campaign, f"SELECT status, reason FROM attempts WHERE episode_id='{victim}'") == [
        ("aborted", "invalid start (judge alice): cube knocked before the start")]
    assert campaign_rows(campaign, "SELECT kind FROM events WHERE kind='invalid_start'") == [("invalid_start",)]


def test_an_invalid_start_is_judged_from_the_start_alone(campaign):
    """After the outcome was on screen (playback past the first START_WINDOW_S, or the last frame
    beside the first), `x` is refused and nothing is written: a judge who has just watched a
    failure cannot re-roll it. Before that it works (positive control above)."""
    from orchestrator.judging.queue import START_WINDOW_S

    app = JudgeApp(CampaignSource(campaign, "alice"), renderer="halfcell", autoplay=False)
    first = app.session.order[0].id

    async def session():
        async with app.run_test(size=(110, 32)) as pilot:
            await pilot.pause(0.3)
            player = app.query_one(Player)
            single = player.current_image().shape[1]
            await pilot.press("a")                                   # the last frame beside the first
            assert player.audit and "first frame | last frame" in screen_text(app)
            assert player.current_image().shape[1] > single          # side by side
            await pilot.press("a")
            assert not player.audit
            await pilot.press("x")
            assert "judged from the start alone" in screen_text(app) and not app.invalid_prompt
            await pilot.press("2")                                   # not a reason now
            assert app.current_id == first
            app.go(app.session.order[1])                                     # the next episode, from its start
            await pilot.pause(0.2)
            player._set_clock(START_WINDOW_S + 0.5)                  # played on past its start
            await pilot.pause()
            await pilot.press("x")
            assert "judged from the start alone" in screen_text(app) and not app.invalid_prompt

    asyncio.run(session())
    app.source.close()
    assert campaign_rows(campaign, "SELECT kind FROM events WHERE kind='invalid_start'") == []
    assert campaign_rows(campaign, "SELECT count(*) FROM episodes") == [(len(app.session.order),)]


def test_the_sealed_connection_still_refuses_the_key(campaign):
    source = CampaignSource(campaign, "alice")
    source.invalidate(source.episodes()[0].id, "arm not at rest")
    with pytest.raises(sqlite3.DatabaseError):
        source.store.conn.execute("SELECT policy FROM trials").fetchall()
    source.close()


def test_invalid_start_from_a_bundle_is_imported_once(campaign, tmp_path, capsys):
    assert main(["bundle", str(campaign), "--out", str(tmp_path / "bundle")]) == 0
    source = BundleSource(tmp_path / "bundle", "carol")
    victim, other = [e.id for e in source.episodes()][:2]
    source.invalidate(victim, "cube not on its mark")
    source.add(other, "success")
    app = JudgeApp(BundleSource(tmp_path / "bundle", "carol"), renderer="halfcell", autoplay=False)
    assert victim not in [e.id for e in app.session.order]           # not offered again on reopen
    capsys.readouterr()
    assert main(["import-labels", str(campaign), str(tmp_path / "bundle")]) == 0
    assert "sent 1 trials back for a re-run" in capsys.readouterr().out
    assert campaign_rows(campaign, f"SELECT reason FROM attempts WHERE episode_id='{victim}'")[0][0].startswith(
        "invalid start (judge carol, bundle bd_")
    carols = campaign_rows(campaign, "SELECT episode_id, label FROM judgments WHERE judge='carol'")
    assert carols == [(other, "success")]
    assert main(["import-labels", str(campaign), str(tmp_path / "bundle")]) == 0   # again: no error
    assert "sent" not in capsys.readouterr().out


def test_resume_re_runs_a_trial_sent_back(tiny_reference, tmp_path):
    out = tmp_path / "tiny"
    shutil.copytree(tiny_reference, out)      # a complete campaign another process ran
    source = CampaignSource(out, "dave")
    victim = source.episodes()[0].id
    source.invalidate(victim, "cube not on its mark")
    source.close()
    with CampaignStore.open_readonly(out) as store:
        slot = [a["slot"] for a in store.attempts() if a["episode_id"] == victim][0]
        assert store.campaign()["stop_reason"] is None and len(store.episodes()) == 5
    assert run_cli(out, "--workers", "1") == 0
    with CampaignStore.open_readonly(out) as store:
        trials = store.trials()
        assert all(t.state == "done" for t in trials) and len(store.episodes()) == 6
        rerun = [t for t in trials if t.slot == slot][0]
        assert rerun.episode_id != victim and rerun.attempts == 2
        assert store.campaign()["stop_reason"] == "complete"
    assert not (out / "videos" / victim).exists()             # its files went with it
    assert main(["report", str(out), "--format", "json", "--out", str(tmp_path / "r.json")]) == 0
    import json

    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["campaign"]["aborted"] == 1 and doc["campaign"]["trials"] == 6


def test_a_start_still_is_shown_first_and_goes_into_bundles(campaign, tmp_path):
    import json

    import cv2
    import numpy as np

    source = CampaignSource(campaign, "alice")
    first = source.episodes()[0]
    source.close()
    still = np.zeros((48, 64, 3), np.uint8)
    still[:, :, 2] = 255                                      # a red frame (BGR)
    cv2.imwrite(str(campaign / "videos" / first.id / "front.start.jpg"), still)
    conn = sqlite3.connect(campaign / "campaign.db")
    files = json.loads(conn.execute("SELECT files FROM episodes WHERE id=?", (first.id,)).fetchone()[0])
    files["front.start"] = f"videos/{first.id}/front.start.jpg"
    conn.execute("UPDATE episodes SET files=? WHERE id=?", (json.dumps(files), first.id))
    conn.commit()
    conn.close()
    accept_edits(campaign)   # as if the episode had been recorded with its start still
    app = JudgeApp(CampaignSource(campaign, "alice"), renderer="halfcell", autoplay=False)

    async def session():
        async with app.run_test(size=(110, 32)) as pilot:
            await pilot.pause(0.3)
            player = app.query_one(Player)
            single = player.current_image()
            await pilot.press("a")
            audit = player.current_image()
            assert "start still | first frame | last frame" in screen_text(app)
            assert audit.shape[1] > 3 * single.shape[1]               # still | first | last
            assert audit[:, : single.shape[1], 0].mean() > 200        # the red still comes first

    asyncio.run(session())
    app.source.close()
    assert main(["bundle", str(campaign), "--out", str(tmp_path / "b")]) == 0
    bundled = {e.id: e for e in BundleSource(tmp_path / "b", "bob").episodes()}
    assert cv2.imread(str(bundled[first.id].stills["front"])) is not None
