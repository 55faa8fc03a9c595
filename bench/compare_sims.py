"""The simulations behind docs/statistics.md's figures for `orchestrator compare` (not a test;
prints figures): tests/support/compare_sim.py with more runs than the tests use.

Run: uv run python bench/compare_sims.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.compare_sim import bradley_terry_coverage, paired_test, trend_null  # noqa: E402


def show(name: str, rate) -> None:
    print(f"{name}: {rate.value:.4f} (SE {rate.se:.4f}, {rate.runs} runs)")


def main() -> None:
    mid, exact, coverage = paired_test(4000, delta=0.0, seed=1)
    show("paired across tasks, H0, 3 campaigns x 10 marks x 3 seeds: mid-p rejects", mid)
    show("  exact rejects", exact)
    show("  clustered 95% interval covers the difference", coverage)
    mid, exact, coverage = paired_test(2000, delta=0.8, seed=2)
    show("paired across tasks, log-odds +0.8: mid-p rejects (power)", mid)
    show("  clustered 95% interval covers the difference", coverage)
    mid, exact = trend_null(20000, seed=3)
    show("trend test, 3 steps x 40 layout runs, no trend: mid-p rejects", mid)
    show("  exact rejects", exact)
    show("Bradley-Terry 95% basic bootstrap, 6 policies, 3 campaigns x 20 marks: covers", bradley_terry_coverage(500, seed=4))
    show("Bradley-Terry 95% basic bootstrap, 6 policies, 10 campaigns x 20 marks: covers",
         bradley_terry_coverage(200, campaigns=10, seed=5))


if __name__ == "__main__":
    main()
