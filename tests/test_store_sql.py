"""The store owns its SQL: no module of `orchestrator/` outside `orchestrator/store/` holds an SQL
statement in a string, reaches a store's connection (`store.conn`), or asks which database is
behind a store (`dialect`); the stages above the store go through its methods. Each check has a
planted positive control."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from support import sources
from support.repo import REPO

PACKAGE = REPO / "orchestrator"
STORE = PACKAGE / "store"
# A statement, not a word: keywords in capitals followed by what makes them one.
SQL = re.compile(r"\bSELECT\s+(?:[\w*(]|DISTINCT\b)|\bINSERT\s+INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b"
                 r"|\b(?:CREATE|ALTER|DROP)\s+(?:OR\s+REPLACE\s+)?(?:TABLE|VIEW|INDEX|FUNCTION)\b")


def _docstrings(text: str) -> set[int]:
    """ids of the docstring nodes of `text`'s (shared) tree (prose, which may quote SQL to explain it)."""
    out = set()
    for node in sources.nodes(text):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def sql_strings(path: Path) -> list[str]:
    """`file:line: text` of each string literal (f-string parts too) in `path` that holds a statement."""
    text = path.read_text()
    prose = _docstrings(text)
    return [f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{node.lineno}: {node.value[:60]!r}"
            for node in sources.nodes(text)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
            and SQL.search(node.value)]


def database_reaches(path: Path) -> list[str]:
    """`file:line: name` of each `.conn` attribute or `dialect` name in `path`'s code."""
    out = []
    for node in sources.walk(path):
        name = node.attr if isinstance(node, ast.Attribute) else None
        if isinstance(node, ast.Constant) and node.value == "dialect":
            name = "dialect"      # getattr(conn, "dialect", ...)
        if name in ("conn", "dialect"):
            out.append(f"{path.name}:{node.lineno}: {name}")
    return out


def modules_above_the_store() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if STORE not in p.parents]


def test_no_sql_statement_outside_the_store():
    paths = modules_above_the_store()
    assert len(paths) > 150                                       # count guard: the package was read
    assert len([s for p in sorted(STORE.glob("*.py")) for s in sql_strings(p)]) > 50   # the store's own are found
    assert [s for p in paths for s in sql_strings(p)] == []


def test_no_module_outside_the_store_reaches_its_connection():
    assert [r for p in modules_above_the_store() for r in database_reaches(p)] == []


def test_a_planted_statement_and_connection_are_caught(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('"""Reads SELECT id FROM trials (prose: allowed)."""\n\n'
                       'def f(store, unit):\n'
                       '    """UPDATE blocks SET state in a docstring is prose."""\n'
                       '    store.conn.execute(f"UPDATE blocks SET state = {unit!r}")\n'
                       '    getattr(store.conn, "dialect", "sqlite")\n'
                       '    return "SELECT policy FROM trials WHERE slot = ?"\n'
                       'MESSAGE = "select a policy, then delete from the list"\n')
    assert sorted(int(line.split(":")[1]) for line in sql_strings(planted)) == [5, 7]
    assert sorted(database_reaches(planted)) == ["planted.py:5: conn", "planted.py:6: conn", "planted.py:6: dialect"]
    for statement in ("INSERT INTO stations VALUES (?)", "DELETE FROM judgments", "CREATE TABLE IF NOT EXISTS x (a)",
                      "SELECT count(*) FROM blocks", "CREATE OR REPLACE VIEW v AS"):
        assert SQL.search(statement), statement
    for words in ("Update the README", "select the rows", "delete from the list", "SELECT: pick one"):
        assert SQL.search(words) is None, words
