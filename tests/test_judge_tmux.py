"""`orchestrator judge` in a real terminal: a detached tmux session driven with send-keys.

Needs the `tmux` program (CI installs it); without it the tests fail with the install line.
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

from support.judge_campaign import SECRET_TERMS, live_judgments, make_campaign
from support.tmux import Tmux

ROOT = Path(__file__).resolve().parents[1]


def labels(directory: Path) -> list[tuple[str, str | None]]:
    return live_judgments(directory, "t", columns="label, failure_mode")


def wait_labels(directory: Path, count: int, timeout: float = 10.0) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = labels(directory)
        if len(found) >= count:
            return found
        time.sleep(0.1)
    return labels(directory)


def test_judge_in_tmux(tmp_path):
    campaign = make_campaign(tmp_path, marks=2)
    command = shlex.join([sys.executable, "-m", "orchestrator", "judge", str(campaign), "--judge", "t"])
    tmux = Tmux()
    try:
        tmux.start("j1", command, ROOT)
        screen = tmux.wait_for("j1", "0 of 4 judged")
        assert "Success test:" in screen and "1:missed" in screen
        # the terminal's answers to textual-image's queries were not read as keys (c = camera)
        tmux.wait_for("j1", "camera: front", timeout=10)
        title = tmux("display-message", "-p", "-t", "j1", "#{pane_title}").strip()
        assert title.startswith("Blind judging - judge t - campaign ")   # not the command line
        tmux("send-keys", "-t", "j1", "s")
        tmux.wait_for("j1", "1 of 4 judged")
        assert wait_labels(campaign, 1) == [("success", None)]
        tmux("send-keys", "-t", "j1", "f")
        tmux.wait_for("j1", "2 of 4 judged")
        tmux("send-keys", "-t", "j1", "3")
        tmux.wait_for("j1", "failure mode 'dropped'")
        assert wait_labels(campaign, 2) == [("success", None), ("failure", "dropped")]
        tmux("send-keys", "-t", "j1", "q")
        screen = tmux.wait_for("j1", "EXIT=")
        assert "EXIT=0" in screen and "judge t: 2 of 4 episodes judged" in screen
        for term in SECRET_TERMS[:-1]:
            assert term not in screen

        # resume, label one, then the terminal goes away without `q`: the label is kept
        tmux.start("j2", command, ROOT)
        tmux.wait_for("j2", "2 of 4 judged")
        tmux("send-keys", "-t", "j2", "u")
        tmux.wait_for("j2", "(1 unsure)")
        tmux("kill-session", "-t", "j2")
        assert [label for label, _ in wait_labels(campaign, 3)] == ["success", "failure", "unsure"]
    finally:
        tmux.kill()
