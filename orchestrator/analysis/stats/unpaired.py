"""Two independent samples, for contrast with the paired analysis: Fisher's exact test and
Newcombe's hybrid score interval for two rates; the Mann-Whitney test for two samples of a
measurement (the start check's placement error per policy).

References: Fisher RA (1935) JRSS 98:39-82; Newcombe RG (1998a) Statistics in Medicine
17:873-890; Mann HB, Whitney DR (1947) Ann Math Stat 18:50-60.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy import stats

from orchestrator.analysis.stats.paired_ci import _wilson_lu
from orchestrator.analysis.stats.proportion import _check_kn, z_for_level
from orchestrator.analysis.stats.types import Interval


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact test of k1/n1 vs k2/n2 (Fisher 1935): with the margins fixed,
    the total hypergeometric probability of every table no more likely than the observed one
    (scipy.stats.fisher_exact). For contrast only: it ignores the pairing."""
    _check_kn(k1, n1)
    _check_kn(k2, n2)
    if n1 == 0 or n2 == 0:
        return 1.0
    return float(stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue)


def newcombe_independent(k1: int, n1: int, k2: int, n2: int, level: float = 0.95) -> Interval:
    """Newcombe (1998a) method 10, hybrid score interval for p1 - p2 of independent rates:
    D = p1 - p2, lo = D - sqrt((p1 - l1)^2 + (u2 - p2)^2), hi = D + sqrt((u1 - p1)^2 + (p2 - l2)^2),
    with (l_i, u_i) the Wilson intervals. For contrast with the paired interval."""
    _check_kn(k1, n1)
    _check_kn(k2, n2)
    z = z_for_level(level)
    p1, l1, u1 = _wilson_lu(k1, n1, z)
    p2, l2, u2 = _wilson_lu(k2, n2, z)
    d = p1 - p2
    return Interval(d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2),
                    d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2), "newcombe-hybrid", level)


def mann_whitney(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U test of "x and y come from one distribution" (Mann & Whitney
    1947): U counts the pairs with x_i > y_j (ties one half); scipy.stats.mannwhitneyu's exact
    null distribution when both samples are small and untied, else the normal approximation
    with the tie correction and a continuity correction. 1.0 when either sample is empty or
    every value is the same (no ordering to test; scipy returns NaN there)."""
    if len(x) == 0 or len(y) == 0 or len(set(x) | set(y)) == 1:
        return 1.0
    return float(stats.mannwhitneyu(list(x), list(y), alternative="two-sided", method="auto").pvalue)
