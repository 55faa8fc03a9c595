"""The evidence chain: a hash chain over every row a campaign's results depend on.

Chained tables (`CHAINED`, with each one's key): the campaign record, the trials, their
attempts (the aborts are attempts), the episodes with their file digests, the labels (every
judge's, `auto` and physics), the events and the run sessions. Every write of one of their
rows -- insert, update or delete -- appends one entry to the table `chain`, in the same
transaction as the write:

    row_sha256 = SHA-256(canonical(row))              ("deleted" once the row is removed)
    digest     = SHA-256(prev | seq | table | key | row_sha256 | at)   (prev: the entry before)

`canonical(row)` is, for each column whose value is not NULL, in the byte order of the column
names: name, 0x00, a type tag (`i` integer, `f` float, `s` text, `b` bytes), and the 32 bytes of
SHA-256 of the value's bytes (an integer as decimal ASCII, a float as its 8 IEEE-754 bytes
big-endian, text as UTF-8). Hashing each value on its own lets a copy of a row leave a value
out and still be checked: a redacted value is carried as its tag and digest (`redacted`).
The entry digest hashes the UTF-8 of its six fields joined by 0x1F (`at` as the hex of its
8 IEEE-754 bytes); the first `prev` is 64 zeros. PostgreSQL computes the same two digests in
SQL (`postgres_chain.py`), so a judge's role never reads a row or an entry of the chain.
Which of the two computes them is the store's backend's business (`backend.py`): this module's
`append`, `guard`, `start_chain` and `verify` hand the work to the connection's backend, and
the SQLite backend calls the computations here (`append_here`, `guard_here`, `verify_here`).

The first entry is the chain's origin: table `chain`, key `created` (the store was made with
the chain) or `migrated` (an older store: every row it held was chained by the migration, at
the origin's time). A store is intact when (1) every entry's digest follows from the one
before (seq 1, 2, ...), and (2) every row of a chained table has the content its latest entry
records, and no row whose latest entry is live is missing. Anything else is named, first the
row whose latest entry comes first in the order written (rows never chained come after).

A write checks the row it changes against its latest entry first (`change`), so a row edited
outside the tool is never re-chained with the edit by a later write: the write is refused.
What the chain cannot show: a rewrite of the whole chain from the edited row on (anyone with
the file can recompute SHA-256); it changes the head, which the report and the exported
dataset print, so a head published before the rewrite shows it.
"""

from __future__ import annotations

import hashlib
import struct
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from orchestrator.core.errors import BadInput
from orchestrator.store.tables import CHAINED

ORIGIN_TABLE = "chain"
GENESIS = "0" * 64
DELETED = "deleted"

# True while this module reads rows to hash them: a judge's sealed SQLite connection
# (blind_view.seal) lets these reads through, and only digests leave this module.
_HASHING: ContextVar[bool] = ContextVar("chain_hashing", default=False)


def hashing() -> bool:
    return _HASHING.get()


@contextmanager
def _internal() -> Iterator[None]:
    token = _HASHING.set(True)
    try:
        yield
    finally:
        _HASHING.reset(token)


# ------------------------------------------------------------------ the two digests

def _value(value: Any) -> tuple[bytes, bytes]:
    if isinstance(value, bool):
        return b"i", str(int(value)).encode()
    if isinstance(value, int):
        return b"i", str(value).encode()
    if isinstance(value, float):
        return b"f", struct.pack(">d", value)
    if isinstance(value, str):
        return b"s", value.encode("utf-8", "surrogatepass")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return b"b", bytes(value)
    raise TypeError(f"cannot chain a value of type {type(value).__name__}")


def redacted(value: Any) -> dict[str, str] | None:
    """A value left out of a copy of its row, as its type tag and digest (None stays None)."""
    if value is None:
        return None
    tag, data = _value(value)
    return {"redacted": tag.decode(), "sha256": hashlib.sha256(data).hexdigest()}


