"""The HTML report in a real browser (headless Chromium): it loads as one self-contained file,
its tables are real `<table>` elements with the report's numbers, it renders (screenshot) and
prints (PDF)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from orchestrator.analysis.outcomes_csv import load_outcomes_csv
from orchestrator.analysis.report import build_report, render

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    pytest.fail("headless Chromium is needed for the HTML report test: install it with "
                "`apt-get install chromium` (.ci/run does)")


def browse(tmp_path: Path, *args: str, name: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{name}"          # a fresh profile per run
    return subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=180)


class Tables(HTMLParser):
    """Every <table> as rows of cell texts; and whether a <pre> or a script/remote resource occurs."""

    def __init__(self):
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.tags: set[str] = set()
        self.remote: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.remote += [v for k, v in attrs if k in ("src", "href") and v and not v.startswith("data:")]
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.mark.slow
def test_html_report_in_headless_chromium(tmp_path):
    rows = ["layout,policy,success,stratum"]
    cells = [(1, 1)] * 33 + [(1, 0)] * 9 + [(0, 1)] * 1 + [(0, 0)] * 7
    for i, (a, b) in enumerate(cells):
        stratum = "edge" if i % 2 else "centre"
        rows += [f"L{i:03d},A,{a},{stratum}", f"L{i:03d},B,{b},{stratum}"]
    (tmp_path / "o.csv").write_text("\n".join(rows) + "\n")
    report = build_report(load_outcomes_csv(tmp_path / "o.csv"))
    page = tmp_path / "report.html"
    page.write_text(render(report, "html"))
    url = page.resolve().as_uri()

    dom = browse(tmp_path, "--dump-dom", url, name="dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = Tables()
    parsed.feed(dom.stdout)
    assert "pre" not in parsed.tags and "script" not in parsed.tags and parsed.remote == []
    policies = next(t for t in parsed.tables if t[0][:3] == ["policy", "successes", "95% CI"])
    a, b = (p for p in report.policies)
    assert policies[1][:3] == ["A", f"{a.successes}/{a.trials} (84%)", f"[{a.wilson.lo:.3f}, {a.wilson.hi:.3f}]"]
    assert policies[2][:2] == ["B", f"{b.successes}/{b.trials} (68%)"]
    paired = next(t for t in parsed.tables if t[0] == ["", "B succeeds", "B fails"])
    assert paired[1:] == [["A succeeds", "both: 33", "A only: 9"], ["A fails", "B only: 1", "neither: 7"]]
    assert len(parsed.tables) >= 5          # policies, paired, strata, failure modes, time, drift
    assert dom.stdout.count("data:image/png;base64,") == 4

    shot = tmp_path / "shot.png"
    screenshot = browse(tmp_path, f"--screenshot={shot}", "--window-size=1000,1400", url, name="shot")
    assert screenshot.returncode == 0 and shot.is_file(), screenshot.stderr[-2000:]
    assert png_size(shot) == (1000, 1400)
    assert shot.stat().st_size > 30_000     # the page drew text, tables and plots, not a blank

    pdf = tmp_path / "report.pdf"
    printed = browse(tmp_path, f"--print-to-pdf={pdf}", "--no-pdf-header-footer", url, name="pdf")
    assert printed.returncode == 0 and pdf.is_file(), printed.stderr[-2000:]
    body = pdf.read_bytes()
    pages = len(re.findall(rb"/Type\s*/Page(?!s)", body))
    assert body.startswith(b"%PDF") and 2 <= pages <= 12, pages   # the whole report, on A4/Letter pages
