"""Coverage of the corrected intervals (`stats.ppi`: the rater's labels on every episode corrected
by a random human audit, the mark as the unit) and the type-I error of the verdict they decide,
by seeded simulation through the report's own path (`report.corrected`, the disagreement bound
and its fallback to people's labels included; tests/support/ppi_sim.py: per-mark difficulty shared by repeats and both
policies, a rater whose errors and abstentions fall on near-threshold episodes, an audit of
exactly round(fraction N) trials). Per scenario, marks and audit fraction: the coverage of each
rate's and the difference's 95 % interval, the share of campaigns the test calls "better"
(under the null: the type-I error), the positive control (the rater's own labels, uncorrected,
with the clustered Wilson interval), the share of campaigns that fell back to people's labels
only, people's labels per episode; then the lowest coverage and the
largest type-I error over the grid, with their standard errors.

    uv run python bench/ppi_coverage.py [--runs 1000]
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.ppi_sim import Scenario, coverage  # noqa: E402

# name -> scenario (marks and audit are set by the grid); 3 repeats, mark difficulty sd 1 (logit)
SCENARIOS: dict[str, Scenario] = {
    "null, good rater": Scenario(logit_a=0.5, logit_b=0.5),
    "null, biased rater": Scenario(logit_a=0.5, logit_b=0.5, rater_bias=1.0),
    "null, high rates, noisy rater": Scenario(logit_a=2.5, logit_b=2.5, rater_noise=1.0),
    "dominant A, good rater": Scenario(logit_a=2.0, logit_b=0.0),
    "dominant A, biased noisy rater": Scenario(logit_a=2.0, logit_b=0.0, rater_bias=0.7, rater_noise=0.8),
    "A near 1, rater abstains often": Scenario(logit_a=3.5, logit_b=1.5, band=1.0),
}


def grid(runs: int, marks: tuple[int, ...] = (20, 40, 60), audits: tuple[float, ...] = (0.1, 0.2, 0.3)) -> list[dict]:
    rows = []
    for i, (name, sc) in enumerate(SCENARIOS.items()):
        for k in marks:
            for a in audits:
                out = coverage(replace(sc, marks=k, audit=a), runs, seed=1000 * i + 10 * k + int(100 * a))
                rows.append({"scenario": name, "marks": k, "audit": a, "null": sc.logit_a == sc.logit_b, **out})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    rows = grid(args.runs)
    print(f"{'scenario':32} marks audit  rate A  rate B  diff  better  uncorr A  fallback  human/ep")
    for r in rows:
        print(f"{r['scenario']:32} {r['marks']:5d} {r['audit']:5.1f}  {r['rate_a']:.3f}   {r['rate_b']:.3f}  "
              f"{r['difference']:.3f}  {r['reject']:.3f}   {r['uncorrected_a']:.3f}    {r['fallback']:.3f}     "
              f"{r['human_per_episode']:.2f}")
    low = min((r[key], key, r) for r in rows for key in ("rate_a", "rate_b", "difference"))
    se = math.sqrt(low[0] * (1 - low[0]) / args.runs)
    print(f"lowest coverage {low[0]:.3f} (SE {se:.3f}): {low[1]} at {low[2]['scenario']}, {low[2]['marks']} marks, "
          f"audit {low[2]['audit']}")
    nulls = [r for r in rows if r["null"]]
    worst = max(nulls, key=lambda r: r["reject"])
    p = worst["reject"]
    print(f"largest type-I error {p:.3f} (SE {math.sqrt(p * (1 - p) / args.runs):.3f}) at {worst['scenario']}, "
          f"{worst['marks']} marks, audit {worst['audit']}")


if __name__ == "__main__":
    main()
