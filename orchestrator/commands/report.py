"""`orchestrator report (CAMPAIGN | --outcomes CSV) [--judge NAME] [--format text|md|json|html] [--out FILE]
[--allow-broken-chain]`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from orchestrator.core.durable import write_atomic
from orchestrator.core.errors import BadInput, RuntimeFailure
from orchestrator.store.sqlite_file import DB_NAME

HELP = "the paired report: McNemar (mid-p primary), Wilson intervals, difference CI, strata, judges, plots"
FORMATS = ("text", "md", "json", "html")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign", nargs="?", help="campaign directory (recordings/<campaign>)")
    parser.add_argument("--outcomes", metavar="CSV",
                        help="report on an outcomes CSV (columns layout,policy,success[,repeat,stratum,judge,failure_mode])")
    parser.add_argument("--judge", metavar="NAME",
                        help="whose labels count: a judge's name, physics, or consensus (default: consensus "
                             "of human judges; physics in simulation when nobody judged)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default text)")
    parser.add_argument("--out", metavar="FILE", help="write the report to FILE (atomically) instead of stdout")
    parser.add_argument("--allow-broken-chain", action="store_true",
                        help="report on a campaign whose evidence chain does not verify (refused by default); "
                             "the report's first line then names the rows that are unverified")


def _write_report(path: Path, text: str) -> None:
    """The report to `path`, atomically and durably (`durable.write_atomic`)."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise BadInput(f"{path}: folder {folder} does not exist")
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise RuntimeFailure(f"{path}: cannot write the report: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    from orchestrator.analysis.outcomes import outcomes_from_store
    from orchestrator.analysis.outcomes_csv import load_outcomes_csv
    from orchestrator.analysis.report import build_report, render

    if bool(args.campaign) == bool(args.outcomes):
        raise BadInput("report: give a CAMPAIGN directory or --outcomes CSV (exactly one)")
    if args.outcomes:
        if args.judge or getattr(args, "allow_broken_chain", False):
            raise BadInput(f"report: {'--judge' if args.judge else '--allow-broken-chain'} applies to a campaign; "
                           "an outcomes CSV holds its labels and no evidence chain")
        data = load_outcomes_csv(args.outcomes)
    else:
        from orchestrator.store.sqlite import CampaignStore

        db = Path(args.campaign) / DB_NAME
        try:
            store = CampaignStore.open_readonly(Path(args.campaign), allow_broken_chain=getattr(args, "allow_broken_chain", False))
            try:
                data = outcomes_from_store(store, args.judge)
            finally:
                store.close()
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            # a damaged store can hand back undecodable text or JSON
            # (sqlite3.DatabaseError itself is turned into one line by the CLI)
            raise BadInput(f"{db}: campaign store is damaged ({type(exc).__name__}: {exc}); check it with: "
                           f"sqlite3 {db} 'PRAGMA integrity_check'") from None
    report = build_report(data)
    emit(render(report, args.format), args.out, "report")
    if args.format in ("text", "md"):
        source = f"--outcomes {args.outcomes}" if args.outcomes else args.campaign
        print(f"the plots (success rates with their intervals, the paired tables, the layouts, success over "
              f"time) are in the HTML report: orchestrator report {source} --format html --out report.html",
              file=sys.stderr)
    return 0


def emit(text: str, out: str | None, what: str) -> None:
    """`text` to `out` (atomically, then `<what> written to <out>` on stderr), else to stdout:
    how `report` and `compare` hand over what they rendered."""
    if out:
        _write_report(Path(out), text)
        print(f"{what} written to {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
