"""Agreement of the automatic rater `auto` with the simulator's physics test.

Runs the demo campaign (protocols/sim_demo.yaml: two scripted picks, 3 and 12 mm aim noise)
and the harder one (protocols/sim_hard.yaml: picks that also push, drop, half-lift and
half-grasp) on the simulated rig, rates every episode with `auto` (already done by the
runner; `judge --judge auto` fills any gap), and prints the report's `rater_agreement` row
for auto vs physics: the confusion table and Cohen's kappa with its 95% interval.

    uv run python bench/auto_rater.py [--workers 2] [--keep DIR] [--campaign DIR ...]
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
PROTOCOLS = ("sim_demo.yaml", "sim_hard.yaml")


def orchestrator(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    return done.stdout


def agreement(campaign: Path) -> dict:
    orchestrator("judge", str(campaign), "--judge", "auto")
    report = json.loads(orchestrator("report", str(campaign), "--format", "json", "--judge", "physics"))
    rows = [r for r in report["rater_agreement"] if r["rater"] == "auto" and r["reference"] == "physics"]
    return rows[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="write the campaigns here (default: a temporary folder)")
    parser.add_argument("--campaign", type=Path, nargs="*", help="rate existing campaigns instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        campaigns = args.campaign or []
        if not campaigns:
            root = args.keep or Path(tmp)
            for name in PROTOCOLS:
                out = root / Path(name).stem
                started = time.perf_counter()
                orchestrator("run", f"protocols/{name}", "--rig", "hardware/sim.yaml", "--out", str(out),
                             "--workers", str(args.workers))
                print(f"{name}: ran in {time.perf_counter() - started:.0f} s", flush=True)
                campaigns.append(out)
        for campaign in campaigns:
            row = agreement(campaign)
            t = row["table"]
            lo, hi = row["kappa_ci95"]
            print(f"{campaign.name}: auto vs physics on {row['items']} episodes: kappa {row['kappa']:.3f} "
                  f"(95% CI {lo:.2f} to {hi:.2f}); auto success/physics success {t['success_success']}, "
                  f"success/failure {t['success_failure']}, failure/success {t['failure_success']}, "
                  f"failure/failure {t['failure_failure']}")


if __name__ == "__main__":
    main()
