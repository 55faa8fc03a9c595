"""What a test needs that a plain `pip install` of the package does not bring: a missing one fails
the test with the command that installs it (a skip would let a feature go untested unnoticed)."""

from __future__ import annotations

import importlib
import shutil

import pytest

SYNC = "uv sync --all-extras (the README's test command, `uv run --all-extras pytest`, does it)"


def require_module(name: str) -> None:
    """Fail (at collection, for a module-level call) when `name` cannot be imported."""
    try:
        importlib.import_module(name)
    except ImportError as exc:
        pytest.fail(f"{name} is not installed ({exc}); install the extras: {SYNC}", pytrace=False)


def require_installed(name: str) -> None:
    """Fail (at collection) when `name` is not installed, without importing it: a test module
    that needs torch-importing packages (transformers, diffusers) stays quick to collect."""
    import importlib.util

    if importlib.util.find_spec(name) is None:
        pytest.fail(f"{name} is not installed; install the extras: {SYNC}", pytrace=False)


def require_program(name: str, install: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed; {install}", pytrace=False)
    return path
