"""The judge app driven with Textual's pilot: labelling, undo, unsure, resume, player keys."""

from __future__ import annotations

import asyncio
import functools
import time
from pathlib import Path

import pytest

from orchestrator.judging.blinding import CampaignSource
from orchestrator.judging.tui import app as app_module
from orchestrator.judging.tui.app import JudgeApp
from support.judge_campaign import SECRET_TERMS, live_judgments, make_campaign
from support.textual_screen import screen_text

SIZE = (110, 32)


def async_test(fn):
    """Run an async test body with asyncio (no pytest async plugin needed)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        asyncio.run(fn(*args, **kwargs))
    return wrapper


@pytest.fixture(scope="module")
def campaign_template(tmp_path_factory) -> Path:
    return make_campaign(tmp_path_factory.mktemp("campaign"))


@pytest.fixture
def campaign(campaign_template, tmp_path) -> Path:
    """A fresh copy of the recorded campaign for each test (labels start empty)."""
    import shutil

    target = tmp_path / campaign_template.name
    shutil.copytree(campaign_template, target)
    return target


async def wait_for(pilot, condition, timeout_s: float = 30.0) -> bool:
    """Let the app run until `condition()` holds (polled every 20 ms) or `timeout_s` passes;
    returns whether it holds. Playback, decoding and the external player work on threads:
    on a loaded machine they take longer than any fixed pause, so the tests wait for the
    state they check instead of sleeping a guess (and fail only when it never comes)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        await pilot.pause(0.02)
    return True


def new_app(directory: Path, judge: str = "alice", autoplay: bool = False) -> JudgeApp:
    # Paused at the start: Textual's pilot waits for the process to go idle after each key,
    # which playback never lets it do (each key would cost ~2 s). Playback has its own test.
    return JudgeApp(CampaignSource(directory, judge), renderer="halfcell", autoplay=autoplay)


def assert_blind(app: JudgeApp) -> None:
    text = screen_text(app) + app.title
    for term in SECRET_TERMS:
        assert term.lower() not in text.lower()


@async_test
async def test_label_a_campaign_end_to_end_with_keys(campaign):
    app = new_app(campaign)
    order = [e.id for e in app.session.order]
    keys = ["s", "f", "s", "s", "f", "s", "f", "s"]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "0 of 8 judged" in screen_text(app)
        assert "cube bottom lifted >= 4 cm," in screen_text(app)   # the panel wraps it
        assert "both jaws on it, held >= 1 s" in screen_text(app)
        assert "1:missed" in screen_text(app) and "5:other" in screen_text(app)
        for k, key in enumerate(keys):
            assert app.current_id == order[k]
            await pilot.press(key)
            await pilot.pause()
            # committed when the key is handled: another connection sees it already
            labels = live_judgments(campaign, "alice")
            assert len(labels) == k + 1
            assert labels[-1][:2] == (order[k], {"s": "success", "f": "failure"}[key])
            assert_blind(app)
        assert app.current_id is None
        text = screen_text(app)
        assert "8 of 8 judged" in text and "All 8 episodes judged" in text
        await pilot.press("q")
    assert app.return_code == 0


@pytest.mark.slow   # seconds of real-time waiting: kept out of the fast lane
@async_test
async def test_failure_mode_and_note_go_with_the_label(campaign):
    app = new_app(campaign)
    first, second = app.session.order[0].id, app.session.order[1].id
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("1")   # no failure label yet: refused with a hint
        assert live_judgments(campaign, "alice") == []
        await pilot.press("f", "3")
        assert live_judgments(campaign, "alice") == [(first, "failure", "dropped", None)]
        await pilot.press("n", *"jaw slipped", "enter")
        assert live_judgments(campaign, "alice") == [(first, "failure", "dropped", "jaw slipped")]
        await pilot.press("n", *"never mind", "escape")   # cancelled: nothing changes
        assert not app.query_one("#note").display
        assert live_judgments(campaign, "alice") == [(first, "failure", "dropped", "jaw slipped")]
        # a note typed before labelling waits for the label (keys typed in the box are text)
        await pilot.press("s")
        assert len(live_judgments(campaign, "alice")) == 2
        await pilot.press("z")   # back to the second episode, unjudged
        assert app.current_id == second
        await pilot.press("n", *"sfu z", "enter", "u")
        assert live_judgments(campaign, "alice")[-1] == (second, "unsure", None, "sfu z")
        # at most one live label per episode
        ids = [row[0] for row in live_judgments(campaign, "alice")]
        assert len(ids) == len(set(ids))


