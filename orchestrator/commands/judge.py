"""`orchestrator judge` (not implemented yet)."""

from __future__ import annotations

import argparse

from ..errors import RuntimeFailure

HELP = "judge (not implemented yet)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rest", nargs="*")


def run(args: argparse.Namespace) -> int:
    raise RuntimeFailure("`judge` is not implemented yet")
