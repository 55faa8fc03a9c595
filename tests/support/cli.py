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
               timeout: float = 120, prefix: tuple[str, ...] = ()) -> CliResult:
    """`python -m orchestrator ARGV` in a fresh interpreter (the test venv's python), started
    through `prefix` (e.g. `unprivileged()`) when given."""
    proc = subprocess.run([*prefix, sys.executable, "-m", "orchestrator", *map(str, argv)], cwd=cwd or REPO,
                          env=env, capture_output=True, text=True, timeout=timeout)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def run_main(capsys, *argv: str | os.PathLike) -> CliResult:
    """`orchestrator ARGV` in this process (`orchestrator.cli.main`, its output taken with pytest's
    `capsys`): the same exit code and lines as `run_module`, without a fresh interpreter's imports.
    For the cases beside one that `run_module` runs fresh."""
    from orchestrator.cli import main

    capsys.readouterr()
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


def unprivileged() -> tuple[str, ...]:
    """A command prefix that runs a program without root's power to write anywhere: nothing for
    a normal user; for root, a user namespace in which root is mapped to uid 1000 with no
    capabilities (the files root owns are the process's own, so it still reads them, but a
    read-only folder refuses its writes as it would refuse any user's)."""
    if os.geteuid() != 0:
        return ()
    from support.requires import require_program

    unshare = require_program("unshare", "install util-linux (apt-get install util-linux)")
    return (unshare, "--user", "--map-user=1000", "--map-group=1000")
