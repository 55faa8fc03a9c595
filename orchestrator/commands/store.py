"""`orchestrator store migrate CAMPAIGN URL` and `orchestrator store add-judge URL NAME`.

`migrate` moves a campaign from its SQLite file to an empty PostgreSQL database and checks
the copy (row counts and SHA-256 per table); the directory keeps the videos and becomes the
`--out` of later `--store URL` commands. `add-judge` (run as the database's owner) creates a
login role that can read only the blinded view and write only its own labels
(orchestrator/pgroles.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "the shared PostgreSQL store: migrate a campaign to it, add judge roles"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="store_verb", required=True, metavar="ACTION",
                                parser_class=type(parser))
    migrate = sub.add_parser("migrate", help="copy a SQLite campaign into an empty PostgreSQL database")
    migrate.add_argument("campaign", type=Path, help="campaign directory (with campaign.db)")
    migrate.add_argument("url", help="postgresql://USER@HOST/DATABASE (an empty database)")
    judge = sub.add_parser("add-judge", help="create a judge's role: blinded view and own labels only")
    judge.add_argument("url", help="postgresql://OWNER@HOST/DATABASE of the campaign")
    judge.add_argument("name", help="the judge's name (also the role's name)")
    judge.add_argument("--password", default=None,
                       help="the role's password (default: none; local trust or peer authentication)")


def run(args: argparse.Namespace) -> int:
    from ..pgstore import redact, using_server

    with using_server(args.url):  # checks it is a PostgreSQL URL
        pass
    if args.store_verb == "migrate":
        from ..pgmigrate import migrate_to_server

        summary = migrate_to_server(args.campaign, args.url)
        counts = ", ".join(f"{n} {t}" for t, n in summary.counts.items() if t not in ("meta", "campaign"))
        print(f"migrated {args.campaign} to {redact(args.url)}: {counts}; row counts and SHA-256 of "
              f"every table match")
        print(f"next: orchestrator run PROTOCOL --rig RIG --store URL --out {args.campaign}   |   "
              f"orchestrator report {args.campaign} --store URL")
        return 0
    from ..pgroles import add_judge

    add_judge(args.url, args.name, args.password)
    print(f"judge role {args.name!r} created: it reads only the blinded view and writes only its own "
          f"labels; judge with `orchestrator judge VIDEOS_DIR --judge {args.name} "
          f"--store postgresql://{args.name}@HOST/DATABASE`")
    return 0
