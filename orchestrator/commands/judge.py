"""`orchestrator judge (CAMPAIGN | BUNDLE) --judge NAME [--web]`: blind labelling in the
terminal, or in a browser with `--web` (`judging/web/`: the same source, queue and labels).

Opens the Textual judge app on a campaign directory (labels go to its store) or on a judge
bundle folder written by `orchestrator bundle` (labels go to `labels/NAME.jsonl` in it). The
app only ever sees the blinded view: opaque episode ids in this judge's own order, videos,
marks, the success test and the failure modes. Only the core install is needed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from orchestrator.core.errors import BadInput
from orchestrator.store.sqlite_file import DB_NAME

HELP = "label episodes from video alone, blind (Textual app, or --web in a browser; campaign or judge bundle)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="CAMPAIGN|BUNDLE",
                        help="campaign directory (with campaign.db) or judge bundle folder")
    parser.add_argument("--judge", required=True, metavar="NAME",
                        help="your judge name (letters, digits, _ - .; not physics/consensus/auto); "
                             "`--judge auto` runs the automatic rater on every episode it has not "
                             "rated yet (no terminal needed)")
    parser.add_argument("--contested-first", action="store_true",
                        help="first the episodes where the automatic rater and an earlier judge "
                             "disagree (their labels are never shown); campaigns only")
    parser.add_argument("--renderer", default="auto",
                        choices=("auto", "halfcell", "unicode", "sixel", "tgp"),
                        help="how frames are drawn (auto: Kitty/Sixel if the terminal can, "
                             "else Unicode half-blocks)")
    parser.add_argument("--web", action="store_true",
                        help="judge in a browser instead: serve the blind judge page (full-resolution "
                             "video in true time) and print its URL with a one-session token")
    parser.add_argument("--host", default=None, metavar="ADDRESS",
                        help="with --web: the address to listen on (default 127.0.0.1, this machine "
                             "only; 0.0.0.0 lets a judge on another machine or a tablet connect, "
                             "with the token URL printed as a QR code)")
    parser.add_argument("--port", type=int, default=None, metavar="N",
                        help="with --web: the port (default 8765; 0 picks a free one)")


def open_source(target: Path, judge: str, contested_first: bool = False):
    """The `JudgeSource` for a campaign directory or a bundle folder."""
    from orchestrator.judging.source import JudgeSource, check_judge_name

    problem = check_judge_name(judge)
    if problem:
        raise BadInput(f"--judge: {problem}")
    target = Path(target)
    from orchestrator.store.postgres import server_url

    source: JudgeSource
    if (target / DB_NAME).is_file() or server_url() is not None:
        from orchestrator.judging.blinding import CampaignSource

        source = CampaignSource(target, judge, contested_first=contested_first)
    elif (target / "manifest.json").is_file():
        if contested_first:
            raise BadInput(f"{target}: --contested-first needs the campaign (a bundle holds no "
                           "other labels); judge the campaign or drop the option")
        from orchestrator.judging.bundle import BundleSource

        source = BundleSource(target, judge)
    elif not target.exists():
        raise BadInput(f"{target}: no such campaign directory or judge bundle")
    else:
        raise BadInput(f"{target}: neither a campaign (campaign.db) nor a judge bundle (manifest.json)")
    if not source.episodes():
        source.close()
        raise BadInput(f"{target}: no recorded episodes to judge yet")
    return source


def build_app(args: argparse.Namespace, source=None):
    """The judge app for parsed arguments (tests drive it with `run_test`)."""
    if source is None:
        source = open_source(Path(args.target), args.judge, getattr(args, "contested_first", False))
    from orchestrator.judging.tui.app import JudgeApp

    return JudgeApp(source, renderer=args.renderer)


def run_auto(target: Path) -> int:
    """`--judge auto`: rate every episode the automatic rater has not rated yet."""
    from orchestrator.judging.auto.labels import rate_missing
    from orchestrator.store.sqlite import CampaignStore

    if not (target / DB_NAME).is_file():
        raise BadInput(f"{target}: --judge auto needs a campaign directory (campaign.db): it rates "
                       "the recorded joint trajectories, which bundles do not carry")
    with CampaignStore.open_for_labels(target) as store:
        rated, before = rate_missing(store)
    print(f"judge auto: rated {rated} episodes ({before} were rated already)")
    return 0


def check_judge_role(source, judge: str) -> None:
    """On a PostgreSQL store a served judge connects as the judge's own role (`orchestrator
    store add-judge`): refuse a connection that could read the key (the owner's, an
    operator's) or that is another judge's (the server would refuse each label)."""
    from orchestrator.judging.blinding import CampaignSource

    if not isinstance(source, CampaignSource) or not source.store.on_server:
        return
    role, can_read_key = source.store.server_role()
    if can_read_key:
        raise BadInput(f"--store: role {role!r} can read which policy ran each episode; serve the judge "
                       f"with the judge's own role (orchestrator store add-judge URL {judge}, then "
                       f"--store postgresql://{judge}@HOST/DATABASE)")
    if role != judge:
        raise BadInput(f"--judge {judge}: the store's role is {role!r}; a judge labels as its own role "
                       "(--judge must be the role's name)")


def run_web(args: argparse.Namespace) -> int:
    """`--web`: serve the judge to a browser until Ctrl-C or `q` on the page."""
    host = args.host or "127.0.0.1"
    port = 8765 if args.port is None else args.port
    if not 0 <= port <= 65535:
        raise BadInput(f"--port {port}: a port is 0-65535 (0 picks a free one)")
    source = open_source(Path(args.target), args.judge, args.contested_first)
    from orchestrator.judging.web.serve import serve

    try:
        check_judge_role(source, args.judge)
        try:
            session = serve(source, host, port)
        except OSError as exc:
            raise BadInput(f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc})") from exc
    finally:
        source.close()
    progress = session.progress()
    print(f"judge {args.judge}: {progress['decided']} of {progress['total']} episodes judged"
          + (f", {progress['unsure']} unsure" if progress["unsure"] else "") + "; every label is saved")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.judge == "auto":
        return run_auto(Path(args.target))
    if args.web:
        return run_web(args)
    if args.host is not None or args.port is not None:
        raise BadInput("--host and --port go with --web (judging in a browser)")
    source = open_source(Path(args.target), args.judge, args.contested_first)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        source.close()
        raise BadInput("judge needs an interactive terminal (stdin and stdout must be a TTY)")
    app = build_app(args, source)
    try:
        app.run()
    finally:
        source.close()
    decided = sum(1 for r in app.labels.values() if r.label != "unsure")
    unsure = len(app.labels) - decided
    print(f"judge {args.judge}: {decided} of {len(app.order)} episodes judged"
          + (f", {unsure} unsure" if unsure else "") + "; every label is saved")
    return int(app.return_code or 0)