@async_test
async def test_the_panels_show_undo_and_the_unsure_ones_asked_again(campaign):
    """The queue and undo rules are the session's (tests/test_judge_session.py); here: what the
    judge reads of them on screen."""
    app = new_app(campaign)
    order = [e.id for e in app.session.order]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("u", "s", "z")
        text = screen_text(app)
        assert app.current_id == order[1] and "0 of 8 judged (1 unsure)" in text
        assert f"Undone: success for {order[1]}" in text and "Label: (none yet)" in text
        await pilot.press(*"sssssss")
        text = screen_text(app)
        assert app.current_id == order[0] and "7 of 8 judged (1 unsure)" in text
        assert "Label: unsure" in text and "asked again" in text
        await pilot.press("f", "2")
        assert "All 8 episodes judged" in screen_text(app)
    assert live_judgments(campaign, "alice")[-1] == (order[0], "failure", "pushed", None)


@pytest.mark.slow   # seconds of real-time waiting: kept out of the fast lane
@async_test
async def test_quit_and_resume_continue_with_unjudged_then_unsure(campaign):
    app = new_app(campaign)
    order = [e.id for e in app.session.order]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s", "u", "f", "q")
    app.source.close()
    again = new_app(campaign)
    assert [e.id for e in again.session.order] == order   # same judge, same order
    async with again.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert again.current_id == order[3]
        assert "2 of 8 judged (1 unsure)" in screen_text(again)
        await pilot.press(*"sssss")
        assert again.current_id == order[1]        # the unsure one, last
    again.source.close()
    third = new_app(campaign)
    async with third.run_test(size=SIZE) as pilot:
        await pilot.press("z")                     # undo reaches back into the last session
        assert third.current_id == order[7]
        assert len(live_judgments(campaign, "alice")) == 7
    third.source.close()


