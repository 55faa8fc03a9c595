"""A private tmux server for tests that need a real terminal (the judge TUI, the operator console).

`tmux` is a test requirement (CI's `.ci/run` installs it); without it these tests fail with the
install line rather than skip.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time

from .requires import require_program


class Tmux:
    """One private tmux server (own socket), so nothing else's sessions are touched."""

    def __init__(self) -> None:
        self.program = require_program("tmux", "these tests drive a real terminal: apt-get install -y tmux "
                                               "(.ci/run installs it)")
        self.socket = f"orchestrator-test-{os.getpid()}-{secrets.token_hex(3)}"

    def start(self, name: str, command: str, cwd, variables: dict[str, str] | None = None,
              width: int = 110, height: int = 32) -> None:
        """A detached session `name` running `command` (a shell string) in `cwd`, started only once
        its pane is `width` x `height` (a detached pane may start at 80x24 and be resized just
        after) and with no stale COLUMNS/LINES (Textual would believe them); `variables` are set
        for it. The pane prints EXIT=<code> when the command ends, then stays 60 s."""
        import shlex

        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in (variables or {}).items())
        shell = (f"until [ \"$(stty size)\" = '{height} {width}' ]; do sleep 0.05; done; unset COLUMNS LINES; "
                 f"cd {shlex.quote(str(cwd))} && {'env ' + env + ' ' if env else ''}{command}; echo EXIT=$?; sleep 60")
        self("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), shell)

    def __call__(self, *args: str) -> str:
        out = subprocess.run([self.program, "-L", self.socket, *args], capture_output=True, text=True,
                             timeout=20)
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

    def wait_gone(self, name: str, text: str, timeout: float = 30.0) -> str:
        """The screen once `text` is no longer on it (a banner answered), polled as `wait_for`."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen(name)
            if text not in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} stayed on the screen:\n{screen}")

    def kill(self) -> None:
        subprocess.run([self.program, "-L", self.socket, "kill-server"], capture_output=True, timeout=20)
