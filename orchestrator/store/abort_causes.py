"""The cause of an aborted attempt: a short, stable name within its class (`attempts.abort_class`),
recorded with the abort in `attempts.abort_cause` (schema 4) and read from the abort's reason.

The reason (`attempts.reason`) is the line the writer recorded: the runners write `Type: message`
of what ended the episode (`DeviceFault: policy: ValueError: non-finite action for ...`,
`RestBlocked: arm /dev/ttyACM0: did not reach rest: ...`), the operator's answer at the stop
prompt, or one of the store's and the runners' fixed sentences (an interruption, a damaged
episode, an invalid start). `abort_cause(abort_class, reason)` reads the cause from it by the
rules below, first match within the class; the store applies it to every abort it writes and
the schema-4 step to every abort recorded before, so an old store's causes are read as a new
run records them. Recording the cause (rather than reading it at report time) keeps an old
campaign's report as it was when a later version reads reasons differently.

Causes per class (`CAUSES`; docs/design.md, the report's aborts section):

- `policy`: `non-finite action` (a NaN or infinite target, refused by the control loop or the
  rig), `overload` / `overcurrent` (a servo alarm under the policy's commands), `exception`
  (anything the policy raised).
- `operator_unsafe`, `operator_misplaced`, `operator_other`: `emergency stop`, `redo` (the
  operator asked to redo a finished episode).
- `operator_unanswered` (a stop whose reason was never given): `emergency stop` (the stop key,
  then the question went unanswered: Ctrl-C, SIGTERM, SIGHUP, a closed console, an empty
  answer), `interrupt` (Ctrl-C, SIGTERM or SIGHUP during an episode of a real arm).
- `rig`: `arm bus` (the serial bus, USB, power), `overload` / `overcurrent` (a servo alarm
  the protocol's `aborts.overload: rig` makes the hardware's), `servo alarm`, `servo reset`,
  `servo no reply`, `blocked` (a move to rest held back), `camera`, `recording` (a video could
  not be written), `policy server lost`, `damaged files` (an episode's files missing or damaged
  after a restart), `block taken over` (a station re-ran another's block), `other error`.
- `interrupted`: `user interrupt` (Ctrl-C, SIGTERM), `process stopped` (found running after a
  crash or kill), `station stopped` (a station's claim on its block ran out), `other trial
  failed` (the parallel runner stopped its other episodes).
- `invalid_start`: `invalid start` (a judge sent the trial back).
- no class (a store older than schema 3): the first cause any rule reads, else `unknown`.
"""

from __future__ import annotations

import re

NON_FINITE_ACTION = "non-finite action"
UNKNOWN = "unknown"

CAUSES: dict[str, tuple[str, ...]] = {
    "policy": (NON_FINITE_ACTION, "overload", "overcurrent", "exception"),
    "operator_unsafe": ("emergency stop", "redo"),
    "operator_misplaced": ("emergency stop", "redo"),
    "operator_other": ("emergency stop", "redo"),
    "operator_unanswered": ("emergency stop", "interrupt"),
    "rig": ("arm bus", "overload", "overcurrent", "servo alarm", "servo reset", "servo no reply", "blocked", "camera", "recording",
            "policy server lost", "damaged files", "block taken over", "other error"),
    "interrupted": ("user interrupt", "process stopped", "station stopped", "other trial failed"),
    "invalid_start": ("invalid start",),
}

_ARM = r"^DeviceFault: arm\b[^:]*: "
# (classes the rule applies to, pattern searched in the reason, cause); the first match wins. An
# abort without a class is read by every rule with a pattern; `()` rules apply only to those.
_RULES: tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...] = tuple(
    (classes, re.compile(pattern, re.IGNORECASE), cause) for classes, pattern, cause in (
        (("invalid_start",), r"", "invalid start"),
        ((), r"^invalid start\b", "invalid start"),
        (("interrupted",), r"^interrupted by the user", "user interrupt"),
        (("interrupted",), r"^interrupted: the process stopped", "process stopped"),
        (("interrupted",), r"^interrupted: .*station", "station stopped"),
        (("interrupted",), r"^stopped: another trial failed", "other trial failed"),
        (("operator_unanswered",), r"^interrupted\b", "interrupt"),
        (("operator_unanswered",), r"", "emergency stop"),
        (("operator_unsafe", "operator_misplaced", "operator_other"), r"^redo requested", "redo"),
        (("operator_unsafe", "operator_misplaced", "operator_other"), r"", "emergency stop"),
        ((), r"\be-stop\b|^emergency stop", "emergency stop"),
        (("policy",), r"^(DeviceFault: policy: )?(ValueError: )?non-finite action", NON_FINITE_ACTION),
        (("policy",), r"ServoAlarm: .*overload", "overload"),
        (("policy",), r"ServoAlarm: .*overcurrent", "overcurrent"),
        (("policy",), r"^DeviceFault: policy: ", "exception"),
        (("policy",), r"", "exception"),
        (("rig",), r"^RestBlocked: ", "blocked"),
        (("rig",), r"ServoAlarm: .*overload", "overload"),        # the protocol's `aborts.overload: rig`
        (("rig",), r"ServoAlarm: .*overcurrent", "overcurrent"),
        (("rig",), r"\bServoAlarm: ", "servo alarm"),
        (("rig",), r"\bServoReset: ", "servo reset"),
        (("rig",), _ARM + r"no reply from servo", "servo no reply"),
        (("rig",), _ARM, "arm bus"),
        (("rig",), r"^DeviceFault: camera |^RuntimeFailure: camera ", "camera"),
        (("rig",), r"^RuntimeFailure: video (writer )?for camera ", "recording"),
        (("rig",), r"^DeviceFault: policy server ", "policy server lost"),
        (("rig",), r"^recorded files missing or damaged", "damaged files"),
        (("rig",), r"^block taken over from station", "block taken over"),
        (("rig",), r"", "other error"),
    ))


def abort_cause(abort_class: str | None, reason: str | None) -> str:
    """The cause of an abort of `abort_class` recorded with `reason` (for `abort_class` None, a
    store older than schema 3: every rule that has a pattern); `unknown` when no rule reads it."""
    text = (reason or "").strip()
    for classes, pattern, cause in _RULES:
        applies = bool(pattern.pattern) if abort_class is None else abort_class in classes
        if applies and pattern.search(text):
            return cause
    return UNKNOWN
