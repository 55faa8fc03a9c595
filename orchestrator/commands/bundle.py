"""`orchestrator bundle CAMPAIGN --out DIR`: a blinded judging folder for remote judges.

The folder holds the videos under opaque episode ids, a manifest (success test, failure
modes, marks, durations) and no key; it is checked for policy names and paths and appears
only when complete. Judge it with `orchestrator judge DIR --judge NAME`, merge the labels
back with `orchestrator import-labels CAMPAIGN DIR`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "write a blinded judging bundle for remote judges (no key inside)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign", metavar="CAMPAIGN", help="campaign directory")
    parser.add_argument("--out", required=True, metavar="DIR", help="new folder for the bundle")


def run(args: argparse.Namespace) -> int:
    from orchestrator.judging.bundle import write_bundle

    summary = write_bundle(Path(args.campaign), Path(args.out))
    print(f"{summary.path}: judge bundle {summary.bundle_id}: {summary.episodes} episode{'s' if summary.episodes != 1 else ''}, "
          f"{summary.files} videos, {summary.bytes / 1e6:.1f} MB; judge with "
          f"`orchestrator judge {summary.path} --judge NAME`")
    return 0
