"""The operator's word on an abort that the moment of the abort did not give.

Two questions (`store/abort_answers.py` keeps the answers; neither names the policy that ran):

- a stop whose reason was never given (class `operator_unanswered`): "why was it stopped?",
  answered as at the stop's own prompt (1 = unsafe motion, 2 = cube misplaced, 3 = other);
- a servo overload or overcurrent during an episode: "did the arm push into something, or was it
  the hardware?" (p / h / ? = not known), asked at the alarm itself (`after_servo_alarm`) and,
  when it went unanswered there, again.

`ask_open_questions` asks every open one at the start of a session (`run_campaign`), before
the policies are loaded and the arm is connected (nothing moves, nothing is re-run before the
operator has answered or ended the session). A station's session (`run --station NAME`) asks
only about the aborts of that station's own sessions (`of_station`: the session in which the
attempt ended, labelled with its station when it ended, or a killed session of the station's
last process), so each arm's operator answers for that arm; a plain `run` asks about every one. An empty answer asks again. The answer is recorded beside the abort and shown in the
report; how the abort counts was settled by the protocol's rules when it was recorded.

After a servo alarm or a servo reset the arm cannot be moved by this session (an STS3215 keeps
its overload bit until its power is cycled; a reset servo comes back with torque off), so
`after_servo_alarm` offers only what works: support the arm, then torque off; power-cycle the
arm; run again (the next run reads the servos' Status on a bare bus before anything else).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from orchestrator.run.operator_protocol import STOP_CAUSE_PROMPT, UNANSWERED, Operator, stop_cause

ALARM_ANSWERS = {"p": "pushed into something (the table, the cube, a joint stop)",
                 "h": "the hardware (supply, cable, servo)", "?": "not known"}
ALARM_CHOICES = "p = it pushed into something (the table, the cube, a joint stop), h = the hardware, ? = not known"
POWER_CYCLE = ("switch the arm's power supply off and on (the servo keeps its alarm until then; its torque is "
               "off), then run the same command again")


def alarm_answer(text: str) -> str | None:
    """`pushed into something ...: note` from `p note` (h, ? likewise); None for anything else."""
    head, _, note = text.strip().partition(" ")
    words = ALARM_ANSWERS.get(head.lower())
    if words is None:
        return None
    return f"{words}: {note.strip()}" if note.strip() else words


def stop_answer(text: str) -> str | None:
    """The reason text of an answer as at the stop's prompt (`unsafe motion: it swung`); None
    for an empty one."""
    cause, words = stop_cause(text)
    return None if cause == UNANSWERED else words


def question_line(q: dict[str, Any]) -> tuple[str, Callable[[str], str | None]]:
    """The question for an open abort of `AbortAnswers.questions()`, and how its answer reads."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(q["ended_at"])) if q.get("ended_at") else "earlier"
    trial = f"trial {q['slot'] + 1} (mark {q['mark_id']}), stopped {when}"
    if q["abort_class"] == "operator_unanswered":
        return (f"BEFORE ANYTHING MOVES: {trial}: no reason was given for the stop. Why was it stopped? "
                f"({STOP_CAUSE_PROMPT})", stop_answer)
    return (f"BEFORE ANYTHING MOVES: {trial} by a servo {q['abort_cause']}: what happened? ({ALARM_CHOICES}; "
            "then a note)", alarm_answer)


def of_station(sessions: list[dict[str, Any]], station: str,
               last_process: tuple[str, int] | None = None) -> Callable[[dict[str, Any]], bool]:
    """Whether an open question (`AbortAnswers.questions()`) is station `station`'s: its attempt
    ended within a session of that station. A session that ended is the station's when its
    recorded outcome ends with `(station NAME)` (`run_session`'s label). A session that never
    ended (SIGKILL, power loss: no outcome recorded) is the station's when it ran in the
    station's last registered process, `last_process` = (host, pid) (`leases.station_process`,
    read before this session registers its own); it spans from its start on."""
    label = f"(station {station})"
    spans = [(s["started_at"], s["ended_at"]) for s in sessions
             if s.get("ended_at") is not None and (s.get("outcome") or "").endswith(label)]
    if last_process is not None:
        spans += [(s["started_at"], float("inf")) for s in sessions
                  if s.get("ended_at") is None and (s.get("host"), s.get("pid")) == last_process]
    return lambda q: q.get("ended_at") is not None and any(a <= q["ended_at"] <= b for a, b in spans)


def ask_open_questions(store: Any, operator: Operator, say: Callable[[str], None],
                       asks: Callable[[dict[str, Any]], bool] | None = None) -> int:
    """Ask every open question of the campaign (oldest first; with `asks`, those it accepts)
    and record each answer; returns how many were answered. Nobody to answer (`question`
    returns None): they stay open."""
    answered = 0
    for q in store.questions():
        if asks is not None and not asks(q):
            continue
        line, read = question_line(q)
        while True:
            text = operator.question(line)
            if text is None:
                return answered
            answer = read(text)
            if answer is not None:
                break
        store.answer_abort(q["id"], answer)
        answered += 1
        say(f"trial {q['slot'] + 1}: answer recorded ({answer})")
    return answered


def after_servo_alarm(store: Any, attempt: int | None, fault_line: str, policy_alarm: bool, operator: Operator) -> None:
    """The prompt after a servo alarm or reset stopped an episode (`attempt`) or a move of the
    arm by itself (None): only what works (support the arm; torque goes off when the session
    ends; power-cycle; run again), and, for an overload or overcurrent in an episode, what it
    looked like (recorded; an unanswered one is asked at the next session). Ctrl-C or a closed
    console leave the question open."""
    head = (f"SERVO ALARM: {fault_line}. The arm cannot move again in this session. Support the arm: its "
            f"torque goes off when you answer; then {POWER_CYCLE}.")
    if not policy_alarm or attempt is None:
        operator.question(f"{head} Enter = torque off")
        return
    text = operator.question(f"{head} What happened? ({ALARM_CHOICES}; then a note) Enter = torque off")
    answer = alarm_answer(text or "")
    if answer is not None:
        store.answer_abort(attempt, answer)
