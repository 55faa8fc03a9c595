"""Exceptions that the CLI turns into one-line messages and exit codes.

Exit codes (docs/design.md section 4): 0 done, 1 runtime failure, 2 bad input, 130 interrupted.
"""

from __future__ import annotations


class OrchestratorError(Exception):
    """A failure the user can act on; the CLI prints `str(self)` and exits with `exit_code`."""

    exit_code = 1


class BadInput(OrchestratorError):
    """Bad input: usage, validation, a refused request. Exit 2.

    `problems` holds one line per problem (`path:line:col: message` where a location is known).
    """

    exit_code = 2

    def __init__(self, problems: str | list[str]):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class RuntimeFailure(OrchestratorError):
    """A fault at run time (device, disk, policy). Exit 1; the campaign stays resumable."""

    exit_code = 1


class Interrupted(OrchestratorError):
    """The user stopped the run (Ctrl-C / SIGTERM) after the arm was made safe. Exit 130."""

    exit_code = 130
