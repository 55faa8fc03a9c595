"""The comparison's HTML in headless Chromium: one self-contained file whose plots all decode
(every image has a natural size) and whose tables carry the comparison's numbers."""

from __future__ import annotations

import json

from support.cli import run_module
from support.compare_campaigns import make_suite
from support.judge_web import browser


def test_compare_html_opens_with_its_plots(tmp_path):
    campaigns = make_suite(tmp_path)
    page_file, json_file = tmp_path / "c.html", tmp_path / "c.json"
    for fmt, out in (("html", page_file), ("json", json_file)):
        result = run_module("compare", *campaigns, "--format", fmt, "--out", out, "--reps", "1000")
        assert result.code == 0, result.err
    doc = json.loads(json_file.read_text())
    with browser() as chrome:
        page = chrome.new_page()
        requests = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(page_file.resolve().as_uri())
        images = page.evaluate("() => [...document.images].map(i => [i.complete, i.naturalWidth, i.alt])")
        rows = page.evaluate("() => [...document.querySelectorAll('table')].map(t => t.rows.length)")
        board = page.evaluate("() => { const t = [...document.querySelectorAll('table')].find("
                              "t => t.rows[0].cells[1].textContent === 'checkpoint');"
                              " return [...t.rows].slice(1).map(r => r.cells[1].textContent); }")
    assert len(images) == 10 and all(done and width > 100 for done, width, _ in images), images
    assert any(alt.startswith("Performance profiles") for _, _, alt in images)
    assert [r for r in requests if not r.startswith(("file:", "data:"))] == []
    assert len(rows) >= 10 and min(rows) >= 2
    assert board == [row["name"] for row in doc["leaderboard"]]
