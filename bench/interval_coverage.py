"""Coverage of the report's 95 % intervals by seeded simulation, over grids (the tests run a few
points of each): the per-policy rate with repeats (`stats.clustered_wilson`, beta-binomial marks),
Cohen's kappa of a rater against a reference (`stats.binary_agreement`, split by whether either
rater gave fewer than `stats.agreement.KAPPA_FEW_LABELS` of one label) and the exact Poisson
rate per 100 trials (`stats.poisson_per_100`). Printed: the lowest and the mean coverage over the
grid, the point of the lowest, and every point below 0.93, each with its standard error.

    uv run python bench/interval_coverage.py [--runs 1000] [--section rate|kappa|poisson]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from orchestrator.analysis import stats  # noqa: E402
from orchestrator.analysis.stats.agreement import KAPPA_FEW_LABELS  # noqa: E402
from support.interval_sim import kappa_cells, poisson_coverage, rate_coverage  # noqa: E402


def _summary(name: str, rows: list[tuple[tuple, float, int]]) -> None:
    """rows: (point, coverage, runs)."""
    if not rows:
        print(f"{name}: no tables")
        return
    low = min(rows, key=lambda r: r[1])
    mean = sum(r[1] for r in rows) / len(rows)
    se = math.sqrt(low[1] * (1 - low[1]) / low[2])
    print(f"{name}: {len(rows)} points, lowest {low[1]:.3f} (SE {se:.3f}) at {low[0]}, mean {mean:.3f}")
    for point, cov, runs in rows:
        if cov < 0.93:
            print(f"    below 0.93: {point}: {cov:.3f} (SE {math.sqrt(cov * (1 - cov) / runs):.3f}, {runs} runs)")


def rate(runs: int) -> None:
    rows = []
    for marks in (8, 20, 40):
        for repeats in (2, 3, 5):
            for p in (0.5, 0.8, 0.9, 0.95, 0.98):
                for rho in (0.0, 0.3, 0.6):
                    cov, _ = rate_coverage(marks, repeats, p, rho, runs, seed=marks * 1000 + repeats * 100 + int(p * 50))
                    rows.append(((marks, repeats, p, rho), cov, runs))
    _summary("clustered Wilson (marks, repeats, rate, intra-mark correlation)", rows)


def kappa(runs: int) -> None:
    regimes: dict[str, list[tuple[tuple, float, int]]] = defaultdict(list)
    undefined = 0
    for n in (10, 20, 30, 50, 100, 200):
        for prev in (0.5, 0.7, 0.8, 0.9, 0.95):
            for kap in (0.2, 0.4, 0.66, 0.85, 0.95):
                rng = np.random.default_rng(n * 1000 + int(prev * 100) * 10 + int(kap * 10))
                hits: dict[str, list[int]] = defaultdict(lambda: [0, 0])
                for _ in range(runs):
                    c = rng.multinomial(n, kappa_cells(prev, kap))
                    rater = [True] * int(c[0] + c[1]) + [False] * int(c[2] + c[3])
                    ref = [True] * int(c[0]) + [False] * int(c[1]) + [True] * int(c[2]) + [False] * int(c[3])
                    res = stats.binary_agreement(rater, ref)
                    lo, hi = res["kappa_ci95"]
                    if lo != lo:
                        undefined += 1
                        continue
                    key = "printed with its coverage" if res["kappa_ci_coverage"] is not None else "labelled 95%"
                    hits[key][0] += lo <= kap <= hi
                    hits[key][1] += 1
                for key, (h, t) in hits.items():
                    if t >= runs // 5:
                        regimes[key].append(((n, prev, kap), h / t, t))
    for key, rows in regimes.items():
        _summary(f"kappa, {key} (fewer than {KAPPA_FEW_LABELS} of a label: printed with its coverage) "
                 "(n, prevalence, kappa)", rows)
    print(f"    tables with kappa's interval undefined (both raters constant): {undefined}")


def poisson(runs: int) -> None:
    rows = []
    for trials in (20, 40, 80, 200):
        for per_trial in (0.005, 0.02, 0.05, 0.2, 1.0):
            cov, _ = poisson_coverage(trials, per_trial, runs, seed=trials + int(per_trial * 1000))
            rows.append(((trials, per_trial), cov, runs))
    _summary("exact Poisson per 100 trials (trials, events per trial)", rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--section", choices=("rate", "kappa", "poisson"), action="append")
    args = parser.parse_args()
    for section in args.section or ("rate", "kappa", "poisson"):
        {"rate": rate, "kappa": kappa, "poisson": poisson}[section](args.runs)


if __name__ == "__main__":
    main()
