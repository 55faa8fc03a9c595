"""Statistics the tests use to check the package's, and that the product does not use: the
Clopper-Pearson interval (Clopper & Pearson 1934) as a reference, exact coverage of an interval
(Brown, Cai & DasGupta 2001), Wilson sample sizes, a binomial tail, and the paired Wald interval
with a dispatcher over the package's paired-difference intervals (Newcombe 1998, Tango 1998,
Bonett & Price 2012)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import stats

from orchestrator.analysis.stats.paired_ci import bonett_price_paired, newcombe_paired, tango_paired
from orchestrator.analysis.stats.proportion import Z95, _check_kn, wilson, wilson_bounds, z_for_level
from orchestrator.analysis.stats.types import Interval, PairedTable


def clopper_pearson(k: int, n: int, level: float = 0.95) -> Interval:
    """Clopper-Pearson 'exact' interval (Clopper & Pearson 1934).

    lo = Beta^-1(alpha/2; k, n-k+1) (0 when k = 0), hi = Beta^-1(1-alpha/2; k+1, n-k)
    (1 when k = n): it inverts two one-sided binomial tests, so coverage is >= level.
    """
    _check_kn(k, n)
    alpha = 1 - level
    if n == 0:
        return Interval(float("nan"), 0.0, 1.0, "clopper-pearson", level)
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return Interval(k / n, lo, hi, "clopper-pearson", level)


def exact_coverage(interval: Callable[[int, int], Interval], n: int, p: float) -> float:
    """Exact coverage P_p(lo(K) <= p <= hi(K)), K ~ Binomial(n, p): the sum of the binomial
    probabilities of every k whose interval contains p (Brown, Cai & DasGupta 2001)."""
    ks = np.arange(n + 1)
    pmf = stats.binom.pmf(ks, n, p)
    covered = np.array([interval(int(k), n).contains(p) for k in ks])
    return float(pmf[covered].sum())


def wilson_coverage(n: int, p: float, z: float = Z95) -> float:
    """Exact coverage of the Wilson interval at n and true rate p (vectorised `exact_coverage`)."""
    ks = np.arange(n + 1)
    lo, hi = wilson_bounds(ks, n, z)
    return float(stats.binom.pmf(ks, n, p)[(lo <= p) & (p <= hi)].sum())


def wilson_trials_needed(p: float, half_width: float, z: float = 1.96, n_max: int = 1_000_000) -> int:
    """Smallest n whose Wilson interval at observed rate p (k = round(p n)) has half-width
    (hi - lo)/2 <= half_width. Uses the clipped interval, as reported."""
    if not 0 <= p <= 1 or half_width <= 0:
        raise ValueError("need 0 <= p <= 1 and half_width > 0")
    for n in range(1, n_max + 1):
        iv = wilson(round(p * n), n, z=z)
        if (iv.hi - iv.lo) / 2 <= half_width:
            return n
    raise ValueError(f"no n <= {n_max} reaches half-width {half_width}")


def prob_at_least(k: int, n: int, p: float) -> float:
    """P(K >= k) for K ~ Binomial(n, p) (e.g. how often a p = 0.737 policy scores >= 9/10)."""
    return float(stats.binom.sf(k - 1, n, p))


def wald_paired(t: PairedTable, level: float = 0.95) -> Interval:
    """Wald interval for the paired difference (for contrast only: it is the interval most papers quote):
    D = (b - c)/n, se = sqrt(b + c - (b - c)^2/n) / n, D +- z se. Rough at small n."""
    n = t.n
    z = z_for_level(level)
    if n == 0:
        return Interval(0.0, -1.0, 1.0, "wald", level)
    b, c = t.a_only, t.b_only
    d = (b - c) / n
    se = math.sqrt(max(0.0, b + c - (b - c) ** 2 / n)) / n
    return Interval(d, max(-1.0, d - z * se), min(1.0, d + z * se), "wald", level)


_PAIRED_METHODS = {"newcombe": newcombe_paired, "tango": tango_paired,
                   "bonett-price": bonett_price_paired, "wald": wald_paired}


def paired_difference(t: PairedTable, method: str = "newcombe", level: float = 0.95) -> Interval:
    """Interval for rate(A) - rate(B) from paired data; method newcombe (default, Newcombe 1998
    method 10), tango (Tango 1998 score), bonett-price (Bonett & Price 2012) or wald."""
    try:
        fn = _PAIRED_METHODS[method]
    except KeyError:
        raise ValueError(f"unknown paired-difference method {method!r}; "
                         f"use one of {', '.join(_PAIRED_METHODS)}") from None
    return fn(t, level)
