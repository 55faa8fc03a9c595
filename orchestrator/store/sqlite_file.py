"""Opening a campaign's SQLite file: the connection (WAL, full sync), the check that the file
is an intact store of this tool and of a known schema, the run lock, and the upgrade of an
older schema under that lock. `sqlite.CampaignStore` opens its stores through these."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from filelock import FileLock, Timeout

from orchestrator.core.errors import BadInput
from orchestrator.store.backend import APPLICATION_ID, DB_NAME, SqliteConnection
from orchestrator.store.schema import SCHEMA_VERSION, migrate

__all__ = ["APPLICATION_ID", "DB_NAME", "LOCK_NAME", "acquire", "checked", "connect", "existing", "upgrade"]
LOCK_NAME = "campaign.lock"


def connect(path: Path, readonly: bool = False) -> SqliteConnection:
    """A connection to the store: read-write (WAL, full sync, foreign keys) or truly read-only
    (`mode=ro`: SQLite refuses every write). A read-only connection to a store on read-only
    media, where SQLite cannot create the WAL index, falls back to `immutable=1` (nobody can
    write there either)."""
    if readonly:
        uri = Path(path).resolve().as_uri() + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None, factory=SqliteConnection)
        try:
            conn.execute("PRAGMA schema_version").fetchone()
        except sqlite3.OperationalError:
            conn.close()
            if os.access(Path(path).parent, os.W_OK):
                raise
            conn = sqlite3.connect(uri + "&immutable=1", uri=True, timeout=30, isolation_level=None,
                                   factory=SqliteConnection)
    else:
        conn = sqlite3.connect(path, timeout=30, isolation_level=None, factory=SqliteConnection)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout = 30000")
    if not readonly:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    return conn


def existing(directory: Path) -> Path:
    db = directory / DB_NAME
    if not db.exists():
        raise BadInput(f"{directory}: no campaign here ({DB_NAME} is missing)")
    return db

def upgrade(directory: Path) -> None:
    """Upgrade an older store to this schema, taking the run lock for it."""
    try:
        lock = acquire(directory)
    except BadInput:
        raise BadInput(f"{directory}: the campaign store has an older schema and another "
                       "`orchestrator run` holds its lock; try again when that run has started or ended") from None
    except OSError as exc:
        raise BadInput(f"{directory}: the campaign store has an older schema and cannot be upgraded "
                       f"here ({exc.strerror or exc}); copy the campaign to a writable folder") from None
    try:
        conn, version = checked(directory / DB_NAME)
        try:
            if version < SCHEMA_VERSION:
                migrate(conn, version)
        finally:
            conn.close()
    finally:
        lock.release()

def acquire(directory: Path) -> FileLock:
    lock = FileLock(str(directory / LOCK_NAME), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise BadInput(f"{directory}: another `orchestrator run` is running this campaign "
                       f"(lock {LOCK_NAME} is held); wait for it or stop it first") from None
    return lock

def checked(db: Path, readonly: bool = False) -> tuple[SqliteConnection, int]:
    """Connect and verify the file is an intact campaign store of a known schema; the
    connection and the store's schema version (never migrated here)."""
    try:
        with open(db, "rb") as handle:
            header = handle.read(100)
    except OSError as exc:
        raise BadInput(f"{db}: cannot read campaign store: {exc.strerror}") from None
    if header[:16] != b"SQLite format 3\x00":
        raise BadInput(f"{db}: not a campaign store (not an SQLite database)")
    # application_id is bytes 68-71 of the header: refuse a foreign database before a
    # read-write connection switches it to WAL mode (which rewrites its header)
    if len(header) < 100 or int.from_bytes(header[68:72], "big") != APPLICATION_ID:
        raise BadInput(f"{db}: not a campaign store of this tool (foreign SQLite database)")
    try:
        conn = connect(db, readonly)
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise BadInput(f"{db}: campaign store is corrupted ({exc})") from None
    if app_id != APPLICATION_ID:
        conn.close()
        raise BadInput(f"{db}: not a campaign store of this tool (foreign SQLite database)")
    if version > SCHEMA_VERSION:
        conn.close()
        raise BadInput(f"{db}: written by a newer orchestrator (schema {version}, this one "
                       f"reads up to {SCHEMA_VERSION}); upgrade with `uv sync`")
    if version < 1:
        conn.close()
        raise BadInput(f"{db}: campaign store has no schema version; it was not written by this tool")
    return conn, version
