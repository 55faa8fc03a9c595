"""Progress with an ETA (`run`, `demo`, `export`): a rich bar on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io
import re

from orchestrator.core.progress import ProgressBar, clock
from orchestrator.run.bookkeeping import Progress


def test_plain_lines_carry_count_note_elapsed_and_eta():
    lines: list[str] = []
    progress = Progress(total=10, done_before=4, say=lines.append)
    progress.update("M07")
    progress.update("M02")
    assert [line.split("  elapsed")[0] for line in lines] == ["trial 5/10  mark M07", "trial 6/10  mark M02"]
    assert all(re.search(r"elapsed \d+:\d\d  ETA \d+:\d\d$", line) for line in lines)
    assert (clock(59.6), clock(61), clock(3725), clock(float("nan"))) == ("1:00", "1:01", "1:02:05", "--:--")


def test_a_terminal_gets_a_bar_with_eta():
    from rich.console import Console

    out = io.StringIO()
    lines: list[str] = []
    bar = ProgressBar(4, 1, "episode", lines.append, Console(file=out, force_terminal=True, width=120))
    for mark in ("M01", "M02"):
        bar.step(f"mark {mark}")
    bar.close()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())   # drop terminal control sequences
    assert lines == []                                   # no plain lines under a bar
    assert "episodes" in text and "3/4" in text and "mark M02" in text and "ETA" in text
    assert "━" in text                                   # the bar itself
