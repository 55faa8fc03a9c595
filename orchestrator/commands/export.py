"""`orchestrator export CAMPAIGN --repo-id USER/NAME [--root DIR] [--push] [--private] [--judge ...]`.

Writes the campaign as a LeRobotDataset (v3) with its evaluation (labels, report, protocol,
dataset card), optionally pushes it to the Hugging Face Hub. See `orchestrator/export/`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from orchestrator.core.errors import BadInput
from orchestrator.core.exit_freeze import freeze_at_exit

HELP = "export the episodes, labels and results as a LeRobotDataset (v3); --push to the Hub"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign", type=Path, help="campaign directory (recordings/<campaign>)")
    parser.add_argument("--repo-id", required=True, metavar="USER/NAME",
                        help="Hugging Face dataset repo id (also names the local dataset)")
    parser.add_argument("--root", type=Path, default=None, metavar="DIR",
                        help="local dataset directory (default $HF_LEROBOT_HOME/USER/NAME); an earlier "
                             "export there is replaced atomically")
    parser.add_argument("--push", action="store_true",
                        help="upload with LeRobot's push_to_hub (token: `hf auth login` or HF_TOKEN)")
    parser.add_argument("--private", action="store_true", help="with --push: create a private repo")
    parser.add_argument("--judge", metavar="NAME|physics|consensus", default=None,
                        help="whose labels fill ab.success (default: consensus of human judges; physics "
                             "in simulation when nobody judged)")
    parser.add_argument("--include-aborted", action="store_true",
                        help="list aborted attempts in meta/ab_trials.parquet (their recordings were "
                             "deleted when they aborted)")
    parser.add_argument("--fps", choices=("recorded", "control"), default="recorded",
                        help="dataset frame rate: the cameras' recorded rate when they share one that divides "
                             "the control rate (default; one row per recorded frame), or every control step")
    parser.add_argument("--force", action="store_true",
                        help="export although episodes lack a definite label or the campaign is incomplete")


def run(args: argparse.Namespace) -> int:
    from orchestrator.core.progress import say_flushed
    from orchestrator.export import check_repo_id, export_campaign

    # At the process's exit, Python's last garbage collections walk every object LeRobot, torch,
    # datasets and pandas made at import: 1.3 s of CPU after the export is done (of a 4 s
    # import); frozen, 0.25 s (docs/benchmarks.md, Export).
    freeze_at_exit()
    check_repo_id(args.repo_id)
    if args.private and not args.push:
        raise BadInput("--private applies to --push only")
    result = export_campaign(args.campaign, repo_id=args.repo_id, root=args.root, judge=args.judge,
                             include_aborted=args.include_aborted, force=args.force, push=args.push,
                             private=args.private, fps=args.fps, say=say_flushed)
    if result.written:
        print(f"exported {result.episodes} episodes ({result.frames} frames, cameras "
              f"{', '.join(result.cameras)}) to {result.root} in {result.seconds:.1f} s")
    if result.pushed_to:
        print(f"pushed to {result.pushed_to}")
    print(f"load it: LeRobotDataset({args.repo_id!r}, root={str(result.root)!r})")
    return 0
