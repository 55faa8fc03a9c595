"""`orchestrator judge` in a real terminal: a detached tmux session driven with send-keys.

Needs the `tmux` program (CI: install it); skipped with that reason when it is missing.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.judge_campaign import SECRET_TERMS, make_campaign

ROOT = Path(__file__).resolve().parents[1]
TMUX = shutil.which("tmux")

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install tmux)")


class Tmux:
    """One private tmux server (own socket), so nothing else's sessions are touched."""

    def __init__(self) -> None:
        self.socket = f"judge-test-{os.getpid()}-{secrets.token_hex(3)}"

    def __call__(self, *args: str) -> str:
        out = subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True, text=True, timeout=20)
        if out.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def screen(self, name: str) -> str:
        return self("capture-pane", "-p", "-t", name)

    def wait_for(self, name: str, text: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen(name)
            if text in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} did not appear on the screen:\n{screen}")

    def kill(self) -> None:
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True, timeout=20)


def labels(directory: Path) -> list[tuple[str, str | None]]:
    conn = sqlite3.connect(directory / "campaign.db")
    try:
        return [tuple(r) for r in conn.execute(
            "SELECT label, failure_mode FROM judgments WHERE judge = 't' AND retracted_at IS NULL"
            " ORDER BY id")]
    finally:
        conn.close()


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
    # a detached pane may start at 80x24 and be resized just after: start once it is 110x32,
    # with no stale COLUMNS/LINES in the environment (Textual would believe them)
    shell = (f"until [ \"$(stty size)\" = '32 110' ]; do sleep 0.05; done; unset COLUMNS LINES; "
             f"cd {shlex.quote(str(ROOT))} && {command}; echo EXIT=$?; sleep 60")
    tmux = Tmux()
    try:
        tmux("new-session", "-d", "-s", "j1", "-x", "110", "-y", "32", shell)
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
        tmux("new-session", "-d", "-s", "j2", "-x", "110", "-y", "32", shell)
        tmux.wait_for("j2", "2 of 4 judged")
        tmux("send-keys", "-t", "j2", "u")
        tmux.wait_for("j2", "(1 unsure)")
        tmux("kill-session", "-t", "j2")
        assert [label for label, _ in wait_labels(campaign, 3)] == ["success", "failure", "unsure"]
    finally:
        tmux.kill()
