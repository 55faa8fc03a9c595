"""The operator: the person at the arm, as the runner sees them.

Between trials the runner asks the operator to put the cube on a mark and waits until they
start the episode; during an episode it polls for an emergency stop; whenever the arm moves by
itself (to rest) the same stop key is live (`arm_moving`, `check_stop`), and after a stop the
arm moves again only when the operator confirms (`confirm_move`). Hardware campaigns use
the Textual operator console (`console/`); simulation uses `AutoOperator` (nobody at the arm).
The operator never learns which policy runs: none of these calls carries the policy label.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from orchestrator.design.protocol import Mark


@dataclass(frozen=True)
class TrialCue:
    """What the operator is told before a trial: position k of N and the mark (no policy)."""

    index: int          # 1-based position among the trials of this session still to run
    total: int
    done_before: int    # trials already done in the campaign
    campaign_total: int
    mark: Mark
    duration_s: float


# The reasons an operator chooses from after an emergency stop (the protocol's `aborts` rules say
# what each counts as: by default an unsafe motion is the policy's failure, the others re-run).
STOP_CAUSES = {"1": ("unsafe", "unsafe motion"), "2": ("misplaced", "cube misplaced"), "3": ("other", "other")}
STOP_CAUSE_PROMPT = "1 = unsafe motion, 2 = cube misplaced, 3 = other; then a note"


ARM_HELD = "ARM STOPPED (holding)"
ARM_RELEASED = "ARM RELEASED (limp, torque off)"


def arm_words(torque: Mapping[str, bool | None]) -> str:
    """What every banner that names the arm's state says, from its servos' Torque_Enable
    registers as just read (`Rig.torque_enabled`: motor -> on, off, or None for no answer):
    `ARM_HELD` when all are on, `ARM_RELEASED` when all are off, else which are which. A rig
    without servos (empty) holds its joints: `ARM_HELD`."""
    on = [m for m, v in torque.items() if v]
    off = [m for m, v in torque.items() if v is False]
    silent = [m for m, v in torque.items() if v is None]
    if not off and not silent:
        return ARM_HELD
    if not on and not silent:
        return ARM_RELEASED
    parts = [f"torque off: {', '.join(off)}" if off else "", f"torque on: {', '.join(on)}" if on else "",
             f"not answering: {', '.join(silent)}" if silent else ""]
    return f"ARM PARTLY RELEASED ({'; '.join(p for p in parts if p)}): support the arm"


def countdown_banner(seconds_left: int) -> str:
    """The line shown before every policy episode, whatever came before it (the operator's Enter,
    the arm's own reset, a start-check retry): the stop key cancels the episode's start."""
    return f"ARM WILL MOVE (policy) in {seconds_left} s: space = stop"


COUNTDOWN_STOPPED = "COUNTDOWN STOPPED: the arm holds at rest. Enter = count down again"
RESET_STOPPED = "RESET STOPPED, the arm at rest: reset again (Enter), place it yourself (p), end (q)"


def moving_banner(doing: str) -> str:
    """The line shown while the arm moves by itself, `doing` being what `arm_moving` was told:
    "ARM MOVING TO REST: ...", and for the cube reset "ARM RESETTING THE CUBE: ..."."""
    return f"ARM {doing.upper()}: space or esc = STOP"


UNANSWERED = "unanswered"   # the cause of a stop whose question got no answer (class operator_unanswered)


def stop_cause(answer: str) -> tuple[str, str]:
    """(cause, reason text) from the operator's answer after a stop: a leading 1/2/3 picks the
    cause (`unsafe`, `misplaced`, `other`), the rest is the note; an empty answer is no answer
    (`unanswered`); anything else is `other`."""
    answer = answer.strip()
    if not answer:
        return UNANSWERED, ""
    head, _, rest = answer.partition(" ")
    if head in STOP_CAUSES:
        cause, words = STOP_CAUSES[head]
        return cause, f"{words}: {rest.strip()}" if rest.strip() else words
    return "other", answer


AUTO_START_TRIES = 3   # start checks in a row an unattended session tries before it ends
ESTOP_PENDING = "emergency stop by operator"   # the reason of a stop key press until the operator says why


class StopRequested(Exception):
    """Raised by an operator to stop the campaign between trials (clean stop, resumable)."""



class Operator(Protocol):
    def before_trial(self, cue: TrialCue) -> None:
        """Block until the cube is on the mark and the operator starts the episode.

        Raise `StopRequested` to end the session cleanly.
        """
        ...

    def countdown(self, cue: TrialCue) -> None:
        """Right before a policy episode: `countdown_banner` for the operator's countdown; the
        stop key cancels it (`COUNTDOWN_STOPPED`: Enter counts down again). Raise `StopRequested`
        when the operator ends the session there instead (nothing moved)."""
        ...

    def episode_started(self, cue: TrialCue) -> None: ...

    def poll(self, elapsed_s: float) -> None:
        """Called every control step; raise `EmergencyStop` to abort the episode."""
        ...

    def episode_ended(self, cue: TrialCue, aborted_reason: str | None) -> str | None:
        """Called after the episode; return a redo reason to re-run this trial, else None."""
        ...

    def message(self, text: str) -> None:
        """Show a line to the operator (progress, warnings, what to check after a fault)."""
        ...

    def arm_moving(self, doing: str | None) -> None:
        """The arm is about to move by itself (`doing`: what it does, a phrase such as "moving to
        rest" or "resetting the cube"), or has stopped (None)."""
        ...

    def check_stop(self) -> None:
        """Called before every step of a move: raise `EmergencyStop` if the stop key was hit."""
        ...

    def confirm_move(self, what: str) -> None:
        """After a stop: block until the operator confirms the arm may move `what` again;
        raise `StopRequested` to end the session instead (the arm stays held)."""
        ...

    def approve(self, line: str) -> None:
        """Block until the operator allows what `line` says the arm will do; `line` ends with
        what Enter does ("... Enter = allow it"). Once a session for `reset: auto` on a real arm,
        and at each step of guiding the arm by hand. Raise `StopRequested` to end the session
        instead."""
        ...

    def after_reset_stop(self) -> str:
        """After a stop during the arm's reset, once the arm is back at rest: "again" (Enter: the
        arm resets the cube again) or "place" (p: the operator places it); raise `StopRequested`
        (q) to end the session. Never a reset that goes on by itself after the stop."""
        ...

    def arm_state(self, words: str) -> None:
        """The arm's state as its torque registers say now (`arm_words`), told after every stop
        and before every question about it: every later banner that names the state says it."""
        ...

    def question(self, line: str) -> str | None:
        """Ask the operator `line` (a question an abort left: `run/abort_questions.py`) and block
        for the typed answer ("" for none); None when nobody is at the arm to answer. Ctrl-C
        raises KeyboardInterrupt; a closed console or stdin raises StopRequested."""
        ...

    def start_refused(self, cue: TrialCue, line: str, still: Path) -> str:
        """The start-state check refused the trial (`line`: what is wrong; `still`: the camera's
        image with the mark and the cube drawn): "retry" once the cube is corrected, "override"
        to start anyway (recorded), "stop" to end the session; "unresolved": nobody can correct
        it (an unattended session: it ends as a failure, resumable)."""
        ...


class AutoOperator:
    """No one at the arm (simulation): never waits, never stops; messages go to a callback."""

    def __init__(self, say=print):
        self._say = say
        self._refused: dict[tuple[int, str], int] = {}

    def before_trial(self, cue: TrialCue) -> None:
        return None

    def countdown(self, cue: TrialCue) -> None:
        return None

    def episode_started(self, cue: TrialCue) -> None:
        return None

    def poll(self, elapsed_s: float) -> None:
        return None

    def episode_ended(self, cue: TrialCue, aborted_reason: str | None) -> str | None:
        return None

    def message(self, text: str) -> None:
        self._say(text)

    def arm_moving(self, doing: str | None) -> None:
        return None

    def check_stop(self) -> None:
        return None

    def confirm_move(self, what: str) -> None:
        return None

    def approve(self, line: str) -> None:
        return None

    def after_reset_stop(self) -> str:
        return "again"

    def question(self, line: str) -> str | None:
        self._say(line)
        return None

    def arm_state(self, words: str) -> None:
        return None

    def start_refused(self, cue: TrialCue, line: str, still: Path) -> str:
        """Nobody can correct the cube: the simulated hand places it again, up to
        `AUTO_START_TRIES` checks in a row, then "unresolved"."""
        key = (cue.index, cue.mark.id)
        self._refused[key] = self._refused.get(key, 0) + 1
        return "retry" if self._refused[key] < AUTO_START_TRIES else "unresolved"
