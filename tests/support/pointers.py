"""Pointers in the project's text -- file paths, dotted module names, test ids -- and which of
them name nothing that exists (used by tests/test_docs.py)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from support import sources

STAGES = ("core", "design", "store", "sim", "rigs", "policies", "run", "judging", "analysis", "export",
          "commands")
TOP = ("orchestrator", "tests", "bench", "docs", "hardware", "protocols", "layouts", ".ci")
# Files the text tells a user to make: they are not in the repository, by design.
USER_MADE = {"hardware/so101.yaml": "the README and the example profile say: copy the example to it",
             "orchestrator/demo_data/": "the wheel's copy of the demo's files (pyproject's force-include)"}

_TOPS, _STAGES = "|".join(re.escape(t) for t in TOP), "|".join(STAGES)
PATH = re.compile(rf"(?<![\w./~-])((?:{_TOPS})/[\w./-]*\w/?)(?:::(\w+)(\*)?)?")
STAGE_PATH = re.compile(rf"(?<![\w./~-])((?:{_STAGES})/(?:[\w-]+/)*[\w-]+(?:\.py|/))")
DOTTED = re.compile(r'(?<![\w.])(orchestrator(?:\.\w+)+)(?![\w/"])')   # "orchestrator.report/1": a schema id
STAGE_DOTTED = re.compile(rf"`((?:{_STAGES})(?:\.\w+)+)`(?!\()")


def scanned(repo: Path) -> list[Path]:
    files = [repo / "README.md", repo / ".ci" / "run", *sorted((repo / "docs").glob("*.md"))]
    for folder, patterns in (("orchestrator", ("*.py", "*.js", "*.tcss", "*.html")), ("tests", ("*.py",)),
                             ("bench", ("*.py", "*.sh")), ("hardware", ("*.yaml",)), ("protocols", ("*.yaml",))):
        for pattern in patterns:
            files += sorted(p for p in (repo / folder).rglob(pattern) if "__pycache__" not in p.parts)
    return files


def _statements(tree: ast.AST) -> Iterator[ast.stmt]:
    """Every statement of a module, nested ones included, without walking into expressions
    (where no def, class, assignment or import can be): what `ast.walk` would find of them, in a
    third of its time."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, field, ()):
                if isinstance(child, ast.stmt):
                    yield child
                stack.append(child)


@cache
def _names(path: Path) -> frozenset[str]:
    """The names a module defines at its top level or in its classes (defs, classes, assignments,
    imports)."""
    try:
        tree = sources.tree(path.read_text())
    except SyntaxError:
        return frozenset()
    found: set[str] = set()
    for node in _statements(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                for n in ast.walk(target):
                    if isinstance(n, ast.Name):
                        found.add(n.id)
                    elif isinstance(n, ast.Attribute):
                        found.add(n.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(found)


def _placeholder(target: str) -> bool:
    """`tests/FILE.py`, `policies/T.py`: a segment in capitals stands for any name."""
    return any(c in target for c in "*<{") or any(re.fullmatch(r"[A-Z][A-Z_]*", Path(seg).stem)
                                                  for seg in target.split("/"))


@cache
def _package_names(repo: Path) -> frozenset[str]:
    return frozenset().union(*(_names(p) for p in (repo / "orchestrator").rglob("*.py")))


def resolve_stage_dotted(repo: Path, dotted: str) -> bool:
    """`store.chain` or `run.motion.ArmMotion`: a module of the stage (and a name in it); or, as
    in `store.evidence` (an attribute of a store) or `judging.hide_labels_from_operator` (a
    protocol key), a name the package defines somewhere."""
    stage, first, *rest = dotted.split(".")
    if resolve_dotted(repo, "orchestrator." + dotted):
        return True
    if rest:              # a dotted path into a module must resolve as one
        return False
    module = repo / "orchestrator" / stage / first
    return not (module.with_suffix(".py").is_file() or module.is_dir()) and first in _package_names(repo)


def resolve_dotted(repo: Path, dotted: str) -> bool:
    """`a.b.c` names a module (file or package) of the repository, or a name defined in one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = repo.joinpath(*parts[:cut])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if module.is_file() or (cut == len(parts) and base.is_dir()):
            rest = parts[cut:]
            return not rest or (module.is_file() and rest[0] in _names(module))
    return False


def stale(repo: Path, path: Path, text: str | None = None) -> list[str]:
    """Every pointer in `path` (or in `text`, read as if it were `path`'s) that resolves to
    nothing in `repo`, as `file:line: pointer`."""
    out = []
    text = path.read_text(errors="replace") if text is None else text
    for n, line in enumerate(text.splitlines(), 1):
        bad = []
        for m in PATH.finditer(line):
            target, test, prefix = m.group(1).rstrip("."), m.group(2), m.group(3)
            if _placeholder(target) or target in USER_MADE:
                continue
            where = repo / target
            if not where.exists():
                bad.append(target)
            elif test and where.suffix == ".py":
                names = _names(where)
                if not (any(n.startswith(test) for n in names) if prefix else test in names):
                    bad.append(f"{target}::{test}{prefix or ''}")
        for m in STAGE_PATH.finditer(line):
            if line[max(0, m.start() - 13):m.start()].endswith("orchestrator/"):
                continue
            if not _placeholder(m.group(1)) and not (repo / "orchestrator" / m.group(1)).exists():
                bad.append(m.group(1))
        for m in DOTTED.finditer(line):
            if not m.group(1).endswith("__file__") and not resolve_dotted(repo, m.group(1)):
                bad.append(m.group(1))
        for m in STAGE_DOTTED.finditer(line):
            if path.suffix == ".py" and not resolve_stage_dotted(repo, m.group(1)):
                bad.append(m.group(1))
        out += [f"{path.relative_to(repo)}:{n}: {b}" for b in bad]
    return out
