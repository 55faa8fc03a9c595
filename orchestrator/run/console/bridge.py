"""The operator console's bridge: `ConsoleOperator`, the `Operator` the runner calls from its own
thread, and the log handler that shows library warnings in the console.

Threading: the Textual app runs on the main thread; the runner calls the `ConsoleOperator`
from its own thread. `poll()` only reads an `Event` (no cross-thread call per control step);
the other calls hop onto the app's thread with `call_from_thread` and block on a queue for
the operator's decision (`app.py`, `run_console`, wires both together)."""

from __future__ import annotations

import collections
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

from textual.app import App

from orchestrator.rigs.base import EmergencyStop
from orchestrator.run.operator_protocol import ESTOP_PENDING, UNANSWERED, StopRequested, TrialCue, stop_cause


class LogToConsole(logging.Handler):
    """Root-logger handler while the console runs: WARNING+ lines (e.g. LeRobot's "goal position
    clamped") go to the console's log, collapsed when repeated, instead of garbling the screen.
    `emit` only appends to a deque (it may run on the control thread every step)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.pending: collections.deque[str] = collections.deque(maxlen=500)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage().strip().splitlines()
            self.pending.append(f"{record.levelname.lower()}: {text[0][:200] if text else record.name}")
        except Exception:  # noqa: BLE001 - never raise from logging
            pass

    def drain(self) -> list[str]:
        counts: dict[str, int] = {}
        while self.pending:
            line = self.pending.popleft()
            counts[line] = counts.get(line, 0) + 1
        return [line + (f" (x{n})" if n > 1 else "") for line, n in counts.items()]


class ConsoleScreen(Protocol):
    """What the bridge shows and asks on the console (app.py's `OperatorConsole`), each call made
    on the app's thread (`call_from_thread`)."""

    def call_from_thread(self, callback: Callable[..., Any], *args: Any) -> Any: ...
    def show_cue(self, cue: TrialCue) -> None: ...
    def show_policy_countdown(self, stopped: bool) -> None: ...
    def show_episode(self, cue: TrialCue) -> None: ...
    def show_moving(self, doing: str | None) -> None: ...
    def show_arm_state(self, words: str) -> None: ...
    def show_waiting(self, text: str) -> None: ...
    def show_review(self, cue: TrialCue, aborted_reason: str | None, redo_pending: bool) -> None: ...
    def show_start_refused(self, line: str, still: Any) -> None: ...
    def add_message(self, text: str) -> None: ...
    def ask_reason(self, kind: str, cue: TrialCue | None = None) -> None: ...
    def ask_question(self, line: str) -> None: ...
    def ask_approval(self, line: str) -> None: ...
    def ask_after_reset_stop(self) -> None: ...
    def ask_confirm(self, what: str) -> None: ...


class ConsoleOperator:
    """The `Operator` the runner talks to; every decision comes from the console's keys."""

    def __init__(self, app: ConsoleScreen, review: bool = True):   # app.py's OperatorConsole
        if not isinstance(app, App):   # the console itself (app.py's OperatorConsole makes its own)
            raise TypeError("ConsoleOperator is made by OperatorConsole (app.operator); to run a session "
                            "with the console use console.run_with_console(protocol, session)")
        self.app: ConsoleScreen = app
        self.review = review
        self.decisions: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.estop = threading.Event()
        self.elapsed = 0.0
        self.redo_reason_pending = False
        self.last_stop: EmergencyStop | None = None
        self.closed = False
        self.interrupted = False
        self.move_stop = threading.Event()

    def interrupt(self) -> None:
        """Ctrl-C / SIGTERM: the runner's next call raises KeyboardInterrupt (arm made safe,
        running trial aborted and re-run on resume). Thread-safe; callable from a signal handler."""
        self.interrupted = True
        self.estop.set()
        self.decisions.put(("interrupt", None))

    # ---------------------------------------------------------------- helpers
    def _call(self, fn: Callable[..., Any], *args: Any) -> None:
        if self.closed:
            return
        try:
            self.app.call_from_thread(fn, *args)
        except RuntimeError:  # the app has exited
            self.closed = True

    def _wait(self, *kinds: str) -> tuple[str, Any]:
        while True:
            kind, value = self.decisions.get()
            if kind in ("closed", "interrupt"):
                self.decisions.put((kind, value))  # sticky: every later wait sees it too
                return kind, value
            if kind in kinds:
                return kind, value

    def _drain(self) -> None:
        try:
            while True:
                item = self.decisions.get_nowait()
                if item[0] in ("closed", "interrupt"):
                    self.decisions.put(item)
                    return
        except queue.Empty:
            pass

    # ---------------------------------------------------------------- Operator protocol
    def before_trial(self, cue: TrialCue) -> None:
        if self.interrupted:
            raise KeyboardInterrupt
        if self.closed:
            raise StopRequested("the operator console was closed")
        self._drain()
        self.estop.clear()
        self.move_stop.clear()
        self.redo_reason_pending = False
        self._call(self.app.show_cue, cue)
        kind, _ = self._wait("start", "stop")
        if kind == "interrupt":
            raise KeyboardInterrupt
        if kind == "closed":
            raise StopRequested("the operator console was closed")
        if kind != "start":
            raise StopRequested("session ended by the operator")

    def countdown(self, cue: TrialCue) -> None:
        """The countdown before a policy episode; a stop pressed before it (during the start
        check) holds it until Enter. Enter at the end of it, or `q` ends the session."""
        if self.interrupted:
            raise KeyboardInterrupt
        if self.closed:
            raise StopRequested("the operator console was closed")
        self._drain()
        stopped = self.estop.is_set() or self.move_stop.is_set()
        self._call(self.app.show_policy_countdown, stopped)
        kind, _ = self._wait("start", "stop")
        if kind == "interrupt":
            raise KeyboardInterrupt
        if kind != "start":
            raise StopRequested("session ended by the operator before the episode" if kind == "stop"
                                else "the operator console was closed")
        self.estop.clear()
        self.move_stop.clear()

    def episode_started(self, cue: TrialCue) -> None:
        self.elapsed = 0.0
        self.last_stop = None
        self._call(self.app.show_episode, cue)

    def poll(self, elapsed_s: float) -> None:
        self.elapsed = elapsed_s
        if self.estop.is_set():
            if self.interrupted:
                raise KeyboardInterrupt
            if self.last_stop is None:
                self.last_stop = EmergencyStop(ESTOP_PENDING)
            raise self.last_stop

    def episode_ended(self, cue: TrialCue, aborted_reason: str | None) -> str | None:
        if self.last_stop is not None or self.estop.is_set():
            stop = self.last_stop or EmergencyStop(ESTOP_PENDING)
            self.last_stop = stop
            self._call(self.app.ask_reason, "estop", cue)
            kind, text = self._wait("estop_reason")
            # Ctrl-C, SIGTERM, SIGHUP or a closed console at the question: no reason was given
            stop.cause, text = stop_cause(text or "") if kind == "estop_reason" else (UNANSWERED, "")
            if text:
                stop.reason = f"{ESTOP_PENDING}: {text}"
                stop.args = (stop.reason,)
            self.estop.clear()
            return None
        if not self.review and aborted_reason is None and not self.redo_reason_pending:
            self._call(self.app.show_waiting, "episode done")
            return None
        self._call(self.app.show_review, cue, aborted_reason, self.redo_reason_pending)
        kind, text = self._wait("continue", "redo")
        self.redo_reason_pending = False
        if kind == "redo":
            return text or "redo requested by operator"
        return None

    def start_refused(self, cue: TrialCue, line: str, still) -> str:
        if self.interrupted:
            raise KeyboardInterrupt
        self._drain()
        self._call(self.app.show_start_refused, line, still)
        kind, _ = self._wait("retry", "override", "stop")
        if kind == "interrupt":
            raise KeyboardInterrupt
        return {"retry": "retry", "override": "override"}.get(kind, "stop")

    def message(self, text: str) -> None:
        self._call(self.app.add_message, text)

    def arm_moving(self, doing: str | None) -> None:
        """A stop pressed before the move began (during a review, a prompt) is kept: the move
        stops at its first step. It is cleared only by the operator's confirmation."""
        self._call(self.app.show_moving, doing)

    def check_stop(self) -> None:
        """Ctrl-C / SIGTERM / SIGHUP (`interrupt`) and the stop key, in every console state."""
        if self.interrupted:
            raise KeyboardInterrupt
        if self.move_stop.is_set() or (self.closed and self.estop.is_set()):
            self.move_stop.clear()
            raise EmergencyStop("arm stopped by the operator during a move")

    def _confirmed(self, ask, text: str, ended: str) -> None:
        """Show the question (`ask(text)`) and wait for Enter; `q` raises StopRequested(`ended`)."""
        if self.interrupted:
            raise KeyboardInterrupt
        self._drain()
        self._call(ask, text)
        kind, _ = self._wait("confirm", "stop")
        if kind == "interrupt":
            raise KeyboardInterrupt
        if kind != "confirm":
            raise StopRequested(ended)

    def question(self, line: str) -> str | None:
        """A question an abort left (`run/abort_questions.py`): `line` and a text box."""
        if self.interrupted:
            raise KeyboardInterrupt
        if self.closed:
            raise StopRequested("the operator console was closed")
        self._drain()
        self._call(self.app.ask_question, line)
        kind, text = self._wait("answer")
        if kind == "interrupt":
            raise KeyboardInterrupt
        if kind == "closed":
            raise StopRequested("the operator console was closed")
        return text or ""

    def approve(self, line: str) -> None:
        self._confirmed(self.app.ask_approval, line, "session ended by the operator before the arm moved by itself")

    def after_reset_stop(self) -> str:
        if self.interrupted:
            raise KeyboardInterrupt
        self._drain()
        self._call(self.app.ask_after_reset_stop)
        kind, _ = self._wait("confirm", "place", "stop")
        if kind == "interrupt":
            raise KeyboardInterrupt
        if kind in ("stop", "closed"):
            raise StopRequested("session ended by the operator after stopping the reset")
        return "again" if kind == "confirm" else "place"

    def arm_state(self, words: str) -> None:
        self._call(self.app.show_arm_state, words)

    def confirm_move(self, what: str) -> None:
        self._confirmed(self.app.ask_confirm, what, "session ended by the operator with the arm stopped")
        # the stop that held the arm, or one pressed while it was held, is answered by this
        # confirmation: without a cue before the next episode (the arm's reset placed the cube)
        # nothing else would clear it, and the episode would begin stopped
        self.move_stop.clear()
        self.estop.clear()
