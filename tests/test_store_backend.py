"""The store's one seam between its SQL and its two databases (store/backend.py, the PostgreSQL
modules): the schema is described once (store/tables.py) and is what both databases create; the
server reads the store's SQL as written, a `?` inside a string literal staying a character; the
two computations of the evidence chain's digests (Python, chain.py; SQL, postgres_chain.py)
agree value for value; and no module outside the seam asks which database it is on (each check
with a planted positive control)."""

from __future__ import annotations

import ast
import math
import shutil
import sqlite3
from pathlib import Path

import pytest

from orchestrator.store import chain
from orchestrator.store.backend import SQLITE, SqliteConnection
from orchestrator.store.postgres import server_sql
from orchestrator.store.postgres_backend import POSTGRES
from orchestrator.store.schema import SCHEMA_1, create_schema
from orchestrator.store.tables import CHAINED, IDENTITY, KEYS
from support import sources
from support.repo import REPO

SCHEMA1_FIXTURE = REPO / "tests" / "fixtures" / "schema1" / "campaign.db"

# The seam: the interface with the SQLite backend, and the modules that exist only for the server.
SEAM = {"backend.py", "sqlite_file.py", "postgres.py", "postgres_backend.py", "postgres_chain.py",
        "postgres_blind.py", "postgres_roles.py", "postgres_stations.py", "postgres_copy.py", "leases.py"}
DIALECT_WORDS = {"postgresql", "postgres", "sqlite", "dialect"}
CONNECTION_CLASSES = {"PgConnection", "SqliteConnection", "Connection", "PostgresBackend", "SqliteBackend"}


def dialect_branches(root: Path) -> list[str]:
    """`path:line: what` of every place under `root`/orchestrator outside the seam that asks which
    database it is on: reads a `dialect`, compares with a dialect's name, tests a connection's or
    a backend's class or identity, or (inside store/) branches on `on_server`."""
    found = []
    for path in sorted((root / "orchestrator").rglob("*.py")):
        in_store = path.parent.name == "store"
        if in_store and path.name in SEAM:
            continue
        name = str(path.relative_to(root))
        for node in sources.walk(path):
            what = None
            if isinstance(node, ast.Attribute) and node.attr == "dialect":
                what = ".dialect"
            elif isinstance(node, ast.Constant) and node.value == "dialect":
                what = '"dialect"'
            elif isinstance(node, ast.Compare) and any(
                    isinstance(c, ast.Constant) and str(c.value).lower() in DIALECT_WORDS
                    for c in [node.left, *node.comparators]):
                what = "a dialect's name compared"
            elif isinstance(node, ast.Compare) and any(
                    isinstance(c, ast.Name) and c.id in ("SQLITE", "POSTGRES") for c in [node.left, *node.comparators]):
                what = "a backend's identity compared"
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                  and len(node.args) == 2 and any(isinstance(n, (ast.Name, ast.Attribute))
                                                  and (getattr(n, "id", None) or getattr(n, "attr", None))
                                                  in CONNECTION_CLASSES for n in ast.walk(node.args[1]))):
                what = "isinstance of a connection or backend"
            elif in_store and isinstance(node, (ast.If, ast.IfExp, ast.While)) and any(
                    isinstance(n, ast.Attribute) and n.attr == "on_server" for n in ast.walk(node.test)):
                what = "branches on on_server"
            if what:
                found.append(f"{name}:{getattr(node, 'lineno', 0)}: {what}")
    return found


def test_no_module_outside_the_seam_branches_on_the_dialect():
    assert dialect_branches(REPO) == []


def test_positive_control_planted_dialect_branches_are_found(tmp_path):
    shutil.copytree(REPO / "orchestrator", tmp_path / "orchestrator", ignore=shutil.ignore_patterns("__pycache__"))
    assert dialect_branches(tmp_path) == []
    plants = {
        "store/judgments.py": 'TABLE = "blind_episodes" if getattr(c, "dialect", "") == "postgresql" else "episodes"',
        "store/chain.py": "ON_SERVER = isinstance(conn, PgConnection)",
        "store/sqlite.py": "WHERE = 'server' if store.on_server else 'file'",
        "store/schema.py": "SERVER = conn.backend is POSTGRES",
        "judging/blinding.py": "SQL = VIEW if store.conn.dialect == 'sqlite' else SERVER_VIEW",
    }
    for name, line in plants.items():
        path = tmp_path / "orchestrator" / name
        path.write_text(path.read_text() + "\n" + line + "\n")
    found = dialect_branches(tmp_path)
    assert {line.split(":")[0] for line in found} == {f"orchestrator/{name}" for name in plants}
    assert len(found) >= len(plants)


