"""`orchestrator run PROTOCOL --rig RIG [--out DIR]`: run (or resume) a campaign."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

HELP = "run a new campaign, or resume the one in --out (same protocol only)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("protocol", help="protocol YAML file")
    parser.add_argument("--rig", required=True, help="rig profile (hardware/*.yaml)")
    parser.add_argument("--out", type=Path, default=None,
                        help="campaign directory (default recordings/<name>-<time>); "
                             "an existing campaign there is resumed")
    parser.add_argument("--workers", type=int, default=None,
                        help="parallel episodes for a simulated rig (default: one per core)")
    parser.add_argument("--no-console", action="store_true",
                        help="hardware: plain terminal prompts instead of the operator console")
    parser.add_argument("--stop-after", type=int, default=None, help=argparse.SUPPRESS)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def make_operator(args: argparse.Namespace, opened):
    """The operator for this run: nobody in simulation, the console (or prompts) on hardware."""
    if opened.rig.profile.simulated:
        return None
    if args.no_console:
        from ..console.prompt import PromptOperator

        return PromptOperator()
    from ..console import ConsoleOperator

    return ConsoleOperator(opened.protocol)


def run(args: argparse.Namespace) -> int:
    from ..campaign import open_campaign
    from ..runner import run_campaign

    opened = open_campaign(args.protocol, args.rig, args.out)
    try:
        directory = opened.store.directory
        print(f"campaign {directory} ({'resumed' if opened.resumed else 'new'}; "
              f"protocol sha256 {opened.protocol.sha256[:12]})")
        workers = args.workers or (default_workers() if opened.rig.profile.simulated else 1)
        summary = run_campaign(opened, make_operator(args, opened), workers=workers,
                               stop_after=args.stop_after)
    finally:
        opened.store.close()
    state = "complete" if summary.complete else "incomplete (run again to resume)"
    print(f"{summary.done_total}/{summary.total} trials done, {summary.aborted_now} aborted this "
          f"session; campaign {state}")
    if summary.stopped_early:
        print(f"stopped early: {summary.stopped_early}")
    print(f"next: orchestrator judge {directory} --judge YOUR_NAME   |   "
          f"orchestrator report {directory}")
    return 0
