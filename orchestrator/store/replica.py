"""A campaign store rebuilt in memory from rows carried elsewhere (a dataset's evidence,
export/evidence.py), so that the report's own code reads them as it reads a campaign. The
rows go in as they were stored (same columns, same values) under the schema a new store has."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from orchestrator.core.errors import BadInput
from orchestrator.store.backend import SqliteConnection
from orchestrator.store.schema import create_schema
from orchestrator.store.sqlite import CampaignStore
from orchestrator.store.tables import CHAINED

REDACTED = "(redacted)"   # the value of a column the copy carries as its digest only (chain.redacted)


def replica_store(directory: Path, rows: dict[str, list[dict[str, Any]]]) -> CampaignStore:
    """A read-only in-memory store holding `rows` (table -> rows as column -> value)."""
    conn = sqlite3.connect(":memory:", isolation_level=None, factory=SqliteConnection)
    conn.row_factory = sqlite3.Row
    try:
        conn.execute("BEGIN")
        create_schema(conn)
        for table, table_rows in rows.items():
            known = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")} if table in CHAINED else set()
            for row in table_rows:
                columns = list(row)
                if not known or not set(columns) <= known:   # names come from a file: never into SQL unchecked
                    raise BadInput(f"{directory}: the carried rows of {table!r} have columns the store has not "
                                   f"({', '.join(sorted(set(columns) - known)) or table})")
                conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
                             [REDACTED if isinstance(row[c], dict) else row[c] for c in columns])
        conn.execute("COMMIT")
        conn.execute("PRAGMA query_only = ON")
    except (sqlite3.DatabaseError, TypeError) as exc:
        conn.close()
        raise BadInput(f"{directory}: the carried rows do not form a campaign store ({exc})") from None
    return CampaignStore(Path(directory), conn, None)
