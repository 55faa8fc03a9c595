"""`orchestrator store migrate CAMPAIGN URL`: move a campaign from its SQLite file to PostgreSQL.

The copy is one transaction on the server: the schema (the same DDL as a new store, with the
server backend's column types), then every row of every table `tables.py` describes, with its
ids, then each identity column moved past the largest copied id. Before it commits, the copy is checked: per table
the row count and a SHA-256 over the rows in key order (each value in a canonical text form)
must equal the source's. The videos stay where they are: the campaign directory becomes the
`--out` of later `--store` commands.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.errors import BadInput, RuntimeFailure
from orchestrator.store import chain
from orchestrator.store.tables import IDENTITY, KEYS

TABLES = KEYS   # every table with its key (rows are hashed in key order)


@dataclass(frozen=True)
class MigrateSummary:
    counts: dict[str, int]
    digests: dict[str, str]


def _canonical(value: object) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def table_digest(conn, table: str) -> tuple[int, str]:
    """(row count, SHA-256 over the rows in key order) of one table, on either engine."""
    rows = conn.execute(f"SELECT * FROM {table} ORDER BY {TABLES[table]}").fetchall()
    digest = hashlib.sha256()
    for row in rows:
        digest.update("\x1f".join(_canonical(v) for v in row).encode() + b"\x1e")
    return len(rows), digest.hexdigest()


def migrate_to_server(campaign: Path, url: str) -> MigrateSummary:
    """Copy the campaign in `campaign` to the empty database `url` and verify the copy."""
    from orchestrator.store.postgres import AdvisoryLock, PgConnection, redact
    from orchestrator.store.schema import create_schema
    from orchestrator.store.sqlite import CampaignStore

    source = CampaignStore.open_for_run(Path(campaign))  # no run may write while we copy
    before = chain.verify(source.conn)
    if not before.intact:
        source.close()
        raise chain.refusal(source.where, before)
    target = PgConnection(url)
    try:
        if target.has_table("meta"):
            raise BadInput(f"{redact(url)}: database is not empty; migrate into a new database")
        AdvisoryLock(target, shared=False, where=redact(url))
        expected = {t: table_digest(source.conn, t) for t in TABLES}
        target.execute("BEGIN")
        try:
            create_schema(target)            # the same frozen steps as a new store
            target.execute("DELETE FROM meta")  # the source's rows are copied as they are
            target.execute("DELETE FROM chain")
            for table in TABLES:
                _copy_table(source.conn, target, table)
            copied = {t: table_digest(target, t) for t in TABLES}
            wrong = [t for t in TABLES if copied[t] != expected[t]]
            if wrong:
                raise RuntimeFailure(f"{redact(url)}: the copy differs from {campaign} in "
                                     f"{', '.join(wrong)}; nothing was committed")
            status = chain.verify(target)  # the server recomputes the chain the file kept
            if not status.intact:
                raise RuntimeFailure(f"{redact(url)}: the copied evidence chain does not verify on the server "
                                     f"(first: {status.unverified[0]}); nothing was committed")
            from orchestrator.store.postgres_blind import install_blind_objects

            install_blind_objects(target)
            target.execute("COMMIT")
        except BaseException:
            target.execute("ROLLBACK")
            raise
    finally:
        target.close()
        source.close()
    return MigrateSummary(counts={t: n for t, (n, _) in expected.items()},
                          digests={t: d for t, (_, d) in expected.items()})


def _copy_table(source, target, table: str) -> None:
    cursor = source.execute(f"SELECT * FROM {table}")
    columns = [d[0] for d in cursor.description]
    rows = cursor.fetchall()
    if rows:
        marks = ",".join("?" for _ in columns)
        target.executemany(f"INSERT INTO {table} ({','.join(columns)}) VALUES ({marks})",
                           [tuple(r) for r in rows])
    if table in IDENTITY:
        target.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                       f" COALESCE((SELECT max(id) FROM {table}), 0) + 1, false)")
