"""Running the CLI: the result of one call, and `python -m orchestrator` in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from support.repo import REPO


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def run_module(*argv: str | os.PathLike, cwd: Path | None = None, env: dict | None = None,
               timeout: float = 120) -> CliResult:
    """`python -m orchestrator ARGV` in a fresh interpreter (the test venv's python)."""
    proc = subprocess.run([sys.executable, "-m", "orchestrator", *map(str, argv)], cwd=cwd or REPO,
                          env=env, capture_output=True, text=True, timeout=timeout)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)
