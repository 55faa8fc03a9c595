"""`orchestrator judge` in a real terminal: a detached tmux session driven with send-keys.

Needs the `tmux` program (CI installs it); without it the tests fail with the install line.
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

from orchestrator.judging.keys import bar_items
from support.judge_campaign import SECRET_TERMS, campaign_rows, live_judgments, make_campaign
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
        tmux.start("j1", command, ROOT, width=160)
        screen = tmux.wait_for("j1", "0 of 4 judged")
        assert "Success test:" in screen and "1:missed" in screen
        # every key on the bar at 160 columns (80: test_keys_fit_a_person_in_a_real_terminal)
        assert [item for item in bar_items() if item in screen] == bar_items(), screen
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


def test_keys_fit_a_person_in_a_real_terminal(tmp_path):
    """At 80 x 24: every key on the bar (it wraps; it was cut off at 80 and at 160 columns, which
    test_judge_in_tmux checks), the episode opens paused, `x` still works after a person's pause,
    `?` lists every key, a label is changed by going to its episode (`j` N)."""
    from orchestrator.judging.keys import help_lines

    campaign = make_campaign(tmp_path, marks=2)
    command = shlex.join([sys.executable, "-m", "orchestrator", "judge", str(campaign), "--judge", "t"])
    tmux = Tmux()
    try:
        tmux.start("k80", command, ROOT, width=80, height=24)
        screen = tmux.wait_for("k80", "0 of 4 judged")
        assert [item for item in bar_items() if item in screen] == bar_items(), screen
        started = time.monotonic()
        while time.monotonic() - started < 1.5:                   # a person looks at the start: it stays
            screen = tmux.screen("k80")
            assert "t = 0.00 s" in screen and "paused" in screen, screen
            time.sleep(0.2)   # polled through the observation window
        tmux("send-keys", "-t", "k80", "x")
        tmux.wait_for("k80", "- why? 1: cube not on its")          # the reasons: x accepted
        tmux("send-keys", "-t", "k80", "Escape")
        tmux.wait_for("k80", "Invalid start cancelled.")
        tmux("send-keys", "-t", "k80", "?")
        screen = tmux.wait_for("k80", "Every key")
        assert [line for line in help_lines() if line in screen] == help_lines(), screen
        tmux("send-keys", "-t", "k80", "s")                       # closes the list, labels nothing
        tmux.wait_for("k80", "q quit")
        assert labels(campaign) == []
        tmux("send-keys", "-t", "k80", "s")
        tmux.wait_for("k80", "1 of 4 judged")
        tmux("send-keys", "-t", "k80", "j")
        tmux.wait_for("k80", "1:s  2:-")
        tmux("send-keys", "-t", "k80", "1", "Enter")
        tmux.wait_for("k80", "labelled success")
        tmux("send-keys", "-t", "k80", "f")
        tmux.wait_for("k80", "relabelled: it was success")
        assert wait_labels(campaign, 1) == [("failure", None)]
        assert campaign_rows(campaign, "SELECT label, retracted_at IS NOT NULL FROM judgments WHERE judge = 't' "
                                       "ORDER BY id") == [("success", 1), ("failure", 0)]   # the old one kept
        tmux("send-keys", "-t", "k80", "q")
        assert "EXIT=0" in tmux.wait_for("k80", "EXIT=")
    finally:
        tmux.kill()
