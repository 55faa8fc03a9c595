"""The questions an abort leaves for a person, and their answers (schema 6).

Two kinds of abort need a person's word that the moment of the abort may not give:

- a stop whose reason was never given (class `operator_unanswered`: the stop key, then Ctrl-C,
  SIGTERM, SIGHUP or a closed console at the question; or a signal during a real arm's
  episode): why was it stopped?
- a servo overload or overcurrent during an episode (cause `overload` / `overcurrent`, class
  `policy` or `rig` by the protocol's `aborts.overload`): did the arm push into something (the
  table, the cube, a joint stop) or was it the hardware?

The abort counts as the protocol's pre-registered rules say when it is recorded; the answer,
given at the alarm's prompt or at the next session's first prompt (`run/abort_questions.py`,
before anything moves), is kept beside it (`attempts.operator_answer`, `answered_at`, an
`abort_answered` event) and shown in the report per policy; it never changes how the abort
counted. `CampaignStore` has these methods from `AbortAnswers`, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import Any

from orchestrator.store import chain
from orchestrator.store.judgments import insert_row
from orchestrator.store.records import INTERRUPTED_CLASS, SETTLES_EXCLUDED

UNANSWERED_CLASS = "operator_unanswered"
ALARM_CAUSES = ("overload", "overcurrent")   # store.abort_causes: a servo alarm the policy's commands may cause


class AbortAnswers:
    """The answer methods of a store whose `conn` reads and whose `transaction()` writes."""

    conn: Any

    def transaction(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def questions(self) -> list[dict[str, Any]]:
        """Aborts still waiting for a person's answer, oldest first: `id`, `slot`, `mark_id`,
        `ended_at`, `abort_class`, `abort_cause`."""
        rows = self.conn.execute(
            "SELECT a.id, a.slot, t.mark_id, a.ended_at, a.abort_class, a.abort_cause FROM attempts a"
            " JOIN trials t ON t.slot = a.slot WHERE a.status = 'aborted' AND a.operator_answer IS NULL"
            " AND (a.abort_class = ? OR a.abort_cause IN (?, ?)) ORDER BY a.id",
            (UNANSWERED_CLASS, *ALARM_CAUSES)).fetchall()
        return [dict(zip(("id", "slot", "mark_id", "ended_at", "abort_class", "abort_cause"), r, strict=True))
                for r in rows]

    def answer_abort(self, attempt_id: int, answer: str) -> None:
        """Keep the operator's answer about aborted attempt `attempt_id` (one transaction, chained,
        with an `abort_answered` event); an attempt already answered keeps its first answer."""
        answer = answer.strip()
        if not answer:
            raise ValueError("an answer is not empty")
        now = time.time()
        with self.transaction() as c:
            row = c.execute("SELECT slot FROM attempts WHERE id=? AND status='aborted' AND operator_answer IS NULL",
                            (attempt_id,)).fetchone()
            if row is None:
                return
            with chain.change(c, "attempts", attempt_id):
                c.execute("UPDATE attempts SET operator_answer=?, answered_at=? WHERE id=?", (answer, now, attempt_id))
            new_id = insert_row(c, "INSERT INTO events (at, kind, slot, message) VALUES (?,?,?,?)",
                            (now, "abort_answered", row[0], f"attempt {attempt_id}: {answer}"))
            chain.append(c, "events", new_id)

    def interruptions(self, slot: int) -> int:
        """How many times trial `slot` was interrupted (class `interrupted`) and sent back."""
        row = self.conn.execute("SELECT count(*) FROM attempts WHERE slot=? AND status='aborted'"
                                " AND abort_class=? AND settles IS NULL", (slot, INTERRUPTED_CLASS)).fetchone()
        return int(row[0])

    def exclude_interrupted(self, slot: int, limit: int) -> None:
        """Trial `slot`, interrupted more than `limit` times (the protocol's
        `aborts.max_interruptions`), is left out: its last interrupted attempt settles it as
        `excluded` and the trial is done, with no episode (as `abort_attempt` does past
        `max_reruns`)."""
        now = time.time()
        with self.transaction() as c:
            row = c.execute("SELECT max(id) FROM attempts WHERE slot=? AND status='aborted' AND abort_class=?"
                            " AND settles IS NULL", (slot, INTERRUPTED_CLASS)).fetchone()
            if row is None or row[0] is None:
                return
            with chain.change(c, "attempts", row[0]):
                c.execute("UPDATE attempts SET settles=? WHERE id=?", (SETTLES_EXCLUDED, row[0]))
            with chain.change(c, "trials", slot):
                c.execute("UPDATE trials SET state='done', done_at=? WHERE slot=? AND state='aborted'", (now, slot))
            new_id = insert_row(c, "INSERT INTO events (at, kind, slot, message) VALUES (?,?,?,?)",
                            (now, "aborted", slot, f"interrupted more than {limit} times (aborts.max_interruptions):"
                                                   f" left out ({SETTLES_EXCLUDED})"))
            chain.append(c, "events", new_id)
