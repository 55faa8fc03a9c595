"""Shared fixtures: running the CLI in-process, and a self-contained copy of the shipped
simulated protocol in a temporary folder. Plain helpers live in `tests/support/`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.cli import CliResult, run_module  # noqa: F401  (re-exported for older imports)
from support.repo import GRID20, LOCATED, REPO, SIM_PROTOCOL, line_of, sim_protocol_text  # noqa: F401


@pytest.fixture
def cli(capsys):
    """Run `orchestrator.cli.main(argv)` in-process; returns a CliResult (code, out, err)."""
    from orchestrator.cli import main

    def run(*argv: str | os.PathLike) -> CliResult:
        capsys.readouterr()
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse usage errors and --help
            code = exc.code if isinstance(exc.code, int) else 2
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def protocol_dir(tmp_path) -> Path:
    """A folder with `protocol.yaml` (the sim demo) and its `layout.yaml` (grid20)."""
    (tmp_path / "protocol.yaml").write_text(sim_protocol_text())
    (tmp_path / "layout.yaml").write_text(GRID20.read_text())
    return tmp_path
