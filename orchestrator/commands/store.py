"""`orchestrator store migrate CAMPAIGN URL` and `orchestrator store add-judge URL NAME`.

`migrate` moves a campaign from its SQLite file to an empty PostgreSQL database and checks
the copy (row counts and SHA-256 per table); the directory keeps the videos and becomes the
`--out` of later `--store URL` commands. `add-judge` (run as the database's owner) creates a
login role that can read only the blinded view and write only its own labels
(orchestrator/store/postgres_roles.py).
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
    operator = sub.add_parser("add-operator", help="create an operator's role: runs stations; with "
                                                   "judging.hide_labels_from_operator sees no human label "
                                                   "before judging is complete")
    operator.add_argument("url", help="postgresql://OWNER@HOST/DATABASE of the campaign")
    operator.add_argument("name", help="the operator's role name")
    operator.add_argument("--password", default=None, help="the role's password (default: none)")
    init = sub.add_parser("init", help="create the campaign on the server as its owner (before adding "
                                       "operators and judges)")
    init.add_argument("url", help="postgresql://OWNER@HOST/DATABASE (an empty database)")
    init.add_argument("protocol", help="protocol YAML file")
    init.add_argument("--rig", required=True, help="a rig profile of the campaign (simulated or real)")
    init.add_argument("--out", required=True, type=Path, help="the shared videos directory")


def run(args: argparse.Namespace) -> int:
    from orchestrator.store.postgres import redact, using_server

    with using_server(args.url):  # checks it is a PostgreSQL URL
        pass
    if args.store_verb == "migrate":
        from orchestrator.store.postgres_copy import migrate_to_server

        summary = migrate_to_server(args.campaign, args.url)
        counts = ", ".join(f"{n} {t}" for t, n in summary.counts.items() if t not in ("meta", "campaign"))
        print(f"migrated {args.campaign} to {redact(args.url)}: {counts}; row counts and SHA-256 of "
              f"every table match")
        print(f"next: orchestrator run PROTOCOL --rig RIG --store URL --out {args.campaign}   |   "
              f"orchestrator report {args.campaign} --store URL")
        return 0
    if args.store_verb == "init":
        from orchestrator.run.campaign import open_campaign

        opened = open_campaign(args.protocol, args.rig, args.out, store_url=args.url)
        state = "exists already" if opened.resumed else "created"
        total = len(opened.store.trials())
        opened.store.close()
        print(f"campaign {state} on {redact(args.url)}: {total} trials scheduled, videos under {args.out}")
        return 0
    if args.store_verb == "add-operator":
        from orchestrator.store.postgres_roles import add_operator

        add_operator(args.url, args.name, args.password)
        print(f"operator role {args.name!r} created: run a station with "
              f"`orchestrator run PROTOCOL --rig RIG --store postgresql://{args.name}@HOST/DATABASE "
              f"--out VIDEOS_DIR --station ARM`")
        return 0
    from orchestrator.store.postgres_roles import add_judge

    add_judge(args.url, args.name, args.password)
    print(f"judge role {args.name!r} created: it reads only the blinded view and writes only its own "
          f"labels; judge with `orchestrator judge VIDEOS_DIR --judge {args.name} "
          f"--store postgresql://{args.name}@HOST/DATABASE`")
    return 0
