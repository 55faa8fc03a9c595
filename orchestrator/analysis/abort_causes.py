"""The cause of an aborted attempt, in a few words, for the report: what the recorded reason says
went wrong, within its class (`run.bookkeeping.abort_class`).

The store keeps each aborted attempt's class and its reason as the runner wrote it (one line:
`policy: non-finite action shoulder_pan.pos=nan`, `arm /dev/ttyACM0: servo alarm: elbow_flex
(id 3): overload`, `camera front: ...`, `interrupted by the user (Ctrl-C)`, `invalid start (judge
ana): cube not on its mark`). The class says whose it is; the cause says what: a policy's trials
that all end in `non-finite action` ask for a different fix than ones that end in `exception` or
in the arm hitting something. Causes are read from the reason text, so a store of any schema
has them; a reason no rule matches is `other`.

`CAUSE_RULES` is the one list, tried in order: (cause, the one class it applies to or None for any,
words any of which in the lower-cased reason make it that cause; none: the class's fallback).
"""

from __future__ import annotations

CAUSE_RULES: tuple[tuple[str, str | None, tuple[str, ...]], ...] = (
    # (cause, only for this class or None for any, words)
    ("non-finite action", None, ("non-finite action",)),
    ("servo overload", None, ("overload",)),
    ("servo overcurrent", None, ("overcurrent",)),
    ("servo overheating", None, ("overheating", "overheat")),
    ("supply voltage", None, ("supply voltage",)),
    ("servo reset", None, ("torque went off by itself", "torque off by itself")),
    ("servo not answering", None, ("no reply from servo", "no status packet", "do not answer")),
    ("policy server lost", "policy", ("server", "connection", "grpc")),
    ("policy too slow", "policy", ("too slow", "timed out", "timeout")),
    ("exception", "policy", ()),
    ("camera", None, ("camera",)),
    ("disk full", None, ("no space", "disk full", "disk is full")),
    ("usb or serial port", "rig", ("usb", "serial", "port", "/dev/tty")),
    ("emergency stop", None, ("emergency stop", "stopped by the operator")),
    ("redo", None, ("redo",)),
    ("cube not on its mark", None, ("cube not on its mark",)),
    ("cube knocked before the start", None, ("cube knocked",)),
    ("arm not at rest", None, ("arm not at rest",)),
    ("Ctrl-C or SIGTERM", "interrupted", ("interrupted by the user", "ctrl-c", "sigterm")),
    ("process stopped", "interrupted", ()),
)
OTHER = "other"


def abort_cause(reason: str | None, abort_class: str) -> str:
    """The cause of an aborted attempt of `abort_class` whose recorded reason is `reason`."""
    text = (reason or "").lower()
    for cause, only, words in CAUSE_RULES:
        if only is not None and only != abort_class:
            continue
        if not words or any(w in text for w in words):
            return cause
    return OTHER
