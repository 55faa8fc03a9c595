"""The operator: the person at the arm, as the runner sees them.

Between trials the runner asks the operator to put the cube on a mark and waits until they
start the episode; during an episode it polls for an emergency stop; whenever the arm moves by
itself (to rest) the same stop key is live (`arm_moving`, `check_stop`), and after a stop the
arm moves again only when the operator confirms (`confirm_move`). Hardware campaigns use
the Textual operator console (`console/`); simulation uses `AutoOperator` (nobody at the arm).
The operator never learns which policy runs: none of these calls carries the policy label.
"""

from __future__ import annotations

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
        """Block until the operator allows what `line` says the arm will do (once a session:
        `reset: auto` on a real arm); raise `StopRequested` to end the session instead."""
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

    def question(self, line: str) -> str | None:
        self._say(line)
        return None

    def start_refused(self, cue: TrialCue, line: str, still: Path) -> str:
        """Nobody can correct the cube: the simulated hand places it again, up to
        `AUTO_START_TRIES` checks in a row, then "unresolved"."""
        key = (cue.index, cue.mark.id)
        self._refused[key] = self._refused.get(key, 0) + 1
        return "retry" if self._refused[key] < AUTO_START_TRIES else "unresolved"
