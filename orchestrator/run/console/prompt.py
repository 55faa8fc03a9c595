"""`PromptOperator`: the operator in a plain terminal (`orchestrator run --no-console`).

Same `Operator` contract as the Textual console, on the calling thread, no full-screen UI:
before each trial it prints the mark (id, position, the layout drawn in text) and waits for
Enter (`q` + Enter ends the session, resumable); during the episode the terminal is in cbreak
mode and `space` or `esc` is an emergency stop, `r` asks for a redo after the episode (each
`poll` is one non-blocking `select` on stdin); after an emergency stop or a redo it asks why.
When stdin is not a terminal there is no emergency-stop key (it says so once). Whenever the
arm moves by itself (to rest) the same keys stop it; after a stop it asks for Enter before the
arm moves again.

Ctrl-C (`handle_sigint()`): while the arm is under control (an episode, a move) SIGINT only sets
a flag, and the next `poll`/`check_stop` raises `KeyboardInterrupt` between two steps, never in
the middle of a serial transaction (as the console does); while waiting for the operator's input
it interrupts at once. After that first interrupt every later Ctrl-C (or SIGTERM) only says the
arm is being made safe: none can land inside the stop's serial transactions or the bookkeeping.

It never prints which policy runs: it is only given the `TrialCue`.
"""

from __future__ import annotations

import os
import select
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from orchestrator.design.protocol import Layout, LoadedProtocol
from orchestrator.rigs.base import EmergencyStop
from orchestrator.run.console.layout_view import describe_mark, render_layout
from orchestrator.run.operator_protocol import (
    ARM_HELD,
    COUNTDOWN_STOPPED,
    ESTOP_PENDING,
    RESET_STOPPED,
    STOP_CAUSE_PROMPT,
    StopRequested,
    TrialCue,
    countdown_banner,
    moving_banner,
    stop_cause,
)


