"""No test guesses at time with a sleep: every `time.sleep` in tests/ either polls a condition
with a deadline (it sits in a `while` loop that checks a deadline, a timeout or the clock) or says on its
own line what it is (a comment: a stimulus, an observation window, pacing, or a bound with its
measured distribution).

What `grep -rn "time.sleep" tests/` lists is read here with Python's own parser, so a sleep in a
nested function, a lambda or a one-line loop is found the same way. The rule guards against the
pattern "sleep, then measure", which passes or fails with the machine's load."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

from support.repo import REPO

DEADLINE_WORDS = ("deadline", "timeout", "time.monotonic()")   # a deadline by name, or a clock read in the loop


def _comment_lines(source: str) -> set[int]:
    return {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT}


def _sleeps(tree: ast.AST) -> list[tuple[ast.Call, ast.While | None]]:
    """Every `time.sleep(...)` call with its nearest enclosing `while` loop in the same function."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "sleep" and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "time"):
            continue
        loop, up = None, node
        while up in parents and loop is None:
            up = parents[up]
            if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                break
            if isinstance(up, ast.While):
                loop = up
        found.append((node, loop))
    return found


def unexplained_sleeps(path: Path) -> tuple[int, list[str]]:
    """(how many sleeps `path` has, those that neither poll with a deadline nor carry a comment)."""
    source = path.read_text()
    if "sleep" not in source:        # no `time.sleep` can be in it: not parsed (most of tests/)
        return 0, []
    comments, sleeps = _comment_lines(source), _sleeps(ast.parse(source))
    bad = []
    for call, loop in sleeps:
        if call.lineno in comments:
            continue
        if loop is not None and any(word in ast.unparse(loop).lower() for word in DEADLINE_WORDS):
            continue
        bad.append(f"{path.relative_to(path.parents[1]) if len(path.parents) > 1 else path}:{call.lineno}")
    return len(sleeps), bad


def test_every_sleep_in_the_tests_polls_with_a_deadline_or_says_what_it_is():
    files = sorted((REPO / "tests").rglob("*.py"))
    counted, bad = 0, []
    for path in files:
        n, found = unexplained_sleeps(path)
        counted, bad = counted + n, bad + found
    assert counted >= 40, f"only {counted} sleeps found in tests/: the scan is broken"   # count guard
    assert not bad, "sleeps that neither poll a condition with a deadline nor say what they are:\n" + "\n".join(bad)


def test_positive_control_a_bare_sleep_and_a_loop_without_a_deadline_are_found(tmp_path):
    planted = tmp_path / "tests" / "test_planted.py"
    planted.parent.mkdir()
    planted.write_text(
        "import time\n"
        "def test_a():\n"
        "    start()\n"
        "    time.sleep(0.5)\n"                                  # sleep, then measure: found
        "    assert measured() < 1.0\n"
        "def test_b():\n"
        "    while not ready():\n"
        "        time.sleep(0.1)\n"                              # polls, but forever: found
        "def test_c():\n"
        "    deadline = time.monotonic() + 5\n"
        "    while not ready():\n"
        "        assert time.monotonic() < deadline\n"
        "        time.sleep(0.1)\n"                              # polls with a deadline: fine
        "def test_d():\n"
        "    time.sleep(0.3)   # the stimulus: the operator walks to the arm\n")   # says what it is
    n, bad = unexplained_sleeps(planted)
    assert n == 4 and [line.rsplit(":", 1)[1] for line in bad] == ["4", "8"], (n, bad)
