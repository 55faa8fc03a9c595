"""Property: no mutation of the shipped protocol (or its layout) produces a traceback.

`orchestrator validate` returns 0 or 2, and on 2 every stderr line is `path:line:col: message`.
Mutations act on the text (delete, insert garbage, truncate, duplicate/swap lines, flip bytes)
and on the parsed structure (delete keys, change types, add keys), dumped back to YAML.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.cli import main
from support.repo import GRID20, LOCATED, sim_protocol_text

SIM = sim_protocol_text()
GRID = GRID20.read_text()
# Protocol mutations run against a 3-mark layout: parsing the 20-mark one dominates the time.
SMALL_LAYOUT = (GRID.split("marks:")[0] + "marks:\n" + "".join(
    line + "\n" for line in GRID.splitlines() if "id: M01" in line or "id: M10" in line or "id: M20" in line))
WORKDIR = Path(tempfile.mkdtemp(prefix="fuzz-protocol-"))


def _validate(protocol: bytes, layout: bytes) -> tuple[int, str]:
    (WORKDIR / "protocol.yaml").write_bytes(protocol)
    (WORKDIR / "layout.yaml").write_bytes(layout)
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(["validate", str(WORKDIR / "protocol.yaml")])
        except SystemExit as exc:  # pragma: no cover - would be a bug too
            raise AssertionError(f"SystemExit({exc.code}) from validate") from None
    return code, err.getvalue()


def _check(code: int, err: str) -> None:
    assert code in (0, 2), err
    assert "Traceback" not in err and "internal error" not in err, err
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert lines
        for line in lines:
            match = LOCATED.match(line)
            assert match, f"not located: {line!r}"
            assert int(match["line"]) >= 1 and int(match["col"]) >= 1
    else:
        assert err == ""


# ------------------------------------------------------------------ text mutations

GARBAGE = st.one_of(
    st.text(alphabet=st.sampled_from(list(":-[]{},&*!|>'\"#%@` \t\n?") + ["\x00", "\ufeff", "é"]),
            max_size=8),
    st.binary(max_size=8).map(lambda b: b.decode("latin-1")),
    st.sampled_from(["null", "~", "[]", "{}", "-1", "1e999", ".nan", "!!binary x", "&a", "*a",
                     "yes", "0x1F", "2026-11-29", "'", "\"", "? ", ": ", "- "]),
)


@st.composite
def mutated_text(draw, text: str) -> bytes:
    data = text.encode("utf-8")
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["delete", "insert", "truncate", "replace", "dup-line",
                                     "swap-lines", "flip-byte"]))
        n = len(data)
        if kind == "truncate":
            data = data[:draw(st.integers(0, n))]
        elif kind == "delete" and n:
            start = draw(st.integers(0, n - 1))
            data = data[:start] + data[start + draw(st.integers(1, 40)):]
        elif kind == "insert":
            at = draw(st.integers(0, n))
            data = data[:at] + draw(GARBAGE).encode("utf-8", "surrogatepass") + data[at:]
        elif kind == "replace" and n:
            at = draw(st.integers(0, n - 1))
            data = data[:at] + draw(GARBAGE).encode("utf-8", "surrogatepass") + data[at + 1:]
        elif kind == "flip-byte" and n:
            at = draw(st.integers(0, n - 1))
            data = data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1:]
        elif kind in ("dup-line", "swap-lines"):
            lines = data.split(b"\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if kind == "dup-line":
                lines.insert(j, lines[i])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            data = b"\n".join(lines)
    return data


# ORCH_FUZZ_EXAMPLES=2000 for a longer hunt; the default keeps the suite quick.
EXAMPLES = int(os.environ.get("ORCH_FUZZ_EXAMPLES", "150"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LAYOUT_SETTINGS = settings(max_examples=max(1, EXAMPLES // 3), deadline=None,
                           suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(mutated_text(SIM))
def test_text_mutations_of_protocol(protocol):
    _check(*_validate(protocol, SMALL_LAYOUT.encode()))


@LAYOUT_SETTINGS
@given(mutated_text(GRID))
def test_text_mutations_of_layout(layout):
    _check(*_validate(SIM.encode(), layout))


# ------------------------------------------------------------------ structure mutations

ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=6), st.integers(), max_size=3),
    st.sampled_from([0, -1, 0.0, 1.0, 1e-12, 10**9, "", "scripted", "lerobot", "balanced", [], {}]),
).map(copy.deepcopy)   # a fresh value per draw: the sampled [] and {} are one object each, and an
#                        add-key into one that was drawn twice made the document contain itself


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*prefix, index))


def _parent(root, path):
    node = root
    for part in path[:-1]:
        node = node[part]
    return node


@st.composite
def mutated_structure(draw, text: str) -> bytes:
    data = yaml.safe_load(text)
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(data) if p]
        if not paths or not isinstance(data, dict):
            break
        path = draw(st.sampled_from(paths))
        parent = _parent(data, path)
        kind = draw(st.sampled_from(["delete", "retype", "add-key", "wrap", "copy-elsewhere"]))
        if kind == "delete":
            del parent[path[-1]]
        elif kind == "retype":
            parent[path[-1]] = draw(ODD_VALUES)
        elif kind == "add-key":
            target = parent[path[-1]]
            key = draw(st.one_of(st.text(min_size=1, max_size=10),
                                 st.sampled_from(["seeds", "fsp", "aim_noise", "typ", "A", "C", "kind"])))
            if isinstance(target, dict):
                target[key] = draw(ODD_VALUES)
            else:
                parent[key if isinstance(parent, dict) else 0] = draw(ODD_VALUES) if isinstance(parent, dict) \
                    else parent[0]
        elif kind == "wrap":
            parent[path[-1]] = [parent[path[-1]]] if draw(st.booleans()) else {"value": parent[path[-1]]}
        else:
            other = draw(st.sampled_from(paths))
            parent[path[-1]] = copy.deepcopy(_parent(data, other)[other[-1]]) if other[:len(path)] != path \
                else None
    return yaml.safe_dump(data, sort_keys=draw(st.booleans()), allow_unicode=True).encode("utf-8")


@SETTINGS
@given(mutated_structure(SIM))
def test_structure_mutations_of_protocol(protocol):
    _check(*_validate(protocol, SMALL_LAYOUT.encode()))


@LAYOUT_SETTINGS
@given(mutated_structure(GRID))
def test_structure_mutations_of_layout(layout):
    _check(*_validate(SIM.encode(), layout))


def test_a_valid_structure_round_trip_is_ok():
    for layout in (GRID, SMALL_LAYOUT):
        code, err = _validate(yaml.safe_dump(yaml.safe_load(SIM)).encode(), layout.encode())
        assert code == 0, err
