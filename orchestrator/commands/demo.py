"""`orchestrator demo`: the simulated A/B campaign end to end, then its report: the text on the
terminal, and the HTML report with its plots written beside the campaign (`html_report_path`),
whose path is the last line printed."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from orchestrator.commands import report as report_command
from orchestrator.commands.run import default_workers
from orchestrator.core.errors import RuntimeFailure

HELP = "run the simulated A/B campaign (protocols/sim_demo.yaml on hardware/sim.yaml), then report"

PACKAGE = Path(__file__).resolve().parents[1]


DEMO_PROTOCOLS = {"operator": "sim_demo.yaml", "auto": "sim_demo_reset.yaml"}   # by `--reset`


def demo_files(reset: str = "operator") -> tuple[Path, Path]:
    """(protocol, rig) of the demo: the package data of an installed wheel (`orchestrator/demo_data/`,
    see pyproject.toml), else the source tree's `protocols/` and `hardware/`. `reset: auto`: the
    demo whose arm puts every cube on its next mark itself (start check and autonomous reset)."""
    for root in (PACKAGE / "demo_data", PACKAGE.parent):
        protocol, rig = root / "protocols" / DEMO_PROTOCOLS[reset], root / "hardware" / "sim.yaml"
        if protocol.is_file() and rig.is_file():
            return protocol, rig
    raise RuntimeFailure(f"the demo protocol is not installed with this package (looked in {PACKAGE / 'demo_data'} "
                         f"and {PACKAGE.parent}); reinstall so101-ab-orchestrator")


def html_report_path(campaign: Path) -> Path:
    """Where the demo writes its HTML report: beside the campaign folder, `<campaign>-report.html`
    (not inside it: a judge may be handed the folder)."""
    return campaign.with_name(f"{campaign.name}-report.html")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=None,
                        help="campaign directory (default recordings/demo-<time>)")
    parser.add_argument("--workers", type=int, default=None, help="parallel episodes (default: cores)")
    parser.add_argument("--reset", choices=tuple(DEMO_PROTOCOLS), default="operator",
                        help="auto: the arm puts every cube on its next mark itself, checked by the camera "
                             "(protocols/sim_demo_reset.yaml; one episode at a time)")
    parser.add_argument("--protocol", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rig", type=Path, default=None, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from orchestrator.commands.referees import campaign_referees
    from orchestrator.run.campaign import open_campaign
    from orchestrator.run.sequential import run_campaign

    protocol, rig = demo_files(args.reset)
    out = args.out or Path("recordings") / f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    opened = open_campaign(args.protocol or protocol, args.rig or rig, out)
    started = time.monotonic()
    try:
        print(f"simulated campaign in {out}: {len(opened.store.trials())} trials "
              f"({len(opened.protocol.layout.marks)} marks x {len(opened.protocol.protocol.policies)} policies)")
        summary = run_campaign(opened, workers=args.workers or default_workers(), referees=campaign_referees())
    finally:
        opened.store.close()
    wall = time.monotonic() - started
    episode_s = summary.done_now * opened.protocol.protocol.episode.duration_s
    print(f"ran {summary.done_now} episodes ({episode_s:.0f} s of robot time) in {wall:.0f} s: "
          f"{episode_s / wall if wall else 0:.1f}x real time")
    print()
    code = report_command.run(argparse.Namespace(campaign=str(out), outcomes=None, judge=None, format="text",
                                                 out=None))   # the physics outcomes (nobody has judged yet)
    html = html_report_path(out)
    report_command.run(argparse.Namespace(campaign=str(out), outcomes=None, judge=None, format="html",
                                          out=str(html)))
    print("Next:")
    print(f"  judge blind:  uv run orchestrator judge {out} --judge YOUR_NAME")
    print(f"  report:       uv run orchestrator report {out} [--format md|json|html --out FILE]")
    print(f"  export:       uv run --extra lerobot orchestrator export {out} --repo-id USER/sim-demo")
    print()
    print(f"The report with its plots (open it in a browser): {html.resolve()}")
    return code
