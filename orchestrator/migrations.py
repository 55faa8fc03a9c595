"""Schema migrations of the campaign store, one function per version step.

`migrate(conn, from_version)` upgrades in place inside one transaction. Schema 1 is the
first; each later version N adds a function `_to_N` registered in `_STEPS`.
"""

from __future__ import annotations

import sqlite3
from typing import Callable

from .errors import BadInput

def _to_2(conn: sqlite3.Connection) -> None:
    """Schema 2 adds the `sessions` table (one row per `orchestrator run`)."""
    from .store import SESSIONS_TABLE

    conn.execute(SESSIONS_TABLE)
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")


_STEPS: dict[int, Callable[[sqlite3.Connection], None]] = {2: _to_2}


def migrate(conn: sqlite3.Connection, from_version: int) -> None:
    from .store import SCHEMA_VERSION

    if from_version < 1:
        raise BadInput("campaign store has no schema version; it was not written by this tool")
    conn.execute("BEGIN IMMEDIATE")
    try:
        for version in range(from_version + 1, SCHEMA_VERSION + 1):
            _STEPS[version](conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
