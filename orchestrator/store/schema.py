"""The campaign store's schema, as frozen steps: schema 1 as it shipped, then one function per
later version, each with its own DDL written out (never today's table definitions), so a new
schema never changes what an old step creates.

A new store is built by the same steps (`create_schema`: schema 1, then every step), so a fresh
store and an upgraded one have the same tables by construction. `migrate(conn, from_version)`
upgrades in place inside one transaction; the store runs it only while it holds the run lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.core.errors import BadInput
from orchestrator.store.abort_causes import abort_cause
from orchestrator.store.chain import start_chain

if TYPE_CHECKING:
    from orchestrator.store.backend import Backend

SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE campaign (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at {real} NOT NULL,
    protocol_path TEXT NOT NULL, protocol_text TEXT NOT NULL, protocol_sha256 TEXT NOT NULL,
    layout_text TEXT NOT NULL, layout_sha256 TEXT NOT NULL,
    rig_path TEXT NOT NULL, rig_text TEXT NOT NULL, simulated {int} NOT NULL,
    finished_at {real}, stop_reason TEXT
);
CREATE TABLE trials (
    slot {int} PRIMARY KEY, unit {int} NOT NULL, mark_id TEXT NOT NULL,
    repeat_index {int} NOT NULL, position {int} NOT NULL, policy TEXT NOT NULL,
    seed {int} NOT NULL, state TEXT NOT NULL DEFAULT 'pending',
    episode_id TEXT, attempts {int} NOT NULL DEFAULT 0, done_at {real}
);
CREATE TABLE attempts (
    id {id}, slot {int} NOT NULL REFERENCES trials(slot),
    episode_id TEXT NOT NULL UNIQUE, started_at {real} NOT NULL, ended_at {real},
    status TEXT NOT NULL, reason TEXT
);
CREATE TABLE episodes (
    id TEXT PRIMARY KEY, slot {int} NOT NULL UNIQUE REFERENCES trials(slot),
    attempt_id {int} NOT NULL REFERENCES attempts(id),
    frames {int} NOT NULL, duration_s {real} NOT NULL, cameras TEXT NOT NULL,
    physics_success {int}, max_lift_m {real}, time_to_success_s {real},
    safety_events TEXT NOT NULL, timing TEXT NOT NULL, files TEXT NOT NULL,
    digests TEXT NOT NULL, created_at {real} NOT NULL
);
CREATE TABLE judgments (
    id {id}, episode_id TEXT NOT NULL REFERENCES episodes(id),
    judge TEXT NOT NULL, label TEXT NOT NULL, failure_mode TEXT, note TEXT,
    created_at {real} NOT NULL, retracted_at {real}, source TEXT NOT NULL DEFAULT 'local'
);
CREATE INDEX judgments_by_episode ON judgments(episode_id, judge);
CREATE TABLE events (
    id {id}, at {real} NOT NULL, kind TEXT NOT NULL, slot {int},
    message TEXT NOT NULL, data TEXT
);
"""
"""Schema 1 exactly as it shipped (tests/fixtures/schema1/campaign.db was written by it), its
column types the backend's (`{id}`, `{int}`, `{real}`: `backend.Backend.column_types`; on SQLite
`INTEGER PRIMARY KEY`, `INTEGER`, `REAL`, the text as it shipped)."""


class Connection(Protocol):
    """What the steps use of a connection: a `backend.SqliteConnection`, or a
    `postgres.PgConnection` (which runs the same SQL on PostgreSQL); each carries its backend."""

    backend: Backend

    def execute(self, sql: str, /) -> Any: ...

    def executemany(self, sql: str, rows: Any, /) -> Any: ...


def _to_2(conn: Connection) -> None:
    """Schema 2 adds the `sessions` table: one row per `orchestrator run` (how often a campaign
    was resumed, on which host, how each session ended)."""
    conn.execute(conn.backend.ddl("""
CREATE TABLE sessions (
    id {id}, started_at {real} NOT NULL, ended_at {real}, host TEXT NOT NULL,
    pid {int} NOT NULL, tool_version TEXT NOT NULL, outcome TEXT
)"""))
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")


def _to_3(conn: Connection) -> None:
    """Schema 3 classifies aborted attempts: `abort_class` (policy, operator_unsafe,
    operator_misplaced, operator_other, rig, interrupted, invalid_start) and `settles` (NULL: the
    trial is re-run; `failure`: the abort scored the trial as a failure of its policy, by the
    protocol's `aborts` rules; `excluded`: the trial reached its re-run limit and is left out).
    Attempts of older stores keep NULL in both (they were re-run, as the tool then did)."""
    conn.execute("ALTER TABLE attempts ADD COLUMN abort_class TEXT")
    conn.execute("ALTER TABLE attempts ADD COLUMN settles TEXT")
    conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")


