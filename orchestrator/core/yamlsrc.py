"""YAML loading that remembers where every key and value came from.

Validation messages must point at `path:line:col` of the offending key (docs/design.md section 4,
`orchestrator validate`). PyYAML's composer keeps node marks; we walk the node tree once and
record the 1-based (line, column) of every mapping key and sequence item by its path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.core.errors import BadInput
from orchestrator.core.textfile import read_text_file

Loc = tuple[str | int, ...]


@dataclass
class SourceMap:
    """Positions of the keys and items of one YAML document, by path."""

    path: Path
    positions: dict[Loc, tuple[int, int]] = field(default_factory=dict)

    def locate(self, loc: Loc) -> str:
        """`file:line:col` of the deepest known prefix of `loc` (the document start if none)."""
        for cut in range(len(loc), -1, -1):
            pos = self.positions.get(tuple(loc[:cut]))
            if pos:
                return f"{self.path}:{pos[0]}:{pos[1]}"
        return f"{self.path}:1:1"


def _walk(node: yaml.Node, loc: Loc, out: dict[Loc, tuple[int, int]],
          seen: set[int] | None = None) -> None:
    # An alias (`*x`) is the same node object as its anchor: visit each node once, so a
    # recursive alias (`a: &x [*x]`) or a "billion laughs" document cannot loop or explode.
    seen = set() if seen is None else seen
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            child = (*loc, key)
            out[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            _walk(value_node, child, out, seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*loc, index)
            out[child] = (item.start_mark.line + 1, item.start_mark.column + 1)
            _walk(item, child, out, seen)


def _syntax_error(path: Path, exc: yaml.MarkedYAMLError) -> str:
    """One line naming both places PyYAML knows: where the construct opened (`context_mark`, e.g.
    an unclosed `{`: where the user has to look) and where PyYAML noticed (`problem_mark`)."""
    problem, context = exc.problem_mark, exc.context_mark
    reason = exc.problem or exc.context or "invalid YAML"
    if context is not None and problem is not None and (context.line, context.column) != (problem.line, problem.column):
        return (f"{path}:{context.line + 1}:{context.column + 1}: YAML syntax error: {reason} at line "
                f"{problem.line + 1}, column {problem.column + 1}, {exc.context or 'in what'} that starts here")
    mark = problem or context
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    return f"{path}:{line}:{col}: YAML syntax error: {reason}"


def load_yaml_mapping(path: Path, what: str) -> tuple[dict[str, Any], SourceMap, str]:
    """Read `path` as a YAML mapping; return (data, source map, text).

    Every way a file can be unusable (missing, unreadable, not UTF-8, not YAML, empty, not a
    mapping) becomes a `BadInput` with one located line.
    """
    path = Path(path)
    text = read_text_file(path, what)
    smap = SourceMap(path)
    try:
        loader = yaml.SafeLoader(text)
        try:  # what yaml.safe_load does, keeping the node: the text is parsed once
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.reader.ReaderError as exc:  # a control character the YAML reader refuses
        line = text.count("\n", 0, exc.position) + 1
        col = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        raise BadInput(f"{path}:{line}:{col}: YAML syntax error: character "
                       f"U+{ord(char):04X} is not allowed in YAML") from None
    except yaml.MarkedYAMLError as exc:
        raise BadInput(_syntax_error(path, exc)) from None
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BadInput(f"{path}:1:1: YAML error: {first}") from None
    except RecursionError:
        raise BadInput(f"{path}:1:1: YAML nesting is too deep") from None
    if node is None or data is None:
        raise BadInput(f"{path}:1:1: {what} file is empty")
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise BadInput(f"{path}:1:1: {what} must be a mapping of keys to values, not a {kind}")
    _walk(node, (), smap.positions)
    return data, smap, text
