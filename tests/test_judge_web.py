"""The browser judge in a real browser: `orchestrator judge CAMPAIGN --judge NAME --web` in a
fresh process, driven by headless Chromium (Playwright, Debian's Chromium). The videos play at
true time from their recorded timestamps on one clock, the keys label every episode as the
Textual judge does (both drive one `JudgeSession`: tests/test_judge_session.py), and
`orchestrator report` (another process) reads the labels back."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from orchestrator.core.timeline import FRAME_TIME_EPS_S, frame_shown_at
from orchestrator.store.sqlite import CampaignStore
from support.cli import run_module
from support.judge_campaign import make_campaign
from support.judge_web import VFR_TIMES, WebJudge, browser, dress_campaign, press_and_wait, wait

FPS = 15
DURATION = 2.0


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    directory = make_campaign(tmp_path_factory.mktemp("web"), marks=2, fps=FPS, seconds=DURATION)
    dress_campaign(directory)
    return directory


@pytest.fixture
def campaign(template, tmp_path) -> Path:
    return Path(shutil.copytree(template, tmp_path / template.name))


def open_page(chrome, judge: WebJudge):
    page = chrome.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # (a script or style the Content-Security-Policy blocked would show here)
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto(judge.url)
    wait(page, "window.judgeMetrics.ready.length > 0")
    return page, errors


def note(page, text: str) -> None:
    before = page.evaluate("() => window.judgeMetrics.answered")
    page.keyboard.press("n")
    page.keyboard.type(text)
    page.keyboard.press("Enter")
    wait(page, f"window.judgeMetrics.answered > {before}")


def slope(points: list[tuple[float, float]]) -> float:
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def test_videos_play_in_true_time_from_the_recorded_timestamps(campaign):
    with WebJudge(campaign, "--judge", "alice") as judge, browser() as chrome:
        page, errors = open_page(chrome, judge)
        assert page.title().startswith("Blind judging - judge alice - campaign ")
        page.keyboard.press(" ")                                    # it opens paused: play it
        end = wait(page, "window.judgeMetrics.clockAtEnd")
        assert abs(end - DURATION) <= 1 / FPS                       # the clock stops at the duration
        sizes = page.evaluate("() => [...document.querySelectorAll('#stage video')].map("
                              "v => [v.videoWidth, v.videoHeight, v.clientWidth, v.clientHeight])")
        assert sizes == [[64, 48, 64, 48], [64, 48, 64, 48]]       # each camera at its recorded size
        played_from = page.evaluate("() => window.judgeMetrics.keys[0].wall")   # the frame shown paused before
        frames = [f for f in page.evaluate("() => window.judgeMetrics.frames.front") if f["wall"] >= played_from]
        media = [f["media"] for f in frames]
        assert len(set(media)) >= len(VFR_TIMES) // 2, media        # most frames presented
        for t in media:                                             # ... at their recorded times
            assert min(abs(t - r) for r in VFR_TIMES) < 2e-3, (t, VFR_TIMES)
        rate = slope([(f["wall"] / 1000, f["media"]) for f in frames])
        # media time runs at wall time (the speed keys' x0.5 and x2 stay outside the bound). Measured
        # at f2b6624, 10 runs at load 18-21 (nice 10): 0.895, 0.962, 0.983, 0.985, 0.987, 0.988,
        # 0.991, 0.991, 0.995, 1.018; the bound was (0.9, 1.1), and the 0.895 run failed it
        assert 0.8 < rate < 1.25, rate
        before = max((f for f in frames if f["media"] < 0.85), key=lambda f: f["media"])
        after = min((f for f in frames if f["media"] > 1.15), key=lambda f: f["media"])
        gap = (after["wall"] - before["wall"]) / 1000               # the camera's 0.4 s stall, shown as such
        assert abs(gap - (after["media"] - before["media"])) < 0.1, gap

        # the page's frame-at-t is core/timeline.py's rule, with the tolerance the server sends
        times = page.evaluate("() => ep.cameras[0].times")
        probes = sorted({round(t + d, 9) for t in times for d in (-1e-3, -2e-6, -5e-7, 0.0, 5e-7, 2e-6, 1e-3)}
                        | {-1.0, times[-1] + 5.0})
        shown = page.evaluate("([times, probes]) => probes.map((t) => indexAt(times, t))", [times, probes])
        assert len(probes) >= 7 * len(times) - 10 and len(shown) == len(probes)
        expected = [frame_shown_at(times, t) for t in probes]
        assert shown == expected
        # the positive control: without the tolerance the page would show the frame before, 0.5 us early
        strict = page.evaluate("([times, probes]) => probes.map((t) => indexAt(times, t, 0))", [times, probes])
        assert sum(a != b for a, b in zip(strict, expected, strict=True)) >= len(times) - 1
        assert page.evaluate("() => ep.frame_time_eps_s") == FRAME_TIME_EPS_S

        page.keyboard.press("ArrowLeft")                            # one frame back from the end
        assert abs(page.evaluate("() => window.judgeClock.t") - VFR_TIMES[-1]) < 1e-6
        page.keyboard.press("ArrowLeft")
        assert abs(page.evaluate("() => window.judgeClock.t") - VFR_TIMES[-2]) < 1e-6
        wait(page, f"[...document.querySelectorAll('#stage video')].every(v => !v.seeking "
                   f"&& Math.abs(v.currentTime - {VFR_TIMES[-2]}) < 0.002)")
        page.keyboard.press("ArrowRight")
        assert abs(page.evaluate("() => window.judgeClock.t") - VFR_TIMES[-1]) < 1e-6
        page.keyboard.press("]")
        assert page.evaluate("() => window.judgeClock.speed") == 2
        ended = len(page.evaluate("() => window.judgeMetrics.ended"))
        page.keyboard.press("e")
        page.keyboard.press(" ")                                    # from the end: again from 0, at x2
        started = time.monotonic()
        wait(page, f"window.judgeMetrics.ended.length > {ended}")
        # 2 s of episode at x2 (x1 would take 2 s). Measured at f2b6624 (the 10 runs above, the 9 that
        # got here): 1.029-1.178 s, median 1.066 s
        assert 0.8 < time.monotonic() - started < 1.6
        assert errors == []
        code, out, err = judge.stop()
    assert code == 0 and "judge alice: 0 of 4 episodes judged; every label is saved" in out, err


def test_keys_label_every_episode_as_the_textual_judge_and_report_reads_them(campaign):
    with WebJudge(campaign, "--judge", "alice") as judge, browser() as chrome:
        page, errors = open_page(chrome, judge)
        order = []

        def current() -> str:
            return page.evaluate("() => document.getElementById('episode').textContent").split()[1]

        order.append(current())
        press_and_wait(page, "u")                    # unsure: asked again after the others
        order.append(current())
        press_and_wait(page, "f")
        press_and_wait(page, "2")                    # the failure mode of the label just made
        order.append(current())
        note(page, "cube slipped")                   # no label here yet: for the label just made
        assert "Saved: note for " + order[1] in page.inner_text("#status")
        press_and_wait(page, "s")
        press_and_wait(page, "z")                    # undo: back to that episode
        assert current() == order[2] and "Label: (none yet)" in page.inner_text("#label")
        note(page, "slid off")                       # kept, saved with the label
        assert "note waiting: slid off" in page.inner_text("#label")
        press_and_wait(page, "s")
        order.append(current())
        assert "3 of 4 judged" not in page.inner_text("#progress")
        press_and_wait(page, "s")
        assert current() == order[0]                 # the unsure one, again
        assert "asked again" in page.inner_text("#label")
        press_and_wait(page, "f")
        press_and_wait(page, "1")
        assert page.inner_text("#progress") == "4 of 4 judged"
        assert "All 4 episodes judged" in page.inner_text("#episode")
        assert errors == []
        code, out, err = judge.stop()
    assert code == 0 and "4 of 4 episodes judged" in out, err
    assert len(set(order)) == 4
    report = run_module("report", campaign, "--format", "json", "--out", campaign.parent / "r.json")
    assert report.code == 0, report.err
    doc = json.loads((campaign.parent / "r.json").read_text())
    assert doc["judges"]["judges"] == ["alice"]
    assert doc["judges"]["accuracy_vs_physics"]["alice"]["compared"] == 4
    with CampaignStore.open_readonly(campaign) as store:
        labels = {e: (j.label, j.failure_mode, j.note) for e, j in store.latest_labels("alice").items()}
        every = store.judgments("alice", include_retracted=True)
    retracted = len(every) - len(labels)
    assert labels == {order[0]: ("failure", "missed", None), order[1]: ("failure", "pushed", "cube slipped"),
                      order[2]: ("success", None, "slid off"), order[3]: ("success", None, None)}
    # replaced, as the Textual judge does: unsure, failure before its mode, before its note,
    # the undone success, the failure before its mode
    assert retracted == 5


def test_audit_guide_zoom_speeds_and_cameras(campaign):
    with WebJudge(campaign, "--judge", "bob") as judge, browser() as chrome:
        page, errors = open_page(chrome, judge)
        page.keyboard.press("a")
        cells = page.evaluate("() => [...document.querySelectorAll('.auditrow .tag')].map(t => t.textContent)")
        assert cells == ["front: start still", "front: first frame", "front: last frame",
                         "wrist: first frame", "wrist: last frame"]
        wait(page, "[...document.querySelectorAll('.auditrow img')].every(i => i.complete && i.naturalWidth == 64)")
        page.keyboard.press("a")
        assert page.evaluate("() => document.querySelectorAll('.auditrow').length") == 0
        page.keyboard.press("g")
        assert "Success-height guide (4 cm" in page.inner_text("#status")
        inked = page.evaluate("""() => [...document.querySelectorAll('#stage > .cell')].map(c => {
            const k = c.querySelector('canvas'), d = k.getContext('2d').getImageData(0, 0, k.width, k.height).data;
            let n = 0; for (let i = 3; i < d.length; i += 4) n += d[i] > 0; return n; })""")
        assert inked[0] > 30 and inked[1] == 0       # the guide on the posed front camera only
        for key, speed in (("]", 2), ("]", 4), ("]", 4), ("[", 2), ("[", 1), ("[", 0.5), ("[", 0.25), ("[", 0.25)):
            page.keyboard.press(key)
            assert page.evaluate("() => window.judgeClock.speed") == speed
        assert page.evaluate("() => [...document.querySelectorAll('#stage video')].map(v => v.playbackRate)") == [0.25, 0.25]
        shown = "() => [...document.querySelectorAll('#stage > .cell')].map(c => !c.hidden)"
        for expected, status in (([True, False], "Camera: front"), ([False, True], "Camera: wrist"),
                                 ([True, True], "Camera: all")):
            page.keyboard.press("c")
            assert page.evaluate(shown) == expected and page.inner_text("#status") == status
        page.keyboard.press("m")
        transforms = page.evaluate("() => [...document.querySelectorAll('#stage > .cell .frame')]"
                                   ".map(f => f.style.transform)")
        assert transforms[0].startswith("scale(") and min(map(float, transforms[0][6:].split(")")[0].split(","))) > 1.2
        assert transforms[1] == ""
        assert errors == []


def test_opens_paused_x_after_a_pause_every_key_listed_and_a_label_changed(campaign):
    """The page opens an episode paused on its first frame, so `x` works after a person's pause
    (it was refused 1.2 s after the page loaded); `?` lists every key (the terminal's list); a
    label is changed by going to its episode (`j` N), the old one kept in the store."""
    from orchestrator.judging.keys import KEYS

    with WebJudge(campaign, "--judge", "alice") as judge, browser() as chrome:
        page, errors = open_page(chrome, judge)
        assert sorted(page.evaluate("() => Object.keys(ACTIONS)")) == sorted(k.action for k in KEYS)
        started = time.monotonic()
        while time.monotonic() - started < 1.5:                     # a person takes in the start
            assert page.evaluate("() => [window.judgeClock.t, window.judgeClock.playing]") == [0, False]
            time.sleep(0.1)   # polled through the observation window: paused at every look
        assert "paused" in page.inner_text("#cursor") and "frame 1 /" in page.inner_text("#cursor")
        page.keyboard.press("x")
        assert page.is_visible("#invalid"), page.inner_text("#status")
        page.keyboard.press("Escape")
        assert not page.is_visible("#invalid")
        page.keyboard.press("?")
        listed = page.evaluate("() => [...document.querySelectorAll('#helplist tr')].map(r => r.innerText)")
        assert listed == [f"{k.shown}\t{k.help}" for k in KEYS]
        page.keyboard.press("s")                                    # closes the list, labels nothing
        assert not page.is_visible("#help") and page.evaluate("() => window.judgeMetrics.answered") == 0
        buttons = page.evaluate("() => [...document.querySelectorAll('#buttons button')].map(b => b.dataset.key)")
        assert set(buttons) >= {k.browser[0] for k in KEYS if k.action != "mode"} | {"1", "5"}
        press_and_wait(page, "s")
        assert judge.state()["episodes"] == [{"n": 1, "label": "success"}] + [{"n": n, "label": None} for n in (2, 3, 4)]
        page.keyboard.press("j")
        assert page.text_content("#gotolist") == "1:s  2:-  3:-  4:-"
        page.keyboard.type("1")
        press_and_wait(page, "Enter")
        assert "labelled success" in page.inner_text("#status")
        press_and_wait(page, "f")
        assert "relabelled: it was success" in page.inner_text("#status")
        assert errors == []
        code, out, err = judge.stop()
    assert code == 0, err
    with CampaignStore.open_readonly(campaign) as store:
        every = [(j.label, j.episode_id) for j in store.judgments("alice", include_retracted=True)]
        live = [(j.label, j.episode_id) for j in store.judgments("alice")]
    assert [label for label, _ in every] == ["success", "failure"] and live == every[1:]
    assert every[0][1] == every[1][1]
