"""The browser judge on the other stores: a judge bundle (labels imported back, then read by
`report`), and a PostgreSQL store: a judge's role only, a browser labelling every episode, and
five judges' servers labelling at the same time from concurrent HTTP clients without a label
lost or mixed. Every server is `orchestrator judge ... --web` in a fresh process."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from support.cli import run_main, run_module
from support.judge_campaign import make_campaign
from support.judge_web import WebJudge, browser, press_and_wait, wait


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return make_campaign(tmp_path_factory.mktemp("webstores"), marks=2, seconds=1.0)


def tap(page, key: str) -> None:
    """Tap the button of `key` (for `x`: then the button of the third reason)."""
    before = page.evaluate("() => window.judgeMetrics.answered")
    if key == "x":
        page.tap('#buttons button[data-key="x"]')
        page.tap('#reasons button[data-key="3"]')
    else:
        page.tap(f'#buttons button[data-key="{key}"]')
    wait(page, f"window.judgeMetrics.answered > {before}")


def label_all_in_the_browser(judge: WebJudge, keys: list[str]) -> list[str]:
    """Press `keys` (one per episode) in a headless Chromium; returns the episode ids in order."""
    order = []
    with browser() as chrome:
        page = chrome.new_page(has_touch=True)
        page.goto(judge.url)
        wait(page, "window.judgeMetrics.ready.length > 0")
        for key in keys:
            order.append(page.inner_text("#episode").split()[1])
            if key.startswith("tap "):          # a tablet: the buttons, no keyboard
                tap(page, key.split()[1])
                continue
            if key == "x":                      # invalid start: x, then the reason
                page.keyboard.press("x")
                assert "why?" in page.inner_text("#status")
                key = "3"
            press_and_wait(page, key)
        assert "episodes judged" in page.inner_text("#episode")
    return order


def test_a_bundle_judged_in_the_browser_is_imported_and_reported(template, tmp_path, capsys):
    campaign = Path(shutil.copytree(template, tmp_path / template.name))
    made = run_module("bundle", campaign, "--out", tmp_path / "bundle")
    assert made.code == 0, made.err
    with WebJudge(tmp_path / "bundle", "--judge", "carol") as judge:
        assert judge.state()["kind"] == "bundle"
        order = label_all_in_the_browser(judge, ["s", "tap x", "f", "tap s"])
        code, out, err = judge.stop()
    assert code == 0 and "3 of 3 episodes judged" in out, err
    imported = run_module("import-labels", campaign, tmp_path / "bundle")
    assert imported.code == 0 and "sent 1 trials back for a re-run" in imported.out, imported.err
    report = run_main(capsys, "report", campaign, "--format", "json", "--out", tmp_path / "r.json")   # in this process
    assert report.code == 0, report.err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["judges"]["judges"] == ["carol"] and doc["campaign"]["aborted"] == 1
    assert doc["judges"]["accuracy_vs_physics"]["carol"]["compared"] == 3
    lines = [json.loads(line) for line in (tmp_path / "bundle" / "labels" / "carol.jsonl").read_text().splitlines()]
    assert [(x["episode_id"], x["label"]) for x in lines if "label" in x] == [
        (order[0], "success"), (order[1], "invalid_start"), (order[2], "failure"), (order[3], "success")]


@pytest.fixture(scope="module")
def on_server(template, pg_cluster, tmp_path_factory):
    """The campaign moved to a PostgreSQL database, with judge roles wendy and wj1-wj5 (roles belong to the whole PostgreSQL cluster the session shares: names no other test file uses)."""
    campaign = Path(shutil.copytree(template, tmp_path_factory.mktemp("pg") / template.name))
    url = pg_cluster.new_database()
    moved = run_module("store", "migrate", campaign, url)
    assert moved.code == 0, moved.err
    database = url.split("@/")[1].split("?")[0]
    made = run_module("store", "add-judge", url, "wendy")
    assert made.code == 0, made.err
    from orchestrator.cli import main

    for name in ("wj1", "wj2", "wj3", "wj4", "wj5"):   # the same command in this process: no interpreter each
        assert main(["store", "add-judge", url, name]) == 0
    return campaign, url, lambda role: pg_cluster.url(database, role)


def test_a_server_on_postgresql_uses_the_judge_role_only(on_server, capsys):
    campaign, url, as_role = on_server
    owner = run_module("judge", campaign, "--store", url, "--judge", "wendy", "--web", "--port", "0")
    assert owner.code == 2 and "can read which policy ran each episode" in owner.err
    other = run_main(capsys, "judge", campaign, "--store", as_role("wj1"), "--judge", "wendy", "--web", "--port", "0")
    assert other.code == 2 and "must be the role's name" in other.err
    with WebJudge(campaign, "--store", as_role("wendy"), "--judge", "wendy") as judge:
        # (an invalid start goes through the judge role's security-definer invalid_start())
        order = label_all_in_the_browser(judge, ["x", "f", "1", "u", "s", "f"])
        code, out, err = judge.stop()
    assert code == 0 and "3 of 3 episodes judged" in out, err
    report = run_main(capsys, "report", campaign, "--store", url, "--format", "json", "--out", campaign.parent / "r.json")
    assert report.code == 0, report.err
    doc = json.loads((campaign.parent / "r.json").read_text())
    assert "wendy" in doc["judges"]["judges"] and doc["campaign"]["aborted"] == 1
    assert doc["judges"]["accuracy_vs_physics"]["wendy"]["compared"] == 3
    assert len(set(order)) == 4


def expected_label(judge: int, position: int) -> tuple[str, str | None]:
    return ("success", None) if (judge + position) % 2 else ("failure", ("missed", "pushed")[judge % 2])


def test_five_judges_at_once_on_postgresql_lose_and_mix_nothing(on_server):
    campaign, url, as_role = on_server
    judges = [WebJudge(campaign, "--store", as_role(f"wj{i}"), "--judge", f"wj{i}") for i in range(1, 6)]
    done: dict[int, list[str]] = {}
    problems: list[str] = []
    start = threading.Barrier(len(judges))

    def label(index: int, judge: WebJudge) -> None:
        try:
            start.wait(timeout=60)
            seen = []
            while (episode := judge.state()["episode"]) is not None:
                label, mode = expected_label(index, len(seen))
                status, after = judge.act("label", label, episode["id"])
                assert status == 200, status
                if mode:       # for the label just made (the session has moved on)
                    now_on = after["episode"]["id"] if after["episode"] else None
                    status, after = judge.act("mode", 1 + ("missed", "pushed").index(mode), now_on)
                    assert status == 200 and after["status"].startswith("Saved: failure mode"), after
                seen.append(episode["id"])
            done[index] = seen
        except Exception as exc:   # reported below, on the test's thread
            problems.append(f"wj{index}: {exc!r}")

    threads = [threading.Thread(target=label, args=(i, j)) for i, j in enumerate(judges, 1)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        for judge in judges:
            judge.stop()
    assert problems == [] and len(done) == 5
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT judge, episode_id, label, failure_mode FROM judgments "
                            "WHERE retracted_at IS NULL AND judge LIKE 'wj_'").fetchall()
        every = conn.execute("SELECT count(*) FROM judgments WHERE judge LIKE 'wj_'").fetchone()[0]
    # (every episode on the server: 4, or 3 once the test above sent one back)
    episodes = len(done[1])
    assert episodes >= 3 and all(sorted(seen) == sorted(done[1]) for seen in done.values())
    assert len(rows) == 5 * episodes
    got = {(j, e): (label, mode) for j, e, label, mode in rows}
    for index, seen in done.items():
        for position, episode in enumerate(seen):
            assert got[(f"wj{index}", episode)] == expected_label(index, position)
    modes = sum(1 for i in range(1, 6) for p in range(episodes) if expected_label(i, p)[1])
    assert every == 5 * episodes + modes      # each failure, then its mode, nothing else


def test_a_label_that_cannot_be_written_says_not_saved_and_nothing_moves(template, tmp_path):
    campaign = Path(shutil.copytree(template, tmp_path / template.name))
    assert run_module("bundle", campaign, "--out", tmp_path / "bundle").code == 0
    labels = tmp_path / "bundle" / "labels"
    with WebJudge(tmp_path / "bundle", "--judge", "dora") as judge:
        first = judge.state()["episode"]["id"]
        shutil.rmtree(labels, ignore_errors=True)
        labels.write_text("not a folder")                    # the labels folder cannot be written
        status, state = judge.act("label", "success", first)
        assert status == 200 and state["status"].startswith("NOT SAVED (File exists)")
        assert state["episode"]["id"] == first and state["progress"]["decided"] == 0
        labels.unlink()
        status, state = judge.act("label", "success", first)  # fixed: the same key again
        assert state["status"] == f"Saved: success for {first}" and state["progress"]["decided"] == 1
    assert (labels / "dora.jsonl").read_text().count('"op": "add"') == 1


def test_bad_web_options_are_one_line_and_exit_2(template):
    for args, message in ((["--web", "--host", "256.1.1.1"], "cannot listen there"),
                          (["--web", "--port", "70000"], "a port is 0-65535"),
                          (["--port", "9000"], "--host and --port go with --web")):
        done = run_module("judge", template, "--judge", "alice", *args)
        assert done.code == 2 and len(done.err_lines) == 1 and message in done.err, done.err
