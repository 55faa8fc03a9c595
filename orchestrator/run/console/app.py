"""The operator console: a Textual app for the person at the arm (its `Operator` bridge is `bridge.py`).

What the operator sees, trial by trial:

1. **place**: "put the cube on mark M07", the mark drawn on the layout (all marks dimmed, the
   target highlighted) and described in centimetres; `Enter` starts the episode after a short
   countdown (`space`/`esc` cancels the countdown), `p` pauses / resumes between trials, `q`
   ends the session (resumable).
2. **episode**: the episode timer; `space` or `esc` = emergency stop: the runner's next `poll`
   raises `EmergencyStop`, the runner makes the arm safe and calls `episode_ended`, where the
   console asks why and writes the answer into that `EmergencyStop` (`reason`) before returning. `r` asks for a redo after the
   episode; `p` pauses after this trial.
3. **review**: `Enter` continues, `r` redoes the trial (the reason is asked and returned by
   `episode_ended`). A trial aborted by a fault shows its cause and what to check.
4. **moving**: whenever the arm moves by itself (to rest) the banner says so and `space`/`esc`
   stops it; after any stop the arm holds and the banner asks for `Enter` before it moves again
   (`q` ends the session instead, the arm held until torque goes off).

The console never shows which policy runs: the runner tells it only the `TrialCue` (index,
mark, duration); no call carries a policy label.

Threading: the Textual app runs on the main thread; the runner calls the `ConsoleOperator`
from its own thread. `poll()` only reads an `Event` (no cross-thread call per control step);
the other calls hop onto the app's thread with `call_from_thread` and block on a queue for
the operator's decision. `run_console(layout, session)` wires both together.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, Input, RichLog, Static

from orchestrator.core.errors import Interrupted
from orchestrator.design.protocol import Layout
from orchestrator.run.console.bridge import ConsoleOperator, LogToConsole
from orchestrator.run.console.layout_view import describe_mark, render_layout
from orchestrator.run.console.wedge import exit_if_wedged
from orchestrator.run.halfblock import HalfBlockImage
from orchestrator.run.operator_protocol import (
    ARM_HELD,
    COUNTDOWN_STOPPED,
    RESET_STOPPED,
    STOP_CAUSE_PROMPT,
    TrialCue,
    countdown_banner,
    moving_banner,
)


class OperatorConsole(App):
    """The Textual app (see the module docstring). `operator` is the bridge for the runner."""

    TITLE = "Operator console"
    AUTO_FOCUS = None  # keys go to the console's bindings; the reason box takes focus when shown
    CSS_PATH = "app.tcss"
    BINDINGS = [
        Binding("enter", "enter", "Start / continue"),
        Binding("space", "estop", "E-STOP"),
        Binding("escape", "estop", "E-STOP", show=False, priority=True),  # also while typing a reason
        Binding("r", "redo", "Redo trial"),
        Binding("p", "pause", "Pause/resume"),
        Binding("q", "stop_session", "End session"),
        Binding("o", "override", "Override start check", show=False),
        Binding("ctrl+c", "interrupt", "Interrupt", show=False, priority=True),
    ]

    def __init__(self, layout: Layout, *, countdown_s: float = 3.0, review: bool = True,
                 subtitle: str = "", on_ready: Callable[[], None] | None = None):
        super().__init__()
        self._on_ready = on_ready
        self.layout_model = layout
        self.countdown_s = countdown_s
        self.operator = ConsoleOperator(self, review=review)
        self.state = "waiting"
        self.cue: TrialCue | None = None
        self.paused = False
        self.pause_after_trial = False
        self._countdown_end = 0.0
        self._reason_kind = ""
        self.arm_words = ARM_HELD   # the arm's state as its torque registers last said (`show_arm_state`)
        self.sub_title = subtitle
        self.log_handler = LogToConsole()

    # ---------------------------------------------------------------- widgets
    def compose(self) -> ComposeResult:
        yield Header(show_clock=True)
        yield Static("Waiting for the runner...", id="banner")
        with Horizontal():
            yield Static(render_layout(self.layout_model, None), id="map")
            yield HalfBlockImage(id="still")
            with Vertical(id="side"):
                yield Static("", id="mark")
                yield Static("", id="where")
                yield Static("", id="timer")
                yield Input(placeholder="why? (Enter records it)", id="reason")
                yield RichLog(id="log", wrap=True, markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#reason", Input).display = False
        self.set_interval(0.1, self._tick)
        if self._on_ready is not None:
            self._on_ready()

    def on_unmount(self) -> None:
        self._close_bridge()

    def _close_bridge(self) -> None:
        op = self.operator
        if not op.closed:
            op.closed = True
            op.estop.set()  # an episode in progress stops; the runner makes the arm safe
            op.decisions.put(("closed", None))

    def _banner(self, text: str, cls: str = "") -> None:
        banner = self.query_one("#banner", Static)
        banner.update(text)
        banner.set_classes(cls)

    # ---------------------------------------------------------------- called by the bridge
    def show_cue(self, cue: TrialCue) -> None:
        box = self.query_one("#reason", Input)
        if box.display:  # a question the runner did not wait for: drop it, never block the cue
            box.display = False
            self.set_focus(None)
        self.cue = cue
        self.state = "place"
        if self.pause_after_trial:
            self.paused, self.pause_after_trial = True, False
        self.query_one("#map", Static).update(render_layout(self.layout_model, cue.mark))
        self.query_one("#mark", Static).update(f"Put the cube on mark {cue.mark.id}")
        self.query_one("#where", Static).update(describe_mark(cue.mark))
        self.query_one("#timer", Static).update(
            f"trial {cue.index} of {cue.total} this session · {cue.done_before} of "
            f"{cue.campaign_total} done before · episode {cue.duration_s:g} s")
        self._show_place_banner()

    def _show_place_banner(self) -> None:
        if self.paused:
            self._banner("PAUSED: p resumes", "paused")
        else:
            self._banner(f"Place the cube on {self.cue.mark.id if self.cue else '?'}, step back, press "
                         f"Enter ({self.countdown_s:g} s countdown)")

    def show_policy_countdown(self, stopped: bool) -> None:
        """Right before a policy episode (after the arm's reset, a start-check retry): the
        countdown, or, when the stop key was pressed before it began, the question to start it."""
        if stopped:
            self._hold_countdown()
            return
        self.state = "policy_countdown"
        self._countdown_end = time.monotonic() + self.countdown_s
        self._tick()

    def _hold_countdown(self) -> None:
        self.state = "countdown_held"
        self._banner(f"{COUNTDOWN_STOPPED}, q = end the session", "estop")

    def show_episode(self, cue: TrialCue) -> None:
        self.state = "episode"
        self._banner("EPISODE RUNNING: space or esc = EMERGENCY STOP", "")

    def show_moving(self, doing: str | None) -> None:
        if doing is None:
            if self.state == "moving":
                self.state = "waiting"
                self._banner("Arm still")
            return
        self.state = "moving"
        self._banner(moving_banner(doing), "paused")

    def show_arm_state(self, words: str) -> None:
        """What the servos' torque registers say of the arm (`arm_words`): every later banner
        that names the arm's state says this."""
        self.arm_words = words

    def ask_confirm(self, what: str) -> None:
        self.state = "confirm"
        self._banner(f"{self.arm_words}. Enter = move it {what}, q = end the session "
                     "(torque goes off: support the arm)", "estop")

    def ask_after_reset_stop(self) -> None:
        """After a stop during the arm's reset, the arm back at rest: what next."""
        self.state = "reset_stopped"
        self._banner(RESET_STOPPED, "estop")

    def ask_approval(self, line: str) -> None:
        """Before the arm does what `line` says (it ends with what Enter does): allow it or end."""
        self.state = "confirm"
        self._banner(f"{line}, q = end the session", "estop")

    def show_start_refused(self, line: str, still) -> None:
        """The start-state check's refusal: its line, and the camera's still with the mark (green)
        and the measured cube (red) in place of the layout map."""
        import cv2

        self.state = "start_refused"
        self._banner(f"START CHECK: {line}. Fix the cube, Enter = check again, o = start anyway "
                     "(recorded), q = end the session", "estop")
        image = cv2.imread(str(still))
        view = self.query_one("#still", HalfBlockImage)
        view.image = None if image is None else cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        view.display = image is not None
        self.query_one("#map", Static).display = image is None
        self.add_message(f"start check failed: {line} ({still})")

    def _hide_still(self) -> None:
        self.query_one("#still", HalfBlockImage).display = False
        self.query_one("#map", Static).display = True

    def show_waiting(self, text: str) -> None:
        self.state = "waiting"
        self._banner(text)

    def show_review(self, cue: TrialCue, aborted_reason: str | None, redo_pending: bool) -> None:
        self.state = "review"
        if redo_pending:
            self.ask_reason("redo", cue)
            return
        if aborted_reason:
            self._banner(f"Trial aborted: {aborted_reason}. It will be re-run. Enter continues", "estop")
            self.add_message(f"trial {cue.index} aborted: {aborted_reason}")
        else:
            self._banner("Episode finished. Enter = continue, r = redo this trial (asks why)")

    def ask_reason(self, kind: str, cue: TrialCue | None = None) -> None:
        self.state = "reason"
        self._reason_kind = kind
        if kind == "estop":
            self._banner(f"EMERGENCY STOP: {self.arm_words}, trial aborted. Why? ({STOP_CAUSE_PROMPT})", "estop")
        else:
            self._banner("Redo this trial: why?", "paused")
        box = self.query_one("#reason", Input)
        box.value = ""
        box.display = True
        box.focus()

    def ask_question(self, line: str) -> None:
        """A question an abort left (the operator types the answer, Enter sends it)."""
        self.ask_reason("question")
        self._banner(line, "estop")

    def add_message(self, text: str) -> None:
        self.query_one("#log", RichLog).write(Text(f"{time.strftime('%H:%M:%S')}  {text}"))

    # ---------------------------------------------------------------- keys
    def action_enter(self) -> None:
        if self.state == "start_refused":
            self._answer_refusal("retry", "Checking the start again...")
        elif self.state in ("confirm", "reset_stopped"):
            self.state = "waiting"
            self.operator.decisions.put(("confirm", None))
        elif self.state == "countdown_held":
            self.show_policy_countdown(False)
        elif self.state == "place" and not self.paused:
            self.state = "countdown"
            self._countdown_end = time.monotonic() + self.countdown_s
            self._tick()
        elif self.state == "review":
            self.state = "waiting"
            self._banner("Returning to rest...")
            self.operator.decisions.put(("continue", None))

    def action_estop(self) -> None:
        """The stop key, live in every state: before an episode starts it cancels the countdown;
        anywhere else it stops the episode or the move in progress, or the next move before it
        begins (the arm then holds until the operator confirms)."""
        if self.state == "countdown":
            self.state = "place"
            self._show_place_banner()
            self.add_message("countdown cancelled")
            return
        if self.state in ("policy_countdown", "countdown_held"):
            self._hold_countdown()
            self.add_message("countdown stopped: the episode does not start")
            return
        if self.state == "place":
            self.add_message("stop pressed: the arm is not moving (it holds at rest)")
            return
        self.operator.move_stop.set()
        self.operator.estop.set()
        if self.state == "confirm":
            self.add_message("stop pressed: the arm is already held")
            return
        was = self.state
        if self.state in ("episode", "moving", "starting"):
            self.state = "stopping"
        self._banner("STOP: stopping the arm..." if was != "episode" else "EMERGENCY STOP: stopping the arm...",
                     "estop")
        self.add_message("emergency stop pressed" if was == "episode" else f"stop pressed ({was})")

    def action_redo(self) -> None:
        if self.state == "review":
            self.ask_reason("redo", self.cue)
        elif self.state == "episode":
            self.operator.redo_reason_pending = True
            self.add_message("redo requested: asked after the episode")

    def action_pause(self) -> None:
        if self.state == "reset_stopped":   # p: the operator places the cube
            self.state = "waiting"
            self.operator.decisions.put(("place", None))
            return
        if self.state in ("place", "countdown"):
            self.paused = not self.paused
            self.state = "place"
            self._show_place_banner()
            self.add_message("paused" if self.paused else "resumed")
        elif self.state in ("episode", "review", "waiting"):
            self.pause_after_trial = not self.pause_after_trial
            self.add_message("will pause before the next trial" if self.pause_after_trial
                             else "pause cancelled")

    def action_interrupt(self) -> None:
        self.state = "interrupted"   # the stop key stays live (action_estop) while the arm is made safe
        self._banner("INTERRUPTED: making the arm safe; run the same command again to resume", "estop")
        self.operator.interrupt()

    def action_override(self) -> None:
        if self.state == "start_refused":
            self.add_message("start check overridden by the operator (recorded)")
            self._answer_refusal("override", "Starting the trial on the override...")

    def _answer_refusal(self, decision: str, banner: str) -> None:
        """The operator's answer to a refused start check: the still goes, the runner gets it."""
        self.state = "waiting"
        self._hide_still()
        self._banner(banner)
        self.operator.decisions.put((decision, None))

    def action_stop_session(self) -> None:
        if self.state == "start_refused":
            self._answer_refusal("stop", "Session ended: resume later with the same `orchestrator run` command")
        elif self.state in ("confirm", "reset_stopped"):
            self.state = "waiting"
            self._banner("Session ended with the arm stopped; torque goes off: support the arm")
            self.operator.decisions.put(("stop", None))
        elif self.state in ("place", "countdown_held"):
            self.state = "waiting"
            self._banner("Session ended: resume later with the same `orchestrator run` command")
            self.operator.decisions.put(("stop", None))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if self.state != "reason":
            return
        text = event.value.strip()
        if self._reason_kind == "redo" and not text:
            return  # a redo needs a reason
        event.input.display = False
        self.set_focus(None)
        kind = self._reason_kind
        self.state = "waiting"
        if kind == "estop":
            self.add_message(f"emergency stop recorded: {text or '(no reason given: asked again at the next session)'}")
            self.operator.decisions.put(("estop_reason", text))
        elif kind == "question":
            self.add_message(f"answer: {text or '(none)'}")
            self.operator.decisions.put(("answer", text))
            self._banner("Answer recorded")
            return
        else:
            self.add_message(f"redo recorded: {text}")
            self.operator.decisions.put(("redo", text))
        self._banner("Returning to rest...")

    # ---------------------------------------------------------------- timer
    def _tick(self) -> None:
        for line in self.log_handler.drain():
            self.add_message(line)
        if self.state in ("countdown", "policy_countdown"):
            left = self._countdown_end - time.monotonic()
            if left <= 0:
                self.state = "starting"
                self._banner("GO")
                self.operator.decisions.put(("start", None))
            else:
                self._banner(countdown_banner(math.ceil(left)), "paused")
        elif self.state == "episode" and self.cue is not None:
            el = self.operator.elapsed
            self.query_one("#timer", Static).update(
                f"{el:5.1f} s / {self.cue.duration_s:g} s   (trial {self.cue.index} of {self.cue.total})")


def run_console[T](layout: Layout, session: Callable[[ConsoleOperator], T], *, headless: bool = False,
                **kwargs: Any) -> T:
    """Run `session(operator)` on a worker thread while the console runs on this (main) thread.

    Returns what the session returns, or raises what it raised. Closing the console stops the
    session: an episode in progress gets an emergency stop, the next `before_trial` raises
    `StopRequested`.
    """
    thread: threading.Thread
    app = OperatorConsole(layout, on_ready=lambda: thread.start(), **kwargs)
    outcome: dict[str, Any] = {}
    returned = threading.Event()   # app.run() came back

    def work() -> None:
        try:
            outcome["value"] = session(app.operator)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the main thread
            outcome["error"] = exc
        finally:
            error = outcome.get("error")
            interrupted = isinstance(error, (KeyboardInterrupt, Interrupted)) or app.operator.interrupted
            exit_if_wedged(returned, 130 if interrupted else 1 if error is not None else 0)
            try:
                app.call_from_thread(app.exit)
            except RuntimeError:
                pass

    thread = threading.Thread(target=work, name="orchestrator-session", daemon=True)
    root = logging.getLogger()
    saved_handlers = root.handlers[:]
    root.handlers = [app.log_handler]
    try:
        app.run(headless=headless)
    finally:
        returned.set()
        root.handlers = saved_handlers
    app._close_bridge()
    if thread.ident is not None:
        thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")  # type: ignore[return-value]


def run_with_console[T](protocol: Any, session: Callable[[ConsoleOperator], T], *, headless: bool = False,
                     **kwargs: Any) -> T:
    """`run_console` for a `LoadedProtocol`: its layout, its task as subtitle (not its name: a
    name may spell the policies), and SIGTERM / SIGHUP turned into an interrupt of the session
    (the runner makes the arm safe and raises `Interrupted`, exit 130)."""
    import signal

    holder: dict[str, ConsoleOperator] = {}   # the session's bridge, once the console runs
    kwargs.setdefault("subtitle", protocol.protocol.task)

    def on_signal(signum, frame):  # noqa: ARG001
        op = holder.get("operator")
        if op is not None:
            op.interrupt()

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, on_signal)
        except (ValueError, OSError):  # not the main thread
            pass
    try:
        def session_with_app(op: ConsoleOperator) -> T:
            holder["operator"] = op
            return session(op)

        return run_console(protocol.layout, session_with_app, headless=headless, **kwargs)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
