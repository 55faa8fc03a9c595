"""`orchestrator report` (not implemented yet)."""

from __future__ import annotations

import argparse

from ..errors import RuntimeFailure

HELP = "report (not implemented yet)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rest", nargs="*")


def run(args: argparse.Namespace) -> int:
    raise RuntimeFailure("`report` is not implemented yet")
