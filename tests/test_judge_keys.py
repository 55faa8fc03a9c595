"""The judge's keys fit a person's hands, in the terminal judge (Textual's pilot; the real terminal
is tests/test_judge_tmux.py, the browser tests/test_judge_web.py): one key list for both faces
(`judging.keys`), a key bar that wraps so every key is on screen at 80 and 160 columns, a `?`
overlay listing every key, an episode that opens paused on its first frame so that `x` still
works after a person's pause, and "go to episode N" to relabel an earlier episode."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from orchestrator.judging.blinding import CampaignSource
from orchestrator.judging.keys import KEYS, bar_items, help_lines, pack
from orchestrator.judging.queue import START_WINDOW_S
from orchestrator.judging.tui.app import JudgeApp
from orchestrator.judging.tui.keybar import HelpScreen
from orchestrator.judging.tui.player import Player
from support.judge_campaign import SECRET_TERMS, campaign_rows, live_judgments, make_campaign
from support.textual_screen import screen_text


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return make_campaign(tmp_path_factory.mktemp("keys"), marks=2)


@pytest.fixture
def campaign(template, tmp_path) -> Path:
    return Path(shutil.copytree(template, tmp_path / template.name))


def drive(app: JudgeApp, size: tuple[int, int], body) -> None:
    async def session():
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await body(pilot)

    try:
        asyncio.run(session())
    finally:
        app.source.close()


def test_one_key_list_for_both_faces_and_each_key_has_an_action(campaign):
    actions = [k.action for k in KEYS]
    assert len(actions) == len(set(actions)) == 22
    pressed = [name for k in KEYS for name in k.browser]
    assert len(pressed) == len(set(pressed))                      # no key does two things
    bound = {b.key: b.action for b in JudgeApp.BINDINGS}
    assert len(bound) == sum(len(k.textual) for k in KEYS) == 30  # 1-9 are nine keys
    checked = 0
    for key in KEYS:
        for name in key.textual:
            assert bound[name] == f"judge('{key.action}', '{name}')"
            checked += 1
    assert checked == 30
    # the terminal implements every action (the browser's: tests/test_judge_web.py)
    app = JudgeApp(CampaignSource(campaign, "kim"), renderer="halfcell")
    assert sorted(app.actions) == sorted(actions)
    app.source.close()


@pytest.mark.parametrize("width", [80, 160])
def test_the_key_bar_packs_every_key_without_splitting_one(width):
    items = bar_items()
    lines = pack(items, width)
    assert all(len(line) <= width for line in lines)
    assert "  ".join(lines).split("  ") == items                 # every item, in order, whole
    assert len(lines) == {80: 4, 160: 2}[width]
    assert pack(["abc", "de"], 5) == ["abc", "de"] and pack(["toolongforit"], 4) == ["toolongforit"]


def test_every_help_line_fits_an_80_column_terminal():
    lines = help_lines()
    assert len(lines) == len(KEYS) <= 22                          # 80 x 24 with the overlay's border
    assert max(map(len, lines)) <= 76


@pytest.mark.parametrize("width", [80, 160])
def test_every_key_is_on_screen_and_the_overlay_lists_them(campaign, width):
    app = JudgeApp(CampaignSource(campaign, "kim"), renderer="halfcell")

    async def body(pilot):
        text = screen_text(app)
        shown = [item for item in bar_items() if item in text]
        assert shown == bar_items(), set(bar_items()) - set(shown)   # nothing cut off
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        listed = [line for line in help_lines() if line in text]
        assert listed == help_lines(), set(help_lines()) - set(listed)
        await pilot.press("s")                                      # any key closes it, and only that
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        assert live_judgments(campaign, "kim") == []
        await pilot.press("question_mark", "escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("s")                                      # the positive control: s labels
        assert len(live_judgments(campaign, "kim")) == 1

    drive(app, (width, 24), body)


def test_an_episode_opens_paused_and_x_works_after_a_persons_pause(campaign):
    app = JudgeApp(CampaignSource(campaign, "kim"), renderer="halfcell")   # the command's defaults
    first = app.session.order[0].id

    async def body(pilot):
        player = app.query_one(Player)
        started = time.monotonic()
        # a person takes in the start: longer than the start window of wall clock, paused (a
        # window counted on the wall clock would have closed; 0.2 s past it is enough to tell)
        while time.monotonic() - started < START_WINDOW_S + 0.2:
            await pilot.pause(0.05)
        assert not player.playing and player.position == 0.0 and player.frame_index == 0
        assert "paused" in screen_text(app)
        await pilot.press("x")
        assert app.invalid_prompt, screen_text(app)
        await pilot.press("1")
        assert app.current_id != first
        assert not app.query_one(Player).playing                     # the next one opens paused too
        await pilot.press("right_square_bracket", "right_square_bracket")   # at x4: the window
        assert app.query_one(Player).speed == 4.0                    # is seen in 1/4 of the time
        await pilot.press("space")                                   # the judge plays it on
        deadline = time.monotonic() + 20
        while player.seen_s <= START_WINDOW_S and time.monotonic() < deadline:
            await pilot.pause(0.05)
        await pilot.press("x")                                       # now past its start: refused
        assert not app.invalid_prompt and "judged from the start alone" in screen_text(app)

    drive(app, (110, 32), body)
    assert campaign_rows(campaign, f"SELECT reason FROM attempts WHERE episode_id='{first}'") == [
        ("invalid start (judge kim): cube not on its mark",)]


def test_go_to_an_episode_and_relabel_it(campaign):
    app = JudgeApp(CampaignSource(campaign, "kim"), renderer="halfcell")
    order = [e.id for e in app.session.order]

    async def body(pilot):
        await pilot.press("s", "f", "s")
        await pilot.press("j")
        text = screen_text(app)
        assert "1:s  2:f  3:s  4:-" in text                          # the judge's own, by number
        for term in SECRET_TERMS:
            assert term.lower() not in text.lower()
        await pilot.press("2", "enter")
        assert app.current_id == order[1] and "labelled failure" in screen_text(app)
        await pilot.press("s")
        assert "relabelled: it was failure" in screen_text(app)
        assert app.current_id == order[3]                            # on with the queue
        await pilot.press("j", "9", "enter")
        assert "No episode '9'" in screen_text(app) and app.current_id == order[3]
        await pilot.press("j", "escape")
        assert "Go to: cancelled." in screen_text(app)

    drive(app, (110, 32), body)
    assert live_judgments(campaign, "kim") == [(order[0], "success", None, None), (order[2], "success", None, None),
                                               (order[1], "success", None, None)]
    kept = campaign_rows(campaign, "SELECT label, retracted_at IS NOT NULL FROM judgments "
                                   f"WHERE judge='kim' AND episode_id='{order[1]}' ORDER BY id")
    assert kept == [("failure", 1), ("success", 0)]                  # the old one kept, retracted