def row_sha256(row: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical encoding of one row (column name -> value, or a
    `redacted` value)."""
    h = hashlib.sha256()
    for name in sorted(row):
        value = row[name]
        if value is None:
            continue
        if isinstance(value, dict):
            tag, digest = str(value["redacted"]).encode(), bytes.fromhex(value["sha256"])
        else:
            tag, data = _value(value)
            digest = hashlib.sha256(data).digest()
        h.update(name.encode() + b"\x00" + tag + digest)
    return h.hexdigest()


def entry_digest(prev: str, seq: int, table: str, key: str, row_sha: str, at: float) -> str:
    """The digest of chain entry `seq`, which follows the entry whose digest is `prev`."""
    text = "\x1f".join((prev, str(seq), table, key, row_sha, struct.pack(">d", at).hex()))
    return hashlib.sha256(text.encode()).hexdigest()


def row_name(table: str, key: str) -> str:
    """How a message names a row: `judgments id 12`, `trials slot 3`, `chain seq 17`."""
    return f"{table} {CHAINED.get(table, 'seq')} {key}"


# ------------------------------------------------------------------ writing

class ChainBroken(BadInput):
    """A row does not match the chain (exit 2): the store was altered outside the tool."""


def _refuse(table: str, key: str) -> ChainBroken:
    return ChainBroken(f"the campaign store's {row_name(table, key)} does not match its chained digest "
                       "(changed outside the tool); nothing was written; see `orchestrator verify`")


def _current(conn, table: str, key: str) -> str:
    with _internal():
        row = conn.execute(f"SELECT * FROM {table} WHERE {CHAINED[table]} = ? /* chain */", (key,)).fetchone()
        return DELETED if row is None else row_sha256(dict(zip(row.keys(), tuple(row), strict=True)))


def _latest(conn, table: str, key: str) -> str | None:
    with _internal():
        row = conn.execute("SELECT row_sha256 FROM chain WHERE tbl = ? AND row_key = ? ORDER BY seq DESC"
                           " LIMIT 1 /* chain */", (table, key)).fetchone()
    return None if row is None else row[0]


def _insert_entry(conn, table: str, key: str, row_sha: str, at: float | None = None) -> None:
    with _internal():
        head = conn.execute("SELECT seq, digest FROM chain ORDER BY seq DESC LIMIT 1 /* chain */").fetchone()
        seq, prev = (int(head[0]) + 1, head[1]) if head else (1, GENESIS)
        at = time.time() if at is None else at
        conn.execute("INSERT INTO chain (seq, tbl, row_key, row_sha256, at, digest) VALUES (?,?,?,?,?,?)",
                     (seq, table, key, row_sha, at, entry_digest(prev, seq, table, key, row_sha, at)))


def append(conn, table: str, key: Any) -> None:
    """Inside the caller's transaction, after it wrote row `key` of `table`: chain the row's
    content now (or its removal). Nothing is appended when the row is as its latest entry."""
    conn.backend.chain_append(conn, table, str(key))


def append_here(conn, table: str, key: str) -> None:
    """`append`, computed in this process (the SQLite backend's)."""
    current, latest = _current(conn, table, key), _latest(conn, table, key)
    if current == latest or (latest is None and current == DELETED):
        return
    _insert_entry(conn, table, key, current)


def guard(conn, table: str, key: Any) -> None:
    """Before a write changes row `key` of `table`: ChainBroken unless the row is as chained."""
    conn.backend.chain_guard(conn, table, str(key))


def guard_here(conn, table: str, key: str) -> None:
    """`guard`, computed in this process (the SQLite backend's)."""
    current, latest = _current(conn, table, key), _latest(conn, table, key)
    if current != (latest or DELETED):
        raise _refuse(table, key)


@contextmanager
def change(conn, table: str, key: Any) -> Iterator[None]:
    """Around the write of one existing row: checked before, chained after."""
    guard(conn, table, key)
    yield
    append(conn, table, key)


def campaign_key(conn) -> str:
    with _internal():
        row = conn.execute("SELECT id FROM campaign /* chain */").fetchone()
    return str(row[0]) if row else ""


def start_chain(conn) -> None:
    """Schema step 4, inside the caller's transaction, once it created the table `chain`: on a
    server the chain's functions, then the origin and, in an older store, every row it holds
    (the migration point)."""
    conn.backend.chain_install(conn)   # on a server, postgres_chain.install_functions
    with _internal():
        migrated = conn.execute("SELECT count(*) FROM campaign /* chain */").fetchone()[0] > 0
        _insert_entry(conn, ORIGIN_TABLE, "migrated" if migrated else "created", origin_sha256())
        for table, column in CHAINED.items():
            if not conn.backend.has_table(conn, table):
                continue   # made by a later schema step (each of its rows is chained as it is written)
            keys = [str(r[0]) for r in conn.execute(f"SELECT {column} FROM {table} ORDER BY {column} /* chain */")]
            for key in keys:
                append(conn, table, key)


def origin_sha256() -> str:
    return hashlib.sha256(b"orchestrator.chain/1").hexdigest()


# ------------------------------------------------------------------ verifying

@dataclass(frozen=True)
class ChainStatus:
    """What the verification found: the head (the last entry's digest), how many entries, the
    origin (`created`, or `migrated` at `origin_at`), and the rows it could not verify, first
    the first break (empty when intact)."""

    head: str
    entries: int
    origin: str
    origin_at: float | None
    unverified: tuple[str, ...] = ()
    damage: str | None = None     # SQLite's own check of the file found this (its indexes, pages)

    @property
    def intact(self) -> bool:
        return not self.unverified and self.damage is None

    def origin_text(self) -> str:
        if self.origin == "migrated" and self.origin_at is not None:
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.origin_at))
            return f"chained from {when} (entry 1, migrated: rows written before were chained as they were then)"
        return "chained from the start"

    def to_dict(self) -> dict[str, Any]:
        return {"head": self.head, "entries": self.entries, "origin": self.origin,
                "origin_at": self.origin_at, "intact": self.intact, "unverified": list(self.unverified),
                "damage": self.damage}


