"""The `orchestrator run` sessions of a campaign and how each ended (the report's sessions line)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.core.pids import process_running


@dataclass(frozen=True)
class SessionCounts:
    """The `orchestrator run` sessions of a campaign and how they ended.

    killed: no end was recorded (SIGKILL, power loss, crash of the interpreter); running: the
    last session has no end yet and its process is alive on this host (a run in progress)."""

    count: int
    ended: int = 0
    interrupted: int = 0
    killed: int = 0
    failed: int = 0
    running: int = 0


def session_counts(sessions: Sequence[dict[str, Any]]) -> SessionCounts:
    """Classify `store.sessions()` rows: outcome `ended`, `interrupted`, `failed: ...`; no
    `ended_at` means killed, unless it is the last session and its process is still alive on
    this host (a run in progress while the report is made)."""
    import platform

    counts: Counter = Counter()
    for i, s in enumerate(sessions):
        outcome = str(s.get("outcome") or "")
        if s.get("ended_at") is None:
            last = i == len(sessions) - 1
            alive = last and s.get("host") == platform.node() and process_running(s.get("pid"))
            counts["running" if alive else "killed"] += 1
        elif outcome == "interrupted":
            counts["interrupted"] += 1
        elif outcome.startswith("failed"):
            counts["failed"] += 1
        else:
            counts["ended"] += 1
    return SessionCounts(count=len(sessions), ended=counts["ended"], interrupted=counts["interrupted"],
                         killed=counts["killed"], failed=counts["failed"], running=counts["running"])
