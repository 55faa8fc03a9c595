"""Seeded simulations of `orchestrator compare`'s tests and intervals (tests/test_compare_sims.py
asserts them; bench/compare_sims.py prints them with more runs for docs/statistics.md).

- the paired test across tasks: campaigns x marks x training seeds, each mark with its own
  difficulty, X and Y drawn independently per pair with rates that differ by `delta` on the
  log-odds scale; its rejection rate (type-I error at delta 0) and the coverage of the
  clustered interval for the difference of rates;
- the exact trend test: a ladder of checkpoints that all have the mark's success rate (no trend);
- the Bradley-Terry interval: policies that succeed independently with rates p_i, whose
  discordant layouts follow the model with theta_i = logit p_i (centred).
All run through the code `compare` uses (`paired.paired_across`, `stats.trend_test`,
`bradley_terry.rate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
from scipy.special import expit, logit

from orchestrator.analysis import stats
from orchestrator.analysis.compare.paired import paired_across
from orchestrator.analysis.compare.trials import Identity, Trial
from orchestrator.analysis.stats import bradley_terry


@dataclass(frozen=True)
class Rate:
    """A proportion from `runs` simulations with its Monte Carlo standard error."""

    value: float
    runs: int

    @property
    def se(self) -> float:
        return float(np.sqrt(max(self.value * (1 - self.value), 1e-12) / self.runs))


def _paired_trials(rng: np.random.Generator, campaigns: int, marks: int, seeds: int, delta: float) -> tuple[list, float]:
    trials = []
    true_diff = []
    for c in range(campaigns):
        base = rng.normal(0.3 * c, 1.2, size=marks)               # the task's and the mark's difficulty
        for m in range(marks):
            px, py = expit(base[m] + delta), expit(base[m])
            true_diff.append(px - py)
            for s in range(seeds):
                for method, p in (("X", px), ("Y", py)):
                    trials.append(Trial(campaign=f"c{c}", task=f"t{c}", policy=f"{method}{s}",
                                        identity=Identity(method, s), layout=f"M{m}", repeat=0,
                                        success=bool(rng.random() < p)))
    return trials, float(np.mean(true_diff))


def paired_test(runs: int, delta: float = 0.0, campaigns: int = 3, marks: int = 10, seeds: int = 3,
                alpha: float = 0.05, seed: int = 0) -> tuple[Rate, Rate, Rate]:
    """(rejections by the mid-p, rejections by the exact p, coverage of the 95% interval)."""
    rng = np.random.default_rng(seed)
    methods = [SimpleNamespace(method="X"), SimpleNamespace(method="Y")]
    mid = exact = covered = 0
    for _ in range(runs):
        trials, true_diff = _paired_trials(rng, campaigns, marks, seeds, delta)
        (result,) = paired_across(trials, methods, alpha)   # type: ignore[arg-type]
        mid += result.mid_p <= alpha
        exact += result.exact_p <= alpha
        covered += result.difference.lo <= true_diff <= result.difference.hi
    return Rate(mid / runs, runs), Rate(exact / runs, runs), Rate(covered / runs, runs)


def trend_null(runs: int, steps: int = 3, marks: int = 20, campaigns: int = 2, alpha: float = 0.05,
               seed: int = 0) -> tuple[Rate, Rate]:
    """(rejections by the mid-p, by the exact p) of the trend test when no step is better."""
    rng = np.random.default_rng(seed)
    mid = exact = 0
    for _ in range(runs):
        p = expit(rng.normal(0.5, 1.5, size=campaigns * marks))
        blocks = [[(k, bool(rng.random() < pm)) for k in range(steps)] for pm in p]
        result = stats.trend_test(blocks)
        mid += result.mid_p <= alpha
        exact += result.exact_p <= alpha
    return Rate(mid / runs, runs), Rate(exact / runs, runs)


def bradley_terry_coverage(runs: int, reps: int = 300, rates: tuple[float, ...] = (0.85, 0.75, 0.65, 0.5, 0.4, 0.3),
                           marks: int = 20, campaigns: int = 3, seed: int = 0) -> Rate:
    """Coverage of the 95% bootstrap interval of every rating (pooled over the policies)."""
    rng = np.random.default_rng(seed)
    p = np.array(rates)
    theta = logit(p) - logit(p).mean()
    size = p.size
    covered = total = 0
    for _ in range(runs):
        units, strata = [], []
        for c in range(campaigns):
            for _ in range(marks):
                y = rng.random(size) < p
                units.append(np.outer(y, ~y).astype(float))      # i won over j: i succeeded, j failed
                strata.append(c)
        r = bradley_terry.rate(np.array(units), strata, reps=reps, rng=rng)
        covered += int(((r.lo <= theta) & (theta <= r.hi)).sum())
        total += size
    return Rate(covered / total, total)
