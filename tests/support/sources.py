"""The package's Python source parsed once per test process, for the tests that read its code
(tests/test_architecture.py, test_store_sql.py, test_store_backend.py, test_motion_paths.py,
test_rig_interface.py, the docs' pointers): each of them walked every module's syntax tree
itself, about 0.75 s of CPU a time for the 280 modules (docs/benchmarks.md, the fast lane).

The cache is keyed by the text, not the path: a file that changes is parsed again, and a copy of
the package (a positive control planting a line in it) reuses the trees of the files it did not
change. The trees are shared: a caller reads them and never changes them."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path


@cache
def tree(text: str) -> ast.Module:
    """`ast.parse(text)`, once per text."""
    return ast.parse(text)


@cache
def nodes(text: str) -> tuple[ast.AST, ...]:
    """Every node of `text`'s tree, in `ast.walk`'s order, once per text."""
    return tuple(ast.walk(tree(text)))


def walk(path: Path) -> tuple[ast.AST, ...]:
    """Every node of the module at `path` (read now, parsed once per text)."""
    return nodes(path.read_text())