# ------------------------------------------------------------------ the server reads the SQL as written

@pytest.mark.parametrize(("sql", "with_params", "expected"), [
    ("SELECT '?', ? FROM t", True, "SELECT '?', %s FROM t"),                 # the literal keeps its ?
    ("SELECT 'it''s ?' WHERE a = ?", True, "SELECT 'it''s ?' WHERE a = %s"),  # a doubled quote inside
    ('SELECT "odd?name" FROM t WHERE b = ?', True, 'SELECT "odd?name" FROM t WHERE b = %s'),
    ("SELECT 1 -- why?\nWHERE c = ?", True, "SELECT 1 -- why?\nWHERE c = %s"),
    ("SELECT /* ? */ ?", True, "SELECT /* ? */ %s"),
    ("DO $body$ BEGIN PERFORM '?'; END $body$", False, "DO $body$ BEGIN PERFORM '?'; END $body$"),
    ("SELECT $1, ?", True, "SELECT $1, %s"),                                 # $1 is not a dollar quote
    ("SELECT 'a%' || ?", True, "SELECT 'a%%' || %s"),                        # psycopg reads % everywhere
    ("SELECT 'a%b' WHERE x LIKE 'y%'", False, "SELECT 'a%b' WHERE x LIKE 'y%'"),   # no parameters: as is
])
def test_a_question_mark_is_a_parameter_only_outside_literals(sql, with_params, expected):
    assert server_sql(sql, with_params) == expected


def test_positive_control_the_old_replacement_changed_a_literal():
    def old_placeholders(sql: str) -> str:    # store/postgres.py's `_placeholders` before the seam
        return sql.replace("%", "%%").replace("?", "%s")

    assert old_placeholders("SELECT '?', ? FROM t") != server_sql("SELECT '?', ? FROM t", True)
    assert old_placeholders("SELECT 'a%b'") != server_sql("SELECT 'a%b'", False)


def test_literals_reach_the_server_as_written(pg_cluster):
    from orchestrator.store.postgres import PgConnection

    conn = PgConnection(pg_cluster.new_database())
    try:
        assert tuple(conn.execute("SELECT '?' || ?, 'a%b', 'c?'", ("x",)).fetchone()) == ("?x", "a%b", "c?")
        assert tuple(conn.execute("SELECT 'a%b', '?' /* ? */").fetchone()) == ("a%b", "?")
    finally:
        conn.close()


# ------------------------------------------------------------------ one schema description

def _sqlite_schema() -> SqliteConnection:
    conn = sqlite3.connect(":memory:", isolation_level=None, factory=SqliteConnection)
    conn.execute("BEGIN")
    create_schema(conn)
    conn.execute("COMMIT")
    return conn


def test_the_description_is_the_schema_sqlite_creates():
    conn = _sqlite_schema()
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == set(KEYS)
    for table, key in KEYS.items():
        columns = {r[1]: (r[2], r[5]) for r in conn.execute(f"PRAGMA table_info({table})")}
        assert columns[key][1] == 1, (table, key)                         # the key is the primary key
        assert (table in IDENTITY) == (key == "id" and columns[key][0] == "INTEGER"), table   # the rowid
    assert chain.CHAINED is CHAINED and set(CHAINED) < set(KEYS)
    assert set(IDENTITY) == {"attempts", "judgments", "events", "sessions"}


