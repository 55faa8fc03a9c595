"""Shared, generic test helpers: repository paths, running the CLI in-process, and a
self-contained copy of the shipped simulated protocol in a temporary folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SIM_PROTOCOL = REPO / "protocols" / "sim_demo.yaml"
GRID20 = REPO / "layouts" / "grid20.yaml"

LOCATED = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<message>\S.*)$")
"""One problem line: `path:line:col: message`."""


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


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


def run_module(*argv: str | os.PathLike, cwd: Path | None = None, env: dict | None = None,
               timeout: float = 120) -> CliResult:
    """`python -m orchestrator ARGV` in a fresh interpreter (the test venv's python)."""
    proc = subprocess.run([sys.executable, "-m", "orchestrator", *map(str, argv)], cwd=cwd or REPO,
                          env=env, capture_output=True, text=True, timeout=timeout)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def sim_protocol_text(layout: str = "layout.yaml") -> str:
    """The shipped sim_demo.yaml with its layout path pointing at `layout`."""
    text = SIM_PROTOCOL.read_text()
    assert "../layouts/grid20.yaml" in text
    return text.replace("../layouts/grid20.yaml", layout)


@pytest.fixture
def protocol_dir(tmp_path) -> Path:
    """A folder with `protocol.yaml` (the sim demo) and its `layout.yaml` (grid20)."""
    (tmp_path / "protocol.yaml").write_text(sim_protocol_text())
    (tmp_path / "layout.yaml").write_text(GRID20.read_text())
    return tmp_path


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """1-based line number of the `nth` line of `text` containing `needle`."""
    hits = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    assert len(hits) >= nth, f"{needle!r} not in text"
    return hits[nth - 1]
