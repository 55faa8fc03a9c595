"""The campaign store's tables, described once: each table's key (its rows are read in key
order, and the evidence chain names a row by it), whether its rows are chained (`chain.py`),
and whether the store assigns its `id` (an identity column: SQLite's `INTEGER PRIMARY KEY`, a
PostgreSQL identity). The chain (`CHAINED`), the copy to a server (`postgres_copy.py`: every
table in key order, identity columns moved past the copied ids) and the server's chain
functions (`postgres_chain.py`) read this description; the DDL itself is the frozen steps of
`schema.py`, whose column types each backend fills in (`backend.Backend.column_types`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    name: str
    key: str
    chained: bool = False
    identity: bool = False


TABLES: tuple[Table, ...] = (
    Table("meta", "key"),
    Table("campaign", "id", chained=True),
    Table("trials", "slot", chained=True),
    Table("attempts", "id", chained=True, identity=True),
    Table("episodes", "id", chained=True),
    Table("judgments", "id", chained=True, identity=True),
    Table("events", "id", chained=True, identity=True),
    Table("sessions", "id", chained=True, identity=True),
    Table("audit", "slot", chained=True),
    Table("chain", "seq"),
)

KEYS: dict[str, str] = {t.name: t.key for t in TABLES}
CHAINED: dict[str, str] = {t.name: t.key for t in TABLES if t.chained}
IDENTITY: tuple[str, ...] = tuple(t.name for t in TABLES if t.identity)
