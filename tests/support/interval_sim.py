"""Seeded coverage simulations of the report's intervals, for the tests (small) and for
bench/interval_coverage.py (the grid whose figures docs/statistics.md gives).

- `rate_coverage`: one policy's rate with repeats (`stats.clustered_wilson`). Mark k's success
  probability is drawn from a Beta with mean `rate` and intra-mark correlation `rho`
  (beta-binomial: Beta(rate s, (1 - rate) s), s = (1 - rho) / rho; rho 0: every mark at `rate`),
  its `repeats` trials from it; the truth is `rate`.
- `kappa_coverage`: Cohen's kappa of a rater against a reference (`stats.binary_agreement`) on
  `n` items; the reference says success with probability `prevalence`, the rater agrees with it
  with the probability that gives kappa `kappa` when both have the same prevalence (the
  common-correlation model: P(both success) = pi^2 + kappa pi (1 - pi)); the truth is `kappa`.
- `poisson_coverage`: the exact Poisson interval for a count per 100 trials.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from orchestrator.analysis import stats


def coverage(hits: int, runs: int) -> tuple[float, float]:
    """(coverage, its standard error)."""
    rate = hits / runs
    return rate, math.sqrt(rate * (1 - rate) / runs)


def rate_coverage(marks: int, repeats: int, rate: float, rho: float, runs: int, seed: int,
                  interval: Callable = stats.clustered_wilson) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    s = (1 - rho) / rho if rho > 0 else 0.0
    hits = 0
    for _ in range(runs):
        p = rng.beta(rate * s, (1 - rate) * s, marks) if rho > 0 else np.full(marks, rate)
        y = rng.binomial(repeats, p)
        iv = interval([(int(k), repeats) for k in y])
        hits += iv.lo <= rate <= iv.hi
    return coverage(hits, runs)


def kappa_cells(prevalence: float, kappa: float) -> tuple[float, float, float, float]:
    """(both success, rater only, reference only, both failure) under the common-correlation
    model (Donner & Eliasziw 1992): the two share the prevalence pi."""
    pi = prevalence
    both = pi * pi + kappa * pi * (1 - pi)
    neither = (1 - pi) ** 2 + kappa * pi * (1 - pi)
    one = (1 - both - neither) / 2
    return both, one, one, neither


def kappa_coverage(n: int, prevalence: float, kappa: float, runs: int, seed: int,
                   interval: Callable | None = None) -> tuple[float, float, int]:
    """(coverage, its SE, tables where the interval was undefined: both raters constant, counted
    as misses)."""
    rng = np.random.default_rng(seed)
    cells = kappa_cells(prevalence, kappa)
    hits = undefined = 0
    for _ in range(runs):
        counts = rng.multinomial(n, cells)
        rater = [True] * (counts[0] + counts[1]) + [False] * (counts[2] + counts[3])
        reference = [True] * counts[0] + [False] * counts[1] + [True] * counts[2] + [False] * counts[3]
        lo, hi = (interval or _kappa_interval)(rater, reference)
        if lo != lo:
            undefined += 1
            continue
        hits += lo <= kappa <= hi
    rate, se = coverage(hits, runs)
    return rate, se, undefined


def _kappa_interval(rater: list[bool], reference: list[bool]) -> tuple[float, float]:
    lo, hi = stats.binary_agreement(rater, reference)["kappa_ci95"]
    return lo, hi


def poisson_coverage(trials: int, rate_per_trial: float, runs: int, seed: int) -> tuple[float, float]:
    """Counts of events over `trials` trials at `rate_per_trial` (Poisson); the truth is 100 x the
    rate per trial."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(rate_per_trial * trials, runs)
    covers = {}
    for k in set(counts.tolist()):      # one interval per distinct count
        iv = stats.poisson_per_100(int(k), trials)
        covers[k] = iv.lo <= 100 * rate_per_trial <= iv.hi
    return coverage(sum(covers[k] for k in counts.tolist()), runs)