def test_schema_1_on_sqlite_is_the_text_as_it_shipped():
    shipped = sqlite3.connect(SCHEMA1_FIXTURE)
    try:
        stored = {r[0]: r[1] for r in shipped.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL")}
    finally:
        shipped.close()
    statements = [s.strip() for s in SQLITE.ddl(SCHEMA_1).split(";") if s.strip()]
    assert len(statements) == 8   # 7 tables and an index
    for statement in statements:
        name = statement.split("(")[0].split()[-1] if statement.startswith("CREATE TABLE") else statement.split()[2]
        assert stored[name] == statement, name


def test_the_server_creates_the_same_tables_with_its_types(pg_cluster):
    from orchestrator.store.postgres import PgConnection

    assert POSTGRES.ddl("{id} {int} {real}") == ("BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY BIGINT "
                                                 "DOUBLE PRECISION")
    lite = _sqlite_schema()
    conn = PgConnection(pg_cluster.new_database())
    try:
        conn.execute("BEGIN")
        create_schema(conn)
        conn.execute("COMMIT")
        server_type = {"INTEGER": "bigint", "REAL": "double precision", "TEXT": "text"}
        compared = 0
        for table in KEYS:
            on_server = {r[0]: (r[1], r[2]) for r in conn.execute(
                "SELECT column_name, data_type, is_identity FROM information_schema.columns"
                " WHERE table_schema = 'public' AND table_name = ?", (table,))}
            in_file = {r[1]: r[2] for r in lite.execute(f"PRAGMA table_info({table})")}
            assert set(on_server) == set(in_file), table
            for column, declared in in_file.items():
                identity = table in IDENTITY and column == "id"
                assert on_server[column] == (server_type[declared], "YES" if identity else "NO"), (table, column)
                compared += 1
        assert compared > 60
    finally:
        conn.close()
        lite.close()


# ------------------------------------------------------------------ the two chain digests agree

EDGE_FLOATS = (0.0, -0.0, 0.1, -1.5, 1e300, 5e-324, 1796637429.163295, math.pi)
EDGE_TEXT = ("", "plain", "é ✓ 日本", "tab\tand\nnewline", "quote ' and \" and ?", "\u2028 \U0001f916")
EDGE_INTS = (0, -1, 7, 2**53 + 1, -(2**62))


def test_the_python_and_sql_chain_digests_agree(pg_cluster, tmp_path):
    """Every row of every chained table of a server campaign, plus event rows holding edge values,
    digested by the server's SQL (`chain_row_sha`) and by chain.py (`row_sha256`); and entry
    digests (`chain_entry_digest` against `entry_digest`) over edge values."""
    from support.pg_campaign import campaign_on_server

    url, store = campaign_on_server(pg_cluster, tmp_path / "videos", episodes=2)
    store.close()
    from orchestrator.store.postgres import PgConnection

    conn = PgConnection(url)    # the owner: the encoding functions are the owner's only
    try:
        conn.execute("BEGIN")
        for i, (at, text, number) in enumerate(zip(EDGE_FLOATS, EDGE_TEXT * 2, EDGE_INTS * 2, strict=False)):
            conn.execute("INSERT INTO events (at, kind, slot, message, data) VALUES (?, ?, ?, ?, ?)",
                         (at, f"edge{i}", number, text, None if i % 2 else text[::-1]))
        conn.execute("COMMIT")
        compared = 0
        for table in CHAINED:
            for row in chain.rows_of(conn, table):
                key = str(row[CHAINED[table]])
                on_server = conn.execute("SELECT chain_row_sha(?, ?)", (table, key)).fetchone()[0]
                assert on_server == chain.row_sha256(row), (table, key, row)
                compared += 1
        assert compared >= 20   # the campaign (1 + 8 trials + 2 attempts + 2 episodes + ...) and the edge events
        events = chain.rows_of(conn, "events")
        assert {math.copysign(1.0, e["at"]) for e in events if e["at"] == 0.0} == {1.0, -1.0}   # -0.0 kept
        for prev, seq, table, key, sha, at in [
                (chain.GENESIS, 1, "chain", "created", chain.origin_sha256(), 1796637429.163295),
                ("ab" * 32, 2**40, "judgments", "é ✓ ?", "deleted", -0.0),
                ("00" * 32, 7, "events", "", "f" * 64, 5e-324),
                ("12" * 32, 3, "trials", "3", "e" * 64, 1e300)]:
            on_server = conn.execute("SELECT chain_entry_digest(?, ?, ?, ?, ?, ?)",
                                     (prev, seq, table, key, sha, at)).fetchone()[0]
            assert on_server == chain.entry_digest(prev, seq, table, key, sha, at), (seq, table, key)
        # positive control: one bit of one value and the digests part
        row = dict(events[-1])
        row["at"] = math.nextafter(row["at"], math.inf)
        on_server = conn.execute("SELECT chain_row_sha('events', ?)", (str(row["id"]),)).fetchone()[0]
        assert on_server != chain.row_sha256(row)
    finally:
        conn.close()
