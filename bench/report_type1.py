"""How often one campaign's report says "better" when the policies are equal, and how often the
interval its verdict quotes covers the truth, by seeded simulation of campaigns that can fail
(tests/support/campaign_sim.py: repeats, per-mark effects, unsure labels, a never-measured
third policy, a dominant third policy, the e-value rule).

For each scenario, A and B are equal on average over marks (the truth: difference 0; under the
e-value rule, A's share of the discordant units 1/2). Printed: the share of campaigns whose
report says "A better than B" or "B better than A" (type-I error) with its standard error and
the one-sided 95 % Clopper-Pearson upper bound, and the share whose verdict interval covers the
truth (the clustered Newcombe interval, or the rule's confidence sequence).

    uv run python bench/report_type1.py [--campaigns 1000] [--scenario NAME]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from scipy import stats as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from orchestrator.analysis.report import build_report  # noqa: E402
from support.campaign_sim import Scenario, run  # noqa: E402

EQUAL = {"A": 0.6, "B": 0.6}
SCENARIOS: dict[str, Scenario] = {
    "one repeat": Scenario(EQUAL, marks=40, repeats=1, spread=1.0),
    "repeats, per-mark effects": Scenario(EQUAL, marks=20, repeats=3, spread=1.0, mark_effect=1.0),
    "5 repeats, per-mark effects": Scenario(EQUAL, marks=20, repeats=5, spread=1.0, mark_effect=1.0),
    "repeats, unsure labels": Scenario(EQUAL, marks=20, repeats=3, spread=1.0, mark_effect=1.0, unsure=0.1),
    "missing third policy": Scenario({**EQUAL, "C": 0.6}, marks=20, repeats=3, spread=1.0, mark_effect=1.0,
                                     missing=("C",)),
    "dominant third policy": Scenario({**EQUAL, "C": 0.98}, marks=20, repeats=3, spread=1.0, mark_effect=1.0),
    "e-value rule, repeats, unsure, missing C": Scenario({**EQUAL, "C": 0.6}, marks=20, repeats=3, spread=1.0,
                                                         mark_effect=1.0, unsure=0.1, missing=("C",),
                                                         evalue=True, max_layouts=60),
    "e-value rule, one repeat": Scenario(EQUAL, marks=60, repeats=1, spread=1.0, evalue=True, max_layouts=60),
}


def measure(scenario: Scenario, campaigns: int, seed0: int = 0) -> dict[str, float]:
    """Type-I error of "better" for A vs B and coverage of the verdict's interval."""
    better = covered = 0
    for i in range(campaigns):
        r = build_report(run(scenario, seed0 + i))
        c = next(c for c in r.comparisons if (c.a, c.b) == ("A", "B"))
        better += c.significant
        if c.share is not None:
            covered += c.share.lo <= 0.5 <= c.share.hi
        else:
            covered += c.difference.lo <= 0 <= c.difference.hi
    rate = better / campaigns
    upper = float(st.beta.ppf(0.95, better + 1, campaigns - better)) if better < campaigns else 1.0
    return {"type1": rate, "se": math.sqrt(rate * (1 - rate) / campaigns), "upper95": upper,
            "coverage": covered / campaigns}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=1000)
    parser.add_argument("--scenario", choices=tuple(SCENARIOS), action="append")
    args = parser.parse_args()
    for name in args.scenario or SCENARIOS:
        m = measure(SCENARIOS[name], args.campaigns)
        print(f"{name}: 'better' in {m['type1']:.3f} (SE {m['se']:.3f}, upper 95% {m['upper95']:.3f}) of "
              f"{args.campaigns} campaigns; verdict interval covers the truth in {m['coverage']:.3f}", flush=True)


if __name__ == "__main__":
    main()
