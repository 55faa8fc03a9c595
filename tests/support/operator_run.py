"""`orchestrator run --no-console` at a real-arm profile in a fresh process, as an operator at a
plain terminal drives it: Enter on stdin, the printed lines read as they come."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time

from support.repo import REPO


def start_run(protocol, rig, out, *extra: str, env: dict[str, str], enters: int = 50
              ) -> tuple[subprocess.Popen, queue.Queue]:
    """Start the run with `enters` Enter presses already typed (one for every "put the cube on
    the mark" prompt; 0: the test presses Enter itself, `press_enter`); returns the process and
    a queue of its stdout lines."""
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(protocol), "--rig", str(rig),
                             "--no-console", "--allow-no-stop-key", "--out", str(out), *extra],
                            cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    if enters:
        proc.stdin.write("\n" * enters)
        proc.stdin.flush()
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    return proc, lines


def press_enter(proc: subprocess.Popen) -> None:
    proc.stdin.write("\n")
    proc.stdin.flush()


def wait_for_line(lines: queue.Queue, text: str, timeout_s: float, seen: list[str] | None = None) -> list[str]:
    """Read lines until one holds `text` (appended to `seen`, returned); AssertionError with the
    last of what was printed after `timeout_s`."""
    seen = [] if seen is None else seen
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            seen.append(lines.get(timeout=0.2))
        except queue.Empty:
            continue
        if text in seen[-1]:
            return seen
    raise AssertionError(f"no {text!r} within {timeout_s} s; the run printed:\n{''.join(seen)[-3000:]}")
