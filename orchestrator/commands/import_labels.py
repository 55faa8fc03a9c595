"""`orchestrator import-labels CAMPAIGN DIR`: merge a judge bundle's labels into the campaign.

Refuses (exit 2, nothing written) a bundle of another campaign or labels for episodes that
are not in the campaign; labels already imported (same judge and episode) are skipped and
counted.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "merge the labels of a judge bundle back into its campaign"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign", metavar="CAMPAIGN", help="campaign directory")
    parser.add_argument("bundle", metavar="DIR", help="judge bundle folder with labels/")


def run(args: argparse.Namespace) -> int:
    from orchestrator.judging.bundle import import_labels

    summary = import_labels(Path(args.campaign), Path(args.bundle))
    parts = [f"imported {summary.imported} labels from bundle {summary.bundle_id}"
             f" (judges: {', '.join(summary.judges) or 'none'})"]
    if summary.duplicates:
        parts.append(f"skipped {summary.duplicates} already imported")
    if summary.conflicts:
        parts.append(f"skipped {summary.conflicts} where the judge already labelled the episode "
                     "in the campaign")
    if summary.invalid_starts:
        parts.append(f"sent {summary.invalid_starts} trials back for a re-run (invalid start; "
                     "`orchestrator run` re-runs them)")
    print("; ".join(parts))
    return 0
