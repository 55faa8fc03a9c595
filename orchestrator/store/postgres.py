"""The campaign store on a PostgreSQL server (`--store postgresql://...`), for several arms.

SQLite stays the embedded default; this module lets `CampaignStore` run the very same SQL,
schema, migrations and transactions on PostgreSQL through psycopg 3. One database holds one
campaign; the campaign's videos live under `--out`, a directory every station can write.

`PgConnection` carries the store's PostgreSQL backend (`postgres_backend.POSTGRES`: the column
types of the DDL, the transactions, the schema version, the evidence chain on the server) and
reads the store's SQL as it is written, with SQLite's `?` parameters: `server_sql` turns each
`?` outside a string literal, a quoted name or a comment into psycopg's `%s` (and, when
parameters are passed, doubles every `%`, which psycopg would otherwise read as one). The SQL
is scanned token by token, never rewritten by pattern. Nothing else is translated: the store
asks its backend for what differs (`backend.py`; a new row's id is `RETURNING id`, which the
backend adds to the INSERT the store hands it).
The connection runs in autocommit mode, so `CampaignStore.transaction`'s explicit
BEGIN/COMMIT/ROLLBACK are the transactions: one trial is one transaction, as on SQLite.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from orchestrator.store.backend import Backend
from orchestrator.store.postgres_backend import POSTGRES

URL_PREFIXES = ("postgresql://", "postgres://")


def is_url(text: object) -> bool:
    return isinstance(text, str) and text.startswith(URL_PREFIXES)


def redact(url: str) -> str:
    """The URL without its password (for messages)."""
    return re.sub(r"(//[^:/@]+):[^@/]*@", r"\1:***@", url)


def server_sql(sql: str, with_params: bool) -> str:
    """`sql` with each `?` parameter outside a string literal ('...'), a quoted name ("..."), a
    comment (-- and /* */) or a dollar-quoted body ($tag$...$tag$) made psycopg's `%s`, and,
    `with_params`, every `%` doubled (psycopg reads the whole text for its placeholders)."""
    out: list[str] = []
    i, n = 0, len(sql)
    percent = "%%" if with_params else "%"
    while i < n:
        ch = sql[i]
        end = _quoted_end(sql, i)
        if end is not None:
            out.append(sql[i:end].replace("%", percent))
            i = end
            continue
        out.append("%s" if ch == "?" else percent if ch == "%" else ch)
        i += 1
    return "".join(out)


def _quoted_end(sql: str, i: int) -> int | None:
    """Where the literal, quoted name, comment or dollar-quoted body starting at `i` ends
    (the index after it; the end of `sql` when it is not closed), or None when none starts there."""
    ch, rest = sql[i], sql[i + 1:i + 2]
    if ch in "'\"":
        j = i + 1
        while True:
            j = sql.find(ch, j)
            if j < 0:
                return len(sql)
            if sql[j + 1:j + 2] != ch:      # a doubled quote is one quote inside
                return j + 1
            j += 2
    if ch == "-" and rest == "-":
        j = sql.find("\n", i)
        return len(sql) if j < 0 else j + 1
    if ch == "/" and rest == "*":
        j = sql.find("*/", i + 2)
        return len(sql) if j < 0 else j + 2
    if ch == "$":
        j = i + 1
        while j < len(sql) and (sql[j].isalnum() or sql[j] == "_"):
            j += 1
        if j < len(sql) and sql[j] == "$" and not sql[i + 1:i + 2].isdigit():   # $1 is a parameter
            tag = sql[i:j + 1]
            k = sql.find(tag, j + 1)
            return len(sql) if k < 0 else k + len(tag)
    return None


class Row(tuple):
    """A result row readable by position and by column name, like `sqlite3.Row`."""

    _names: tuple[str, ...] = ()

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names.index(key))
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor):
    names = tuple(d.name for d in cursor.description or ())

    def make(values):
        row = Row(values)
        row._names = names
        return row

    return make


class _Result:
    """What `execute` returns: rows (iterable, fetchone, fetchall)."""

    def __init__(self, rows: list):
        self._rows = rows

    def fetchone(self):
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list:
        rows, self._rows = self._rows, []
        return rows

    def __iter__(self) -> Iterator:
        return iter(self.fetchall())


class PgConnection:
    """The subset of `sqlite3.Connection` the store uses, on a psycopg 3 connection."""

    backend: Backend = POSTGRES

    def __init__(self, url: str, **kwargs: Any):
        import psycopg

        from orchestrator.core.errors import BadInput

        try:
            self.raw = psycopg.connect(url, autocommit=True, row_factory=_row_factory,
                                       connect_timeout=15, **kwargs)
        except psycopg.OperationalError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BadInput(f"{redact(url)}: cannot connect to the PostgreSQL store ({first})") from None
        self.url = url
        self.row_factory = None  # accepted and ignored (sqlite3 compatibility)

    @property
    def in_transaction(self) -> bool:
        """As `sqlite3.Connection.in_transaction`: inside BEGIN ... COMMIT (or a failed one)."""
        from psycopg.pq import TransactionStatus

        return self.raw.info.transaction_status != TransactionStatus.IDLE

    def execute(self, sql: str, params: Iterable[Any] = ()) -> _Result:
        values = tuple(params)
        cur = self.raw.execute(server_sql(sql, bool(values)), values or None)
        return _Result(cur.fetchall() if cur.description is not None else [])

    def executemany(self, sql: str, seq: Iterable[Iterable[Any]]) -> None:
        with self.raw.cursor() as cur:
            cur.executemany(server_sql(sql, True), [tuple(p) for p in seq])

    def one_row(self, sql: str, params: tuple = ()) -> Any:
        """The one row of a query that always returns one (a function's value, a count); `sql`
        takes psycopg's placeholders, as `raw.execute`."""
        row = self.raw.execute(sql, params or None).fetchone()
        if row is None:
            from orchestrator.core.errors import RuntimeFailure

            raise RuntimeFailure(f"{redact(self.url)}: no row for {sql!r}")
        return row

    def has_table(self, name: str) -> bool:
        return self.one_row("SELECT to_regclass(%s)", (name,))[0] is not None

    def schema_version(self) -> int:
        if not self.has_table("meta"):
            return 0
        row = self.raw.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def tool_marked(self) -> bool:
        if not self.has_table("meta"):
            return False
        row = self.raw.execute("SELECT value FROM meta WHERE key = 'tool'").fetchone()
        return row is not None and row[0] == "so101-ab-orchestrator"

    def set_authorizer(self, _authorizer) -> None:
        """SQLite's per-connection authorizer has no PostgreSQL twin: on a server, blinding is
        the judge role's privileges (`orchestrator store add-judge`)."""

    def close(self) -> None:
        self.raw.close()


class AdvisoryLock:
    """The run lock on a server: a session advisory lock, exclusive for a single-arm run,
    shared for stations (which coordinate through leases). Released when the connection closes."""

    KEY = 0x50414231

    def __init__(self, conn: PgConnection, shared: bool, where: str):
        from orchestrator.core.errors import BadInput

        fn = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
        if not conn.one_row(f"SELECT {fn}(%s)", (self.KEY,))[0]:
            raise BadInput(f"{where}: another `orchestrator run` is running this campaign "
                           "(without --station only one run may use a store); wait for it or stop it first")
        self.conn, self.shared = conn, shared

    def release(self) -> None:
        fn = "pg_advisory_unlock_shared" if self.shared else "pg_advisory_unlock"
        try:
            self.conn.raw.execute(f"SELECT {fn}(%s)", (self.KEY,))
        except Exception:
            pass  # closing the connection releases it anyway


def open_connection(url: str, directory: Path | None) -> PgConnection:
    """Connect and check the database holds a campaign store of a known schema (migrating an
    older one), as `CampaignStore._checked` does for a file."""
    from orchestrator.core.errors import BadInput
    from orchestrator.store.sqlite import SCHEMA_VERSION

    conn = PgConnection(url)
    where = redact(url)
    if not conn.tool_marked():
        conn.close()
        raise BadInput(f"{where}: no campaign in this database (create one with "
                       f"`orchestrator run PROTOCOL --rig RIG --store {where} --out {directory}`)")
    version = conn.schema_version()
    if version > SCHEMA_VERSION:
        conn.close()
        raise BadInput(f"{where}: written by a newer orchestrator (schema {version}, this one "
                       f"reads up to {SCHEMA_VERSION}); upgrade with `uv sync`")
    if version < SCHEMA_VERSION:
        from orchestrator.store.postgres_blind import install_blind_objects
        from orchestrator.store.schema import migrate

        migrate(conn, version)  # type: ignore[arg-type]
        if conn.has_table("judging_info"):   # the blind objects follow the schema (invalid_start, the chain's calls)
            install_blind_objects(conn)
    return conn


def create_on_server(url: str, directory: Path, **campaign: Any):
    """A new campaign in an empty database (schema, frozen protocol, schedule: one transaction);
    returns the store open for running (exclusive run lock, or shared with `station=True`, with
    the station's `guard`), or None when the database already holds a campaign."""
    from orchestrator.core.errors import BadInput
    from orchestrator.store.new_campaign import write_new_campaign
    from orchestrator.store.sqlite import CampaignStore

    station = campaign.pop("station", False)
    guard = campaign.pop("guard", None)
    conn = PgConnection(url)
    try:
        conn.raw.execute("SELECT pg_advisory_lock(%s)", (AdvisoryLock.KEY + 1,))  # one creator at a time
        if conn.tool_marked():
            conn.close()
            return None  # another station created it first: the caller resumes it
        if conn.has_table("meta"):
            raise BadInput(f"{redact(url)}: database is not empty and holds no campaign; use a new database")
        try:
            write_new_campaign(conn, **campaign)
            from orchestrator.store.postgres_blind import install_blind_objects

            install_blind_objects(conn)
        except BaseException:
            conn.raw.execute("ROLLBACK")
            raise
        conn.raw.execute("SELECT pg_advisory_unlock(%s)", (AdvisoryLock.KEY + 1,))
        lock = AdvisoryLock(conn, shared=station, where=redact(url))
    except BaseException:
        conn.close()
        raise
    Path(directory).mkdir(parents=True, exist_ok=True)
    return CampaignStore(Path(directory), conn, lock, guard)  # type: ignore[arg-type]


def open_on_server(url: str, directory: Path, purpose: str = "read", guard=None):
    """Open the campaign in `url` with videos under `directory`.

    `purpose`: "run" (exclusive run lock), "station" (shared run lock), "label" (judge,
    import-labels: may add labels), "read" (report, export, bundle, doctor: every
    transaction read-only, enforced by the server). `guard`: a station's claim check
    (`CampaignStore.guard`)."""
    from orchestrator.store.sqlite import CampaignStore

    conn = open_connection(url, Path(directory))
    lock = None
    try:
        if purpose in ("run", "station"):
            lock = AdvisoryLock(conn, shared=purpose == "station", where=redact(url))
        elif purpose == "read":
            conn.raw.execute("SET default_transaction_read_only = on")
    except BaseException:
        conn.close()
        raise
    return CampaignStore(Path(directory), conn, lock, guard)  # type: ignore[arg-type]


# The server store chosen on the command line (`--store URL`) for the running command. The
# CLI sets it around one verb; `CampaignStore.open_*` and `open_campaign` consult it, so the
# verbs and their domain functions need no new parameter and SQLite stays the default.
_SERVER_URL: ContextVar[str | None] = ContextVar("server_store_url", default=None)


def server_url() -> str | None:
    return _SERVER_URL.get()


@contextmanager
def using_server(url: str | None) -> Iterator[None]:
    """Within the block, campaign stores are opened on the PostgreSQL database `url`."""
    from orchestrator.core.errors import BadInput

    if url is not None and not is_url(url):
        raise BadInput(f"--store {url}: expected a PostgreSQL URL (postgresql://USER@HOST/DATABASE)")
    from orchestrator.store.sqlite import SERVER_OPENER

    token = _SERVER_URL.set(url)
    opener = SERVER_OPENER.set(None if url is None else
                               (lambda directory, purpose: open_on_server(url, directory, purpose)))
    try:
        yield
    finally:
        SERVER_OPENER.reset(opener)
        _SERVER_URL.reset(token)


def describe_server_store(url: str, directory: Path) -> str:
    """`doctor --store`: the server answers, its version, and what the database holds (a
    campaign and its schema, or empty and ready for a first `run`); BadInput otherwise."""
    from orchestrator.core.errors import BadInput
    from orchestrator.store.sqlite import SCHEMA_VERSION

    conn = PgConnection(url)
    try:
        version = conn.one_row("SHOW server_version")[0]
        where = f"store {redact(url)}: PostgreSQL {version}"
        if not conn.tool_marked():
            if conn.has_table("meta"):
                raise BadInput(f"{redact(url)}: database is not empty and holds no campaign; use a new database")
            return f"{where}, empty database (the first `run --store` creates the campaign)"
        schema = conn.schema_version()
        if schema > SCHEMA_VERSION:
            raise BadInput(f"{redact(url)}: written by a newer orchestrator (schema {schema}); upgrade with `uv sync`")
        trials = conn.one_row("SELECT count(*), count(*) FILTER (WHERE state='done') FROM trials")
        return f"{where}, campaign schema {schema}, {trials[1]}/{trials[0]} trials done"
    finally:
        conn.close()