def _to_4(conn: Connection) -> None:
    """Schema 4 records each abort's cause within its class, `attempts.abort_cause`
    (`store.abort_causes`: `non-finite action`, `exception`, `overload`, ...). The aborts of an
    older store get the cause their recorded reason reads as (`abort_cause(class, reason)`)."""
    conn.execute("ALTER TABLE attempts ADD COLUMN abort_cause TEXT")
    rows = conn.execute("SELECT id, abort_class, reason FROM attempts WHERE status = 'aborted'").fetchall()
    conn.executemany("UPDATE attempts SET abort_cause = ? WHERE id = ?",
                     [(abort_cause(cls, reason), attempt_id) for attempt_id, cls, reason in rows])
    conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")


def _to_5(conn: Connection) -> None:
    """Schema 5 adds the evidence chain (`chain.py`): the table `chain` with its origin, and every
    row an older store holds chained as it is at the migration (the origin says `migrated`)."""
    conn.execute(conn.backend.ddl("""
CREATE TABLE chain (
    seq {int} PRIMARY KEY, tbl TEXT NOT NULL, row_key TEXT NOT NULL, row_sha256 TEXT NOT NULL,
    at {real} NOT NULL, digest TEXT NOT NULL
)"""))
    conn.execute("CREATE INDEX chain_by_row ON chain (tbl, row_key, seq)")
    start_chain(conn)
    conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")


def _to_6(conn: Connection) -> None:
    """Schema 6 keeps the operator's later answer about an abort (`abort_answers.py`): why a stop
    whose reason went unanswered was made, or what a servo overload pushed against, given at a
    prompt after the abort was recorded (`attempts.operator_answer`, `attempts.answered_at`).
    An older store's aborts have none (NULL, which the evidence chain's row digests skip, so
    the chain stays intact)."""
    conn.execute("ALTER TABLE attempts ADD COLUMN operator_answer TEXT")
    conn.execute(conn.backend.ddl("ALTER TABLE attempts ADD COLUMN answered_at {real}"))
    conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")


def _to_7(conn: Connection) -> None:
    """Schema 7 records the audit sample (`design.audit`, `store.audit`): table `audit`, one row per
    audited trial (its slot, its rank in draw order, and the draw's seed, fraction and population),
    written with the schedule when the protocol pre-registers `judging.audit`, chained. An older
    store's protocol has no audit: the table stays empty. On a server the chain's functions are
    refreshed to know the new table (CREATE OR REPLACE)."""
    conn.execute(conn.backend.ddl("""
CREATE TABLE audit (
    slot {int} PRIMARY KEY REFERENCES trials(slot), draw_rank {int} NOT NULL UNIQUE,
    seed TEXT NOT NULL, fraction {real} NOT NULL, population {int} NOT NULL
)"""))
    conn.backend.chain_install(conn)
    conn.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")


def _to_8(conn: Connection) -> None:
    """Schema 8 keeps the progress ladder beside a label (`records.STAGES`):
    `judgments.stage`, the furthest stage the judge saw (reached, grasped, lifted, held, or none),
    and `judgments.stage_times`, the machine judges' (`auto`, `physics`) time of each stage
    (JSON). An older store's labels have neither (NULL, which the evidence chain's row digests
    skip, so the chain stays intact)."""
    conn.execute("ALTER TABLE judgments ADD COLUMN stage TEXT")
    conn.execute("ALTER TABLE judgments ADD COLUMN stage_times TEXT")
    conn.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")


_STEPS: dict[int, Callable[[Connection], None]] = {2: _to_2, 3: _to_3, 4: _to_4, 5: _to_5, 6: _to_6, 7: _to_7,
                                                   8: _to_8}
SCHEMA_VERSION = max(_STEPS)


def create_schema(conn: Connection) -> None:
    """Inside the caller's transaction: schema 1, then every step up to SCHEMA_VERSION."""
    for statement in conn.backend.ddl(SCHEMA_1).split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    for version in range(2, SCHEMA_VERSION + 1):
        _STEPS[version](conn)
    conn.backend.set_schema_version(conn, SCHEMA_VERSION)


def migrate(conn: Connection, from_version: int) -> None:
    """Upgrade a store at `from_version` to SCHEMA_VERSION in one transaction (the caller holds
    the run lock)."""
    if from_version < 1:
        raise BadInput("campaign store has no schema version; it was not written by this tool")
    conn.execute(conn.backend.begin_write)
    try:
        for version in range(from_version + 1, SCHEMA_VERSION + 1):
            _STEPS[version](conn)
        conn.backend.set_schema_version(conn, SCHEMA_VERSION)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