@async_test
@pytest.mark.subprocess
async def test_player_keys(campaign, monkeypatch):
    app = new_app(campaign, autoplay=True)
    async with app.run_test(size=SIZE) as pilot:
        player = app.query_one("#player")
        assert await wait_for(pilot, lambda: player.playing and player.frame_index > 0), \
            (player.playing, player.frame_index)          # it plays by itself
        await pilot.press("space")
        assert not player.playing
        at = player.frame_index
        await pilot.press("right", "right")
        assert player.frame_index == at + 2
        await pilot.press("left")
        assert player.frame_index == at + 1
        await pilot.press("e")
        assert await wait_for(pilot, lambda: player.all_decoded), "the decoders never finished"
        await pilot.press("e")
        # the clock runs to the episode's end; the last frame (PTS 29/15 s) stays on screen
        assert player.frame_index == 29 and player.frame_time() == pytest.approx(29 / 15, abs=1e-3)
        assert "t = 2.00 s / 2.00 s" in screen_text(app) and "frame 30 / 30" in screen_text(app)
        await pilot.press("right")
        assert player.frame_index == 29 and player.position == 2.0
        await pilot.press("left")                  # back one frame: the clock shows its PTS
        assert player.frame_index == 28 and "t = 1.87 s / 2.00 s" in screen_text(app)
        await pilot.press("e")
        await pilot.press("right_square_bracket")
        assert player.speed == 2.0
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert player.speed == 0.5
        assert player.view_name == "front"
        await pilot.press("c")
        assert player.view_name == "wrist" and "camera: wrist" in screen_text(app)
        await pilot.press("c")
        assert player.view_name == "tiled"
        front = player.sources["front"].get(0)
        assert player.current_image().shape[1] > front.shape[1]   # side by side
        await pilot.press("c")
        assert player.view_name == "front"
        app.action_play()                          # at the end: plays again from the start
        assert player.playing and player.frame_index == 0
        app.action_play()
        assert not player.playing
        monkeypatch.setattr(app_module, "find_opener", lambda: None)
        await pilot.press("o")
        status = screen_text(app)
        assert "No external player found" in status and f"{app.current_id}/front.mp4" in status
        opened = []
        monkeypatch.setattr(app_module, "find_opener", lambda: ["true"])
        real_popen = app_module.subprocess.Popen
        monkeypatch.setattr(app_module.subprocess, "Popen",
                            lambda args, **kw: opened.append(args[-1]) or real_popen(args, **kw))
        await pilot.press("o")
        assert await wait_for(pilot, lambda: "Opened" in screen_text(app)), screen_text(app)
        assert "in the external player" in screen_text(app)
        # the player gets a neutral copy, not a path through the campaign folder
        assert Path(opened[0]).name == f"{app.current_id}-front.mp4"
        assert "SECRET" not in opened[0] and Path(opened[0]).read_bytes()
        monkeypatch.setattr(app_module, "find_opener", lambda: ["false"])
        await pilot.press("o")
        assert await wait_for(pilot, lambda: "external player could not open" in screen_text(app)), \
            screen_text(app)
        assert live_judgments(campaign, "alice") == []       # player keys never label
        assert_blind(app)


@async_test
async def test_frames_reach_the_screen(campaign):
    app = new_app(campaign, autoplay=True)
    async with app.run_test(size=SIZE) as pilot:
        first = app.current_id
        assert await wait_for(pilot, lambda: any(e == first for _, e, _ in app.shown_log)), app.shown_log
        await pilot.press("s")
        assert await wait_for(pilot, lambda: any(e == app.current_id and f == 0 for _, e, f in app.shown_log)), \
            app.shown_log
        assert "▀" in screen_text(app)            # half-block pixels are drawn


@async_test
async def test_a_missing_video_is_reported_without_its_path(campaign):
    app = new_app(campaign)
    victim = app.session.order[0]
    victim.videos["front"].unlink()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        text = screen_text(app)
        assert f"{victim.id}/front.mp4: cannot decode (file missing)" in " ".join(text.split())
        assert_blind(app)
        await pilot.press("s")                      # still judgeable (other camera, or skip)
        assert live_judgments(campaign, "alice")[0][:2] == (victim.id, "success")


@async_test
async def test_textual_image_renderer_path(campaign):
    """Frames also go through textual-image's widgets (the Kitty/Sixel path in real terminals)."""
    app = JudgeApp(CampaignSource(campaign, "alice"), renderer="unicode", autoplay=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        first = app.current_id
        await pilot.press("right", "s")
        await pilot.pause(0.2)
        assert {e for _, e, _ in app.shown_log} >= {first, app.current_id}
        assert "1 of 8 judged" in screen_text(app)
        assert_blind(app)
    app.source.close()


@async_test
async def test_a_label_that_cannot_be_saved_is_said_and_kept_on_screen(campaign):
    source = CampaignSource(campaign, "full")
    real_add = source.add
    app = JudgeApp(source, renderer="halfcell", autoplay=False)

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    async with app.run_test(size=SIZE) as pilot:
        first = app.current_id
        source.add = disk_full
        await pilot.press("s")
        assert app.current_id == first and source.history() == []
        assert "NOT SAVED (No space left on device)" in screen_text(app)
        source.add = real_add
        await pilot.press("s")
        assert [r.episode_id for r in source.history()] == [first] and app.current_id != first
    assert [row[:2] for row in live_judgments(campaign, "full")] == [(first, "success")]   # durable in campaign.db
    source.close()
