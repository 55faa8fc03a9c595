"""Coverage of the corrected intervals (`stats.ppi`: the rater's labels on every episode corrected
by a random human audit, the mark as the unit) and the type-I error of the verdict they decide,
by seeded simulation through the report's own path (`report.corrected`, the disagreement bound
and its fallback to people's labels included; tests/support/ppi_sim.py: per-mark difficulty shared by repeats and both
policies, a rater whose errors and abstentions fall on near-threshold episodes, an audit of
exactly round(fraction N) trials). Per scenario, marks and audit fraction: the coverage of each
rate's and the difference's 95 % interval, the share of campaigns the test calls "better"
(under the null: the type-I error) and any pair of equal rates "better" (the family-wise
error with 3 policies, Holm over the pairs), the positive control (the rater's own labels, uncorrected,
with the clustered Wilson interval), the share of campaigns that fell back to people's labels
only, people's labels per episode, A's mean interval width; then per audit fraction the lowest
coverage, and the largest type-I error over the grid, with their standard errors, and the
bench's runtime. Scenarios include 3 policies and unfinished campaigns (trials not run,
episodes still waiting for people).

    uv run python bench/ppi_coverage.py [--runs 1000] [--only NAME]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
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
    # 3 policies: Holm over the 3 pairs, the family-wise error over the pairs of equal rates
    "3 policies null, biased rater": Scenario(logit_a=0.5, logit_b=0.5, extra=(0.5,), rater_bias=1.0),
    "3 policies, A dominant, B = C": Scenario(logit_a=2.0, logit_b=0.0, extra=(0.0,)),
    # unfinished: 10 % of trials not run (incomplete marks), 30 % of the episodes to label waiting
    "unfinished null, biased rater": Scenario(logit_a=0.5, logit_b=0.5, rater_bias=1.0, missing=0.1, waiting=0.3),
    "unfinished, dominant A": Scenario(logit_a=2.0, logit_b=0.0, missing=0.1, waiting=0.3),
}


def grid(runs: int, marks: tuple[int, ...] = (20, 40, 60), audits: tuple[float, ...] = (0.1, 0.2, 0.3),
         only: str = "") -> list[dict]:
    rows = []
    for i, (name, sc) in enumerate(SCENARIOS.items()):
        if not name.startswith(only):
            continue
        for k in marks:
            for a in audits:
                out = coverage(replace(sc, marks=k, audit=a), runs, seed=1000 * i + 10 * k + int(100 * a))
                rows.append({"scenario": name, "marks": k, "audit": a, "null": sc.logit_a == sc.logit_b,
                             "policies": len(sc.logits), **out})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--only", default="", help="only the scenarios whose name starts with this")
    args = parser.parse_args()
    started = time.monotonic()
    rows = grid(args.runs, only=args.only)
    print(f"{'scenario':32} marks audit  rate A  rate B  rates  diff  diffs  better  false+  uncorr A  fallback  "
          "human/ep  width A")
    for r in rows:
        print(f"{r['scenario']:32} {r['marks']:5d} {r['audit']:5.1f}  {r['rate_a']:.3f}   {r['rate_b']:.3f}  "
              f"{r['rate_min']:.3f}  {r['difference']:.3f} {r['differences_min']:.3f}  {r['reject']:.3f}   "
              f"{r['false_better']:.3f}   {r['uncorrected_a']:.3f}    {r['fallback']:.3f}     "
              f"{r['human_per_episode']:.2f}      {r['width_a']:.3f}")
    for audit in sorted({r["audit"] for r in rows}):
        here = [r for r in rows if r["audit"] == audit]
        low = min(((r[key], key, r) for r in here for key in ("rate_min", "differences_min")), key=lambda x: x[0])
        se = math.sqrt(low[0] * (1 - low[0]) / args.runs)
        print(f"audit {audit}: lowest coverage {low[0]:.3f} (SE {se:.3f}): {low[1]} at {low[2]['scenario']}, "
              f"{low[2]['marks']} marks; lowest rate coverage {min(r['rate_min'] for r in here):.3f}")
    nulls = [r for r in rows if r["null"] or r["policies"] > 2]
    if nulls:
        worst = max(nulls, key=lambda r: r["false_better"])
        p = worst["false_better"]
        print(f"largest type-I (family-wise) error {p:.3f} (SE {math.sqrt(p * (1 - p) / args.runs):.3f}) at "
              f"{worst['scenario']}, {worst['marks']} marks, audit {worst['audit']}")
    print(f"{len(rows)} points x {args.runs} campaigns in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