class PromptOperator:
    def __init__(self, layout: Layout | LoadedProtocol | None = None, *, countdown_s: float = 3.0,
                 stdin: TextIO | None = None, out: Callable[[str], None] | None = None):
        self.layout = layout.layout if isinstance(layout, LoadedProtocol) else layout
        self.countdown_s = countdown_s
        self.stdin = stdin or sys.stdin
        self.say = out or (lambda text: print(text, flush=True))
        self._tty = False
        self._tty_fd = -1   # the terminal put in cbreak mode (`_cbreak`), while `_tty`
        self._saved: list[Any] | None = None
        self._stop: EmergencyStop | None = None
        self._redo = False
        self._warned = False
        self._last_shown = -1.0
        self._controlling = False   # an episode or a move runs: SIGINT becomes a flag
        self.sigint_pending = False
        self.interrupting = False   # the first interrupt was raised: later ones only count
        self._move_stop = False
        self.arm_words = ARM_HELD   # the arm's state as its torque registers last said (`arm_state`)

    # ---------------------------------------------------------------- Ctrl-C
    def handle_sigint(self) -> Callable[[], None]:
        """Install the SIGINT handler (main thread); returns a function that restores the old one."""
        import signal

        previous = signal.signal(signal.SIGINT, self._on_sigint)

        def restore() -> None:
            signal.signal(signal.SIGINT, previous)

        return restore

    def _on_sigint(self, signum, frame) -> None:  # noqa: ARG002
        if self._controlling or self.interrupting:
            # under control: raised at the next step; after the first interrupt: never raised
            # again, the runner is making the arm safe and recording the abort
            self.sigint_pending = True
            if self.interrupting:
                self.say("interrupt: already stopping, the arm is being made safe")
            return
        self.interrupting = True
        raise KeyboardInterrupt

    def _raise_pending_interrupt(self) -> None:
        if self.sigint_pending and not self.interrupting:
            self.sigint_pending = False
            self.interrupting = True
            self._controlling = False
            self._restore()
            raise KeyboardInterrupt

    # ---------------------------------------------------------------- terminal
    def _fd(self) -> int | None:
        try:
            fd = self.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            return None
        return fd if os.isatty(fd) else None

    def _cbreak(self) -> None:
        fd = self._fd()
        if fd is None:
            if not self._warned:
                self.say("note: stdin is not a terminal: no emergency-stop key; use the arm's power switch")
                self._warned = True
            return
        import termios
        import tty

        self._saved = termios.tcgetattr(fd)
        tty.setcbreak(fd)
        self._tty, self._tty_fd = True, fd

    def _restore(self) -> None:
        if self._tty and self._saved is not None:
            import termios

            termios.tcsetattr(self._tty_fd, termios.TCSADRAIN, self._saved)
        self._tty, self._saved = False, None

    def _line(self, prompt: str) -> str:
        self.say(prompt)
        line = self.stdin.readline()
        if line == "":
            raise StopRequested("no more input on stdin")
        return line.strip()

    # ---------------------------------------------------------------- Operator protocol
    def before_trial(self, cue: TrialCue) -> None:
        self._stop, self._redo = None, False
        self.say("")
        self.say(f"=== trial {cue.index} of {cue.total} this session ({cue.done_before} of "
                 f"{cue.campaign_total} done before) · episode {cue.duration_s:g} s")
        if self.layout is not None:
            self.say(render_layout(self.layout, cue.mark).plain)
        self.say(f"Put the cube on mark {cue.mark.id}  ({describe_mark(cue.mark)})")
        answer = self._line("Enter = start after the countdown, q + Enter = end the session (resumable)")
        if answer.lower().startswith("q"):
            raise StopRequested("session ended by the operator")
        self.countdown(cue)

    def countdown(self, cue: TrialCue) -> None:
        """`countdown_banner` once a second; space or esc (a terminal) stops it: Enter counts
        down again, q + Enter ends the session (nothing moved)."""
        while not self._counted_down():
            if self._line(f"{COUNTDOWN_STOPPED}, q + Enter = end the session").lower().startswith("q"):
                raise StopRequested("session ended by the operator before the episode")

    def _counted_down(self) -> bool:
        """The countdown; False when the stop key cut it short."""
        self._cbreak()
        try:
            for left in range(int(round(self.countdown_s)), 0, -1):
                self.say(countdown_banner(left))
                end = time.monotonic() + 1.0
                while (wait := end - time.monotonic()) > 0:
                    fd = self._tty_fd if self._tty else None
                    if fd is None:
                        time.sleep(wait)
                    elif select.select([fd], [], [], wait)[0] and os.read(fd, 1) in (b" ", b"\x1b"):
                        return False
            return True
        finally:
            self._restore()

    def start_refused(self, cue: TrialCue, line: str, still) -> str:
        self.say(f"START CHECK FAILED: {line}")
        self.say(f"  the camera's view, the mark in green and the cube in red: {still}")
        answer = self._line("fix the cube, then Enter = check again; o + Enter = start anyway (recorded as an "
                            "override); q + Enter = end the session (resumable)").lower()
        if answer.startswith("q"):
            return "stop"
        return "override" if answer.startswith("o") else "retry"

    def episode_started(self, cue: TrialCue) -> None:
        self._last_shown = -1.0
        self._controlling = True
        self._cbreak()
        self.say("EPISODE RUNNING: space or esc = EMERGENCY STOP, r = redo after the episode")

    def poll(self, elapsed_s: float) -> None:
        self._raise_pending_interrupt()
        if self._stop is not None:
            raise self._stop
        if elapsed_s - self._last_shown >= 1.0:
            self._last_shown = elapsed_s
            sys.stdout.write(f"\r  {elapsed_s:5.1f} s")
            sys.stdout.flush()
        if not self._tty:
            return
        fd = self._tty_fd
        while select.select([fd], [], [], 0)[0]:
            key = os.read(fd, 1)
            if key in (b" ", b"\x1b"):
                self._stop = EmergencyStop(ESTOP_PENDING)
                self._restore()
                raise self._stop
            if key in (b"r", b"R"):
                self._redo = True

    def episode_ended(self, cue: TrialCue, aborted_reason: str | None) -> str | None:
        self._controlling = False
        self._restore()
        self.say("")
        if self._stop is not None:
            why = self._line(f"EMERGENCY STOP: {self.arm_words}, trial aborted. Why? ({STOP_CAUSE_PROMPT})")
            self._stop.cause, why = stop_cause(why)
            if why:
                self._stop.reason = f"{ESTOP_PENDING}: {why}"
                self._stop.args = (self._stop.reason,)
            return None
        if aborted_reason:
            self.say(f"trial aborted: {aborted_reason}; it will be re-run")
            return None
        if self._redo:
            why = ""
            while not why:
                why = self._line("Redo this trial: why?")
            return why
        return None

    def message(self, text: str) -> None:
        self.say(text)

    def arm_moving(self, doing: str | None) -> None:
        if doing is None:
            self._controlling = False
            self._restore()
            return
        self._move_stop = False
        self._controlling = True
        self._cbreak()
        self.say(moving_banner(doing))

    def check_stop(self) -> None:
        self._raise_pending_interrupt()
        if self._tty:
            fd = self._tty_fd
            while select.select([fd], [], [], 0)[0]:
                if os.read(fd, 1) in (b" ", b"\x1b"):
                    self._move_stop = True
        if self._move_stop:
            self._move_stop = False
            raise EmergencyStop("arm stopped by the operator during a move")

    def approve(self, line: str) -> None:
        self._controlling = False
        self._restore()
        if self._line(f"{line}, q + Enter = end the session").lower().startswith("q"):
            raise StopRequested("session ended by the operator before the arm moved by itself")

    def after_reset_stop(self) -> str:
        self._controlling = False
        self._restore()
        answer = self._line(RESET_STOPPED.replace("(p)", "(p + Enter)").replace("(q)", "(q + Enter)")).lower()
        if answer.startswith("q"):
            raise StopRequested("session ended by the operator after stopping the reset")
        return "place" if answer.startswith("p") else "again"

    def question(self, line: str) -> str | None:
        self._controlling = False
        self._restore()
        return self._line(line)

    def arm_state(self, words: str) -> None:
        self.arm_words = words

    def confirm_move(self, what: str) -> None:
        self._controlling = False
        self._restore()
        answer = self._line(f"{self.arm_words}. Enter = move it {what}, q + Enter = end the session "
                            "(torque goes off: support the arm)")
        if answer.lower().startswith("q"):
            raise StopRequested("session ended by the operator with the arm stopped")
