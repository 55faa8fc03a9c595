"""Progress with an ETA for `run`, `demo` and `export`: a bar on a terminal (rich, which comes with
Textual), one plain line per step elsewhere (pipes, logs, the operator console, tests).

The line reads `trial 7/40  mark M07  elapsed 1:23  ETA 4:56`; the ETA is the mean time per step
so far times the steps left. Nothing here ever names a policy."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any


def clock(seconds: float) -> str:
    """m:ss, or h:mm:ss from an hour; --:-- when unknown."""
    if seconds != seconds:  # NaN
        return "--:--"
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}" if seconds < 3600 else \
        f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def say_flushed(text: str) -> None:
    """The runners' default output: one line, flushed (a log tailing it sees each trial at once)."""
    print(text, flush=True)


def terminal_for(say: Callable[[str], None]) -> Any:
    """A rich Console on stdout when the output goes through the default printer (`say_flushed`)
    to a terminal, else None (plain lines: a caller's own `say`, pipes, logs)."""
    if say is not say_flushed or not sys.stdout.isatty():
        return None
    from rich.console import Console

    return Console()


class ProgressBar:
    """`total` steps of which `done` were done before; `step(note)` after each one."""

    def __init__(self, total: int, done: int, unit: str, say: Callable[[str], None], console: Any = None):
        self.total, self.done_before, self.unit, self.say = total, done, unit, say
        self.started = time.monotonic()
        self.completed_now = 0
        self._bar = None
        if console is not None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(TextColumn(f"{unit}s"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[note]}"),
                                 TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console)
            self._task = self._bar.add_task(unit, total=total, completed=done, note="")
            self._bar.start()

    def step(self, note: str) -> None:
        self.completed_now += 1
        done = self.done_before + self.completed_now
        if self._bar is not None:
            self._bar.update(self._task, completed=done, note=note)
            return
        elapsed = time.monotonic() - self.started
        eta = elapsed / self.completed_now * (self.total - done)
        self.say(f"{self.unit} {done}/{self.total}  {note}  elapsed {clock(elapsed)}  ETA {clock(eta)}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
