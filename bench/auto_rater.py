"""Agreement of the automatic rater `auto` with the simulator's physics test.

Runs the demo campaign (protocols/sim_demo.yaml: two scripted picks, 3 and 12 mm aim noise),
the harder one (protocols/sim_hard.yaml: picks that also push, drop, half-lift and half-grasp)
and the near-threshold one (protocols/sim_near.yaml: lifts within a few mm of the success
height, releases within a fraction of a second of the hold time) on the simulated rig, rates
every episode with `auto` (already done by the runner; `judge --judge auto` fills any gap), and
prints the report's `rater_agreement` row for auto vs physics: how often auto abstained
(`unsure`: its error band straddles the test), its agreement and Cohen's kappa on the episodes
it rated, and the confusion table.

    uv run python bench/auto_rater.py [--workers 2] [--rig hardware/sim.yaml] [--keep DIR] [--campaign DIR ...]
    uv run python bench/auto_rater.py --senses --campaign DIR ... [--cache DIR]   # the two senses against the joints alone

`--senses` rates every episode twice, with the joints alone and with both senses (the front
video measured by `vision.lift`: needs the 320x240 cameras of hardware/sim.yaml), and prints per
campaign how often each abstained, how often each was wrong against physics, kappa against physics
on the episodes each rated, and which sense decided (`bench/rater_truth.py`, which also checks the
rules against physics' truth per episode and prints the figures the bands are set from).

(`--rig tests/data/tiny_sim.yaml` runs the same episodes with 64x48 cameras: `auto` reads the
joints only, so its figures are the same, in a fraction of the time.)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = ("sim_demo.yaml", "sim_hard.yaml", "sim_near.yaml")


def orchestrator(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    return done.stdout


def agreement(campaign: Path) -> dict:
    orchestrator("judge", str(campaign), "--judge", "auto")
    report = json.loads(orchestrator("report", str(campaign), "--format", "json", "--judge", "physics"))
    rows = [r for r in report["rater_agreement"] if r["rater"] == "auto" and r["reference"] == "physics"]
    return rows[0]


def senses(campaign: Path, cache: Path | None) -> None:
    """The joints alone against both senses on every episode of `campaign` (`bench/rater_truth.py`)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from rater_truth import episodes, rate_episode, summary

    test, rows = episodes(campaign)
    summary(campaign.name, rows, [rate_episode(row, test, cache / campaign.name if cache else None) for row in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rig", default="hardware/sim.yaml")
    parser.add_argument("--keep", type=Path, help="write the campaigns here (default: a temporary folder)")
    parser.add_argument("--campaign", type=Path, nargs="*", help="rate existing campaigns instead")
    parser.add_argument("--senses", action="store_true", help="the two senses against the joints alone")
    parser.add_argument("--cache", type=Path, help="with --senses: keep each episode's camera track here")
    args = parser.parse_args()
    if args.senses:
        for campaign in args.campaign or []:
            senses(campaign, args.cache)
        return
    with tempfile.TemporaryDirectory() as tmp:
        campaigns = args.campaign or []
        if not campaigns:
            root = args.keep or Path(tmp)
            for name in PROTOCOLS:
                out = root / Path(name).stem
                started = time.perf_counter()
                orchestrator("run", f"protocols/{name}", "--rig", args.rig, "--out", str(out),
                             "--workers", str(args.workers))
                print(f"{name}: ran in {time.perf_counter() - started:.0f} s", flush=True)
                campaigns.append(out)
        for campaign in campaigns:
            row = agreement(campaign)
            t = row["table"]
            lo, hi = (x if x is not None else float("nan") for x in row["kappa_ci95"])
            total = row["items"] + row["unsure"]
            print(f"{campaign.name}: auto abstained on {row['unsure']} of {total} episodes "
                  f"({100 * row['unsure'] / total:.0f}%); right on {100 * row['agreement']:.1f}% of the "
                  f"{row['items']} it rated", flush=True)
            print(f"{campaign.name}: auto vs physics on {row['items']} rated episodes: kappa {row['kappa'] if row['kappa'] is not None else float('nan'):.3f} "
                  f"(95% CI {lo:.2f} to {hi:.2f}); auto success/physics success {t['success_success']}, "
                  f"success/failure {t['success_failure']}, failure/success {t['failure_success']}, "
                  f"failure/failure {t['failure_failure']}")


if __name__ == "__main__":
    main()