def walk(entries: list[tuple]) -> int | None:
    """The seq of the first entry (seq, tbl, key, row_sha, at, digest) that does not follow
    from the one before, or does not start with the origin; None when all follow."""
    prev = GENESIS
    for expected, (seq, tbl, key, row_sha, at, digest) in enumerate(entries, start=1):
        try:   # a damaged entry may hold a value of another type
            follows = seq == expected and digest == entry_digest(prev, seq, tbl, key, row_sha, float(at))
        except (TypeError, ValueError, AttributeError, struct.error):
            follows = False
        if not follows:
            return expected
        if seq == 1 and (tbl != ORIGIN_TABLE or row_sha != origin_sha256()):
            return 1
        prev = digest
    return None


def compare(entries: list[tuple], rows: dict[str, list[tuple[str, str]]],
            tables: Iterable[str] = tuple(CHAINED)) -> tuple[str, ...]:
    """The unverified rows, given the entries (in seq order) and, per chained table, its rows'
    (key, row_sha256) in key order: first the broken entry, then rows by the seq of their latest
    entry, then rows never chained (table order, key order). Only `tables` are compared (a
    dataset carries some of them)."""
    tables = tuple(tables)
    broken = walk(entries)
    latest: dict[tuple[str, str], tuple[int, str]] = {}
    for position, (_seq, tbl, key, row_sha, *_) in enumerate(entries, start=1):
        latest[(tbl, key)] = (position, row_sha)   # position == seq wherever the chain is intact
    bad: list[tuple[float, int, int, str]] = []
    for t, table in enumerate(tables):
        for i, (key, sha) in enumerate(rows.get(table, [])):
            seq, chained = latest.pop((table, key), (None, None))
            if chained != sha or (broken is not None and seq is not None and seq >= broken):
                bad.append((float("inf") if seq is None else seq, t, i, row_name(table, key)))
    for (tbl, key), (seq, chained) in latest.items():
        if tbl in tables and (chained != DELETED or (broken is not None and seq >= broken)):
            bad.append((seq, 0, 0, row_name(tbl, key)))
    names = [name for *_, name in sorted(bad)]
    return ((row_name("chain", str(broken)),) if broken is not None else ()) + tuple(names)


def status_of(entries: list[tuple], unverified: tuple[str, ...]) -> ChainStatus:
    """The status of a chain given its entries (in seq order) and what did not verify."""
    origin = entries[0] if entries and entries[0][1] == ORIGIN_TABLE else None
    at = origin[4] if origin else None
    return ChainStatus(head=str(entries[-1][5]) if entries else GENESIS, entries=len(entries),
                       origin=str(origin[2]) if origin else "none",
                       origin_at=float(at) if isinstance(at, (int, float)) else None, unverified=unverified)


def entries_of(conn) -> list[tuple]:
    with _internal():
        return [tuple(r) for r in conn.execute(
            "SELECT seq, tbl, row_key, row_sha256, at, digest FROM chain ORDER BY seq /* chain */")]


def rows_of(conn, table: str) -> list[dict[str, Any]]:
    """Every row of a chained table as stored (column -> value), in key order."""
    with _internal():
        cursor = conn.execute(f"SELECT * FROM {table} ORDER BY {CHAINED[table]} /* chain */")
        return [dict(zip(r.keys(), tuple(r), strict=True)) for r in cursor]


def verify(conn) -> ChainStatus:
    """Recompute the chain of the store on `conn` (on a server, the server does it)."""
    return conn.backend.chain_verify(conn)


def verify_here(conn, damage: list[str]) -> ChainStatus:
    """`verify`, computed in this process from the entries and rows `conn` reads; `damage`:
    what the database's own check of its pages and indexes found (empty: nothing)."""
    entries = entries_of(conn)
    rows = {t: [(str(r[k]), row_sha256(r)) for r in rows_of(conn, t)] for t, k in CHAINED.items()}
    status = status_of(entries, compare(entries, rows))
    return replace(status, damage="; ".join(damage[:3])) if damage else status


def refusal(where: str, status: ChainStatus) -> BadInput:
    """The one line that refuses a broken chain, naming the first row that does not match."""
    if status.damage is not None:
        return ChainBroken(f"{where}: the campaign store is damaged (SQLite's integrity check: {status.damage}), so "
                           "its rows cannot be verified; check it with: sqlite3 CAMPAIGN/campaign.db 'PRAGMA "
                           "integrity_check'; `orchestrator report --allow-broken-chain` reads it anyway")
    more = len(status.unverified) - 1
    return ChainBroken(f"{where}: the evidence chain breaks at {status.unverified[0]} (it does not match its "
                       f"chained digest: the store was altered or damaged)"
                       + (f"; {more} more row{'s' if more != 1 else ''} unverified" if more > 0 else "")
                       + "; `orchestrator report --allow-broken-chain` reads it anyway")
