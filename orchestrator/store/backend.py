"""The seam between the campaign store and its database: what differs between a SQLite file and
a PostgreSQL server, in one object per dialect that every store connection carries
(`conn.backend`). The store's own code (`sqlite.CampaignStore`, `judgments`, `chain`, `schema`,
`new_campaign`) writes one SQL for both and asks the backend for the rest; it never asks which
database it is on (tests/test_store_sql.py fails a module outside the seam that does).

The seam is this module (the interface and the SQLite backend) and the PostgreSQL modules
(`postgres.py`'s connection and `postgres_backend.py`'s backend). What a backend gives:

- `column_types`: the types the frozen DDL of `schema.py` is written with (`{id}`, `{int}`,
  `{real}`). SQLite: `INTEGER PRIMARY KEY` (the rowid), `INTEGER`, `REAL`. PostgreSQL: an
  identity column, `BIGINT`, and `DOUBLE PRECISION` (its `real` is 4 bytes and would round
  timestamps);
- `inserted_id`: a new row's id (SQLite's rowid; PostgreSQL's `RETURNING id`, added to the
  statement);
- `begin_write` (SQLite's `BEGIN IMMEDIATE` takes the write lock at once; on a server row
  locks and unique keys serialise writers) and `begin_snapshot` (a reader's one snapshot);
- the schema version and the tool's mark (SQLite's `PRAGMA user_version` and
  `application_id`; the `meta` rows on a server) and the database's own integrity check;
- the evidence chain's writes and check (computed here on SQLite, by the server's functions on
  PostgreSQL: `postgres_chain.py`), and the writes a judge's role makes through the server's
  security-definer functions there (`postgres_blind.py`): forgetting an episode's labels, an
  invalid start;
- the blinded view's statement (`blind_view.py`) and the table a label's episode is looked up in.
"""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.store import chain
from orchestrator.store.blind_view import VIEW_SQL

APPLICATION_ID = 0x50414231  # "PAB1": marks a SQLite file as ours (PRAGMA application_id)
DB_NAME = "campaign.db"      # a campaign's SQLite file, in its directory


class Backend(ABC):
    """The dialect-specific operations of a campaign store (see the module docstring)."""

    on_server: bool             # a server's store, whose judges and operators have roles of their own
    column_types: Mapping[str, str]
    begin_write: str
    begin_snapshot: str
    blind_episodes_sql: str     # (id, frames, duration_s, files, mark_id) of every episode, blinded
    labelled_episodes: str      # where a new label's episode must exist (a judge's role reads only this)

    def ddl(self, template: str) -> str:
        """The frozen DDL `template` with this backend's column types (`str.format` slots)."""
        return template.format_map(self.column_types)

    @abstractmethod
    def inserted_id(self, conn: Any, sql: str, params: tuple) -> int | None:
        """Run `sql`, an INSERT of one row into a table whose `id` the store assigns, and return the id."""

    @abstractmethod
    def where(self, directory: Path) -> str:
        """The campaign store as the user knows it, for messages."""

    @abstractmethod
    def set_schema_version(self, conn: Any, version: int) -> None: ...

    @abstractmethod
    def mark_as_ours(self, conn: Any) -> None:
        """Inside a new store's transaction, beside the `meta` row `tool`."""

    @abstractmethod
    def integrity_problems(self, conn: Any) -> list[str]:
        """What the database's own check of its pages and indexes finds (empty: nothing)."""

    @abstractmethod
    def has_table(self, conn: Any, name: str) -> bool: ...

    @abstractmethod
    def chain_append(self, conn: Any, table: str, key: str) -> None: ...

    @abstractmethod
    def chain_guard(self, conn: Any, table: str, key: str) -> None: ...

    @abstractmethod
    def chain_install(self, conn: Any) -> None:
        """Before the chain's origin is written (schema step 5)."""

    @abstractmethod
    def chain_verify(self, conn: Any) -> chain.ChainStatus: ...

    @abstractmethod
    def forget_episode_labels(self, conn: Any, episode_id: str) -> None:
        """Inside the caller's transaction: delete every label of the episode, each chained."""

    @abstractmethod
    def invalid_start(self, conn: Any, episode_id: str, reason: str) -> bool:
        """A judge's invalid start done whole by the database (True), or left to the store (False)."""


class SqliteBackend(Backend):
    """A campaign's SQLite file (`sqlite_file.py` opens it)."""

    on_server = False
    column_types = {"id": "INTEGER PRIMARY KEY", "int": "INTEGER", "real": "REAL"}
    begin_write = "BEGIN IMMEDIATE"
    begin_snapshot = "BEGIN"
    blind_episodes_sql = VIEW_SQL
    labelled_episodes = "episodes"

    def inserted_id(self, conn: Any, sql: str, params: tuple) -> int | None:
        # SQLite's rowid, not `RETURNING id`: a judge's sealed connection may write an event
        # row it may not read (blind_view.seal), and RETURNING reads it
        return conn.execute(sql, params).lastrowid

    def where(self, directory: Path) -> str:
        return str(directory / DB_NAME)

    def set_schema_version(self, conn: Any, version: int) -> None:
        conn.execute(f"PRAGMA user_version = {int(version)}")

    def mark_as_ours(self, conn: Any) -> None:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    def integrity_problems(self, conn: Any) -> list[str]:
        found = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        return [] if found == ["ok"] else found

    def has_table(self, conn: Any, name: str) -> bool:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None

    def chain_append(self, conn: Any, table: str, key: str) -> None:
        chain.append_here(conn, table, key)

    def chain_guard(self, conn: Any, table: str, key: str) -> None:
        chain.guard_here(conn, table, key)

    def chain_install(self, conn: Any) -> None:
        pass   # the chain is computed in this process

    def chain_verify(self, conn: Any) -> chain.ChainStatus:
        # The rows are read partly through indexes (a value an index holds is read from the
        # index): an index that no longer matches its table could hand the chain one row and a
        # reader another. SQLite's full check compares every index with its table.
        return chain.verify_here(conn, self.integrity_problems(conn))

    def forget_episode_labels(self, conn: Any, episode_id: str) -> None:
        for (label_id,) in conn.execute("SELECT id FROM judgments WHERE episode_id=?", (episode_id,)).fetchall():
            with chain.change(conn, "judgments", label_id):
                conn.execute("DELETE FROM judgments WHERE id=?", (label_id,))

    def invalid_start(self, conn: Any, episode_id: str, reason: str) -> bool:
        return False


SQLITE = SqliteBackend()


class SqliteConnection(sqlite3.Connection):
    """A `sqlite3.Connection` that carries its backend (`sqlite3.connect(..., factory=SqliteConnection)`)."""

    backend: Backend = SQLITE
