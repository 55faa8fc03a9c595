"""The pre-registered e-value stopping rule, simulated at scale (the tests run small versions).

Campaigns are run the way the runner runs them (tests/support/evalue_sim.py: the real schedule,
`stopping_decision` before every unit, the report built from the same outcomes), with and
without repeats, under the null and under a difference. Printed, with standard errors: how
often the rule rejected (the null rate must stay <= alpha), how often it stopped early, the
mean layouts run, whether any verdict contradicted the recorded stop, and whether the interval
shown after an early stop ever failed to exclude 50 %.

    uv run python bench/evalue_rule.py [--campaigns 600]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from orchestrator.analysis.report import build_report  # noqa: E402
from support.evalue_sim import run_campaign  # noqa: E402

SCENARIOS = (
    ("null, 1 repeat", {"A": 0.6, "B": 0.6}, 40, 1, 36, 0.0),
    ("0.8 vs 0.45, 1 repeat", {"A": 0.8, "B": 0.45}, 40, 1, 36, 0.0),
    ("null, 3 repeats", {"A": 0.6, "B": 0.6}, 16, 3, 45, 1.0),
    ("0.9 vs 0.3, 3 repeats", {"A": 0.9, "B": 0.3}, 16, 3, 45, 1.0),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=600)
    args = parser.parse_args()
    n = args.campaigns
    for name, rates, marks, repeats, max_layouts, spread in SCENARIOS:
        rejected = early = contradictions = bad_interval = layouts = 0
        for seed in range(n):
            c = run_campaign(rates, marks, repeats, max_layouts, seed, spread)
            comp = build_report(c.data).comparisons[0]
            stopped = c.stop_reason.startswith("stopped early by the pre-registered e-value rule")
            rejected += stopped
            early += stopped and c.layouts_run < max_layouts
            contradictions += comp.significant != stopped
            bad_interval += stopped and comp.share is not None and comp.share.lo <= 0.5 <= comp.share.hi
            layouts += c.layouts_run
        rate = rejected / n
        se = math.sqrt(rate * (1 - rate) / n)
        print(f"{name}: rejected {rate:.3f} (SE {se:.3f}), stopped early {early}, mean layouts "
              f"{layouts / n:.1f} of {max_layouts}; verdicts contradicting the stop: {contradictions}; "
              f"early-stop intervals reaching 50%: {bad_interval}", flush=True)


if __name__ == "__main__":
    main()
