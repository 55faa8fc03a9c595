"""One binomial proportion: Wilson, Clopper-Pearson and Wald intervals, their exact coverage,
and the trial budget for a target half-width.

References: Wilson EB (1927) JASA 22:209-212; Brown LD, Cai TT, DasGupta A (2001)
Statistical Science 16:101-133; Clopper CJ, Pearson ES (1934) Biometrika 26:404-413.
"""

from __future__ import annotations

import math
from collections.abc import Callable
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


def exact_coverage(interval: Callable[[int, int], Interval], n: int, p: float) -> float:
    """Exact coverage P_p(lo(K) <= p <= hi(K)), K ~ Binomial(n, p): the sum of the binomial
    probabilities of every k whose interval contains p (Brown, Cai & DasGupta 2001)."""
    ks = np.arange(n + 1)
    pmf = stats.binom.pmf(ks, n, p)
    covered = np.array([interval(int(k), n).contains(p) for k in ks])
    return float(pmf[covered].sum())


def wilson_bounds(k: np.ndarray, n: int, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
    """`wilson` vectorised over k (same formula, same clipping): arrays of lower and upper bounds."""
    k = np.asarray(k, dtype=float)
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z / den * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    lo = np.where(k == 0, 0.0, np.maximum(0.0, centre - half))
    hi = np.where(k == n, 1.0, np.minimum(1.0, centre + half))
    return lo, hi


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
