"""`orchestrator compare CAMPAIGN... | SUITE.yaml [--outcomes CSV ...] [--store URL ...] [--judge NAME]
[--format text|md|json|html] [--out FILE] [--reps N] [--seed N] [--alpha A]`: methods across
campaigns, training seeds and tasks (docs/design.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from orchestrator.core.errors import BadInput

HELP = ("methods across campaigns: per seed and task, mean and IQM over tasks, probability of improvement, "
        "the paired test across tasks, checkpoint ladders, a Bradley-Terry leaderboard")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="*", metavar="CAMPAIGN",
                        help="campaign directories, or one suite file (YAML) listing campaigns with their tasks")
    parser.add_argument("--outcomes", metavar="CSV", action="append", default=[],
                        help="an outcomes CSV (task,policy,method,training_seed,layout,success[,repeat,stratum,"
                             "held_out,step]); repeatable")
    parser.add_argument("--store", metavar="URL", action="append", default=[], dest="stores",
                        help="the PostgreSQL store of each CAMPAIGN, in their order (one per campaign; `-` for a "
                             "campaign's own campaign.db)")
    parser.add_argument("--judge", metavar="NAME", help="whose labels count in every campaign (as for report)")
    parser.add_argument("--format", choices=("text", "md", "json", "html"), default="text",
                        help="output format (default text)")
    parser.add_argument("--out", metavar="FILE", help="write to FILE (atomically) instead of stdout")
    parser.add_argument("--reps", type=int, default=50_000, metavar="N",
                        help="stratified bootstrap resamples (default 50000, as rliable)")
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="seed of every bootstrap (default 0)")
    parser.add_argument("--alpha", type=float, default=0.05, metavar="A",
                        help="level of the paired tests and ladders (default 0.05)")


def _sources(args: argparse.Namespace) -> tuple[list, list[Path]]:
    from orchestrator.analysis.compare import CampaignSource, load_suite

    suites = [p for p in args.inputs if Path(p).suffix in (".yaml", ".yml") and not Path(p).is_dir()]
    csvs = [Path(p) for p in args.outcomes]
    if suites:
        if len(args.inputs) > 1:
            raise BadInput("compare: give one suite file, or campaign directories, not both")
        if args.stores:
            raise BadInput("compare: a suite file names each campaign's store itself (`store:`); drop --store")
        sources, more = load_suite(Path(suites[0]))
        return [s if s.judge or not args.judge else CampaignSource(s.path, s.task, s.store, args.judge)
                for s in sources], more + csvs
    if args.stores and len(args.stores) != len(args.inputs):
        raise BadInput(f"compare: {len(args.stores)} --store for {len(args.inputs)} campaigns: give one per "
                       "campaign, in the same order")
    stores = [None if url == "-" else url for url in args.stores] or [None] * len(args.inputs)
    return [CampaignSource(Path(p), store=url, judge=args.judge) for p, url in zip(args.inputs, stores, strict=True)], csvs


def run(args: argparse.Namespace) -> int:
    from orchestrator.analysis.compare import build_comparison, read_inputs, render
    from orchestrator.commands.report import emit

    if args.reps < 100:
        raise BadInput(f"compare: --reps {args.reps}: at least 100 bootstrap resamples")
    if not 0 < args.alpha < 1:
        raise BadInput(f"compare: --alpha {args.alpha}: must be between 0 and 1")
    sources, csvs = _sources(args)
    comparison = build_comparison(read_inputs(sources, csvs), reps=args.reps, seed=args.seed, alpha=args.alpha)
    emit(render(comparison, args.format), args.out, "comparison")
    return 0
