"""The code passes the linter and the type checker as configured in pyproject.toml (`[tool.ruff]`,
`[tool.mypy]`), the commands `.ci/run` runs before the tests. Each check has a positive control: a
planted file with one finding of each kind, checked with the project's configuration, is reported."""

from __future__ import annotations

import subprocess
import sys

import pytest

from support.repo import REPO
from support.requires import require_installed

CONFIG = REPO / "pyproject.toml"
LINTED = ("orchestrator", "tests", "bench")

# One finding per selected rule set: unsorted imports (I001), an unused import (F401), a mutable
# default argument (B006), a typing import that collections.abc now holds (UP035).
PLANTED_LINT = '''import sys
import os
from typing import Sequence


def f(xs: Sequence[int], seen=[]):
    return sys.argv, seen
'''
PLANTED_CODES = ("I001", "F401", "B006", "UP035")

# A type error inside a function with no annotations: reported only with the project's
# `check_untyped_defs`, so the control also shows that the configuration was read.
PLANTED_TYPE_ERROR = '''def f():
    n: int = "three"
    return n
'''


def tool(name: str, *args: str, cwd=REPO) -> subprocess.CompletedProcess:
    require_installed(name)
    return subprocess.run([sys.executable, "-m", name, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_the_code_passes_ruff():
    result = tool("ruff", "check", *LINTED)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_ruff_reports_a_planted_finding_of_each_selected_rule_set(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(PLANTED_LINT)
    result = tool("ruff", "check", "--config", str(CONFIG), "--no-cache", "--output-format", "concise",
                  str(planted), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert [code for code in PLANTED_CODES if f" {code} " not in result.stdout] == [], result.stdout


def test_the_configured_modules_pass_mypy():
    result = tool("mypy")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout


def test_mypy_reports_a_planted_type_error_with_the_projects_configuration(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(PLANTED_TYPE_ERROR)
    args = ("--cache-dir", str(tmp_path / "cache"), str(planted))
    result = tool("mypy", "--config-file", str(CONFIG), *args, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "planted.py:2: error" in result.stdout and "[assignment]" in result.stdout, result.stdout
    # without the configuration the body of an unannotated function is not checked
    assert tool("mypy", "--config-file", "", *args, cwd=tmp_path).returncode == 0


def test_a_missing_tool_fails_with_the_install_command(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda _name: None)
    with pytest.raises(pytest.fail.Exception, match="uv sync --all-extras"):
        tool("ruff", "--version")
