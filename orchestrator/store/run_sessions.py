"""The run sessions of a campaign store (`sessions`: one row per `orchestrator run`, on which host,
how it ended) and which station ran each layout block (`blocks`, on a server with stations),
chained like every row the results depend on (`chain.py`). `CampaignStore` has these methods
from `SessionRows`."""

from __future__ import annotations

import os
import time
from contextlib import AbstractContextManager
from typing import Any

from orchestrator.store import chain
from orchestrator.store.judgments import insert_row


class SessionRows:
    """The session methods of a store whose `conn` reads and whose `transaction()` writes."""

    conn: Any

    def transaction(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def begin_session(self) -> int:
        """Record the start of an `orchestrator run` session; returns its id."""
        import platform

        from orchestrator import __version__

        with self.transaction() as c:
            session_id = insert_row(c, "INSERT INTO sessions (started_at, host, pid, tool_version)"
                                               " VALUES (?,?,?,?)",
                                               (time.time(), platform.node(), os.getpid(), __version__))
            chain.append(c, "sessions", session_id)
            return session_id

    def end_session(self, session_id: int, outcome: str) -> None:
        with self.transaction() as c, chain.change(c, "sessions", session_id):
            c.execute("UPDATE sessions SET ended_at=?, outcome=? WHERE id=?", (time.time(), outcome, session_id))

    def sessions(self) -> list[dict[str, Any]]:
        """Run sessions; one with no `ended_at` was killed (SIGKILL, power loss)."""
        return [dict(r) for r in self.conn.execute("SELECT * FROM sessions ORDER BY id")]

    def station_blocks(self) -> list[dict[str, Any]]:
        """Which station ran each layout block, and when (stations.py); [] for a single arm."""
        if not self.conn.backend.has_table(self.conn, "blocks"):
            return []
        return [dict(r) for r in self.conn.execute(
            "SELECT unit, station, state, claimed_at, finished_at FROM blocks ORDER BY unit")]
