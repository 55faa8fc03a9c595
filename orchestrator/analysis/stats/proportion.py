"""One binomial proportion: the Wilson interval (scalar and vectorised over k) and the Wald
interval it is contrasted with.

References: Wilson EB (1927) JASA 22:209-212; Brown LD, Cai TT, DasGupta A (2001)
Statistical Science 16:101-133.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats

from orchestrator.analysis.stats.types import Interval

Z95 = float(stats.norm.ppf(0.975))  # 1.959963984540054


@lru_cache(maxsize=256)  # scipy's ppf costs ~0.1 ms a call; a report asks for a few levels thousands of times
def z_for_level(level: float) -> float:
    """Two-sided standard-normal critical value: z = Phi^-1(1 - (1 - level) / 2)."""
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), not {level}")
    return float(stats.norm.ppf(1 - (1 - level) / 2))


def _check_kn(k: int, n: int) -> None:
    if n < 0 or k < 0 or k > n or int(k) != k or int(n) != n:
        raise ValueError(f"need integer counts 0 <= k <= n, not k={k}, n={n}")


def wilson(k: int, n: int, level: float = 0.95, z: float | None = None) -> Interval:
    """Wilson score interval for k successes in n trials (Wilson 1927; Brown, Cai & DasGupta 2001).

    With p = k/n and z = Phi^-1(1 - alpha/2):
        centre = (p + z^2/(2n)) / (1 + z^2/n)
        half   = z/(1 + z^2/n) * sqrt(p(1-p)/n + z^2/(4n^2))
        [centre - half, centre + half], clipped to [0, 1] (the clip only removes rounding).
    It inverts the score test |p - pi| <= z sqrt(pi(1-pi)/n). n = 0 gives [0, 1].
    """
    _check_kn(k, n)
    z = z_for_level(level) if z is None else float(z)
    if n == 0:
        return Interval(float("nan"), 0.0, 1.0, "wilson", level)
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z / den * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return Interval(p, lo, hi, "wilson", level)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> Interval:
    """The exact (Clopper & Pearson 1934) interval for k successes in n trials: the Beta(k, n - k + 1)
    and Beta(k + 1, n - k) quantiles at (1 - level)/2 and (1 + level)/2; 0 at k = 0, 1 at k = n.
    Coverage is at least `level` for a binomial count, and for a sum of independent Bernoullis of
    unequal rates (a stratified count), whose tails are no heavier (Hoeffding 1956)."""
    from scipy.stats import beta

    _check_kn(k, n)
    if n == 0:
        return Interval(float("nan"), 0.0, 1.0, "clopper-pearson", level)
    tail = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(tail, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - tail, k + 1, n - k))
    return Interval(k / n, lo, hi, "clopper-pearson", level)




def wald(k: int, n: int, level: float = 0.95, z: float | None = None) -> Interval:
    """Wald interval p +- z sqrt(p(1-p)/n), clipped to [0, 1] (for contrast only).

    Brown, Cai & DasGupta (2001) show its coverage is erratic; it collapses to a point at
    k = 0 or k = n. Kept so reports and tests can show why Wilson is used.
    """
    _check_kn(k, n)
    z = z_for_level(level) if z is None else float(z)
    if n == 0:
        return Interval(float("nan"), 0.0, 1.0, "wald", level)
    p = k / n
    h = z * math.sqrt(p * (1 - p) / n)
    return Interval(p, max(0.0, p - h), min(1.0, p + h), "wald", level)




def wilson_bounds(k: np.ndarray | float, n: float, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """`wilson` vectorised over k (same formula, same clipping): arrays of lower and upper bounds."""
    k = np.asarray(k, dtype=float)   # n may be real too (effective counts, `stats.clustered`)
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z / den * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    lo = np.where(k == 0, 0.0, np.maximum(0.0, centre - half))
    hi = np.where(k == n, 1.0, np.minimum(1.0, centre + half))
    return lo, hi


def poisson_per_100(k: int, trials: int, level: float = 0.95) -> Interval:
    """The exact (Garwood 1936) interval for a count of k events over `trials` trials, as events
    per 100 trials: [chi2(a/2; 2k) / 2, chi2(1 - a/2; 2k + 2) / 2] x 100 / trials, the lower bound
    0 at k = 0 (Garwood F (1936) Biometrika 28:437-442). It covers at least `level` for every
    Poisson mean (it is the inversion of two one-sided exact tests). 2 in 80 trials: 2.5 per 100,
    0.30 to 9.03."""
    if trials <= 0 or k < 0:
        raise ValueError("need k >= 0 events in trials > 0")
    a = 1 - level
    lo = 0.0 if k == 0 else float(stats.chi2.ppf(a / 2, 2 * k)) / 2
    hi = float(stats.chi2.ppf(1 - a / 2, 2 * k + 2)) / 2
    scale = 100 / trials
    return Interval(k * scale, lo * scale, hi * scale, "poisson-exact", level)
