"""Independent transcriptions of published formulas, used as oracles by the statistics tests
(never imported by the code under test)."""

from __future__ import annotations

import math

from scipy import stats as sps
from statsmodels.stats.proportion import proportion_confint


def newcombe_transcribed(a, b, c, d, z=None):
    """Newcombe (1998b) method 10 transcribed independently, with statsmodels' Wilson limits;
    (lo, hi) unclipped."""
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = proportion_confint(a + b, n, alpha=0.05, method="wilson")
    l2, u2 = proportion_confint(a + c, n, alpha=0.05, method="wilson")
    den = (a + b) * (c + d) * (a + c) * (b + d)
    if den == 0:
        phi = 0.0
    else:
        A = a * d - b * c
        phi = ((A - n / 2) if A > n / 2 else (0.0 if A >= 0 else A)) / math.sqrt(den)
    D = p1 - p2
    delta = math.sqrt(max(0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    eps = math.sqrt(max(0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return D - delta, D + eps


def mcnemar_p_oracle(b, c):
    """(exact, mid-p) of McNemar's test from scipy's binomial test (Fagerland et al. 2013)."""
    m = b + c
    if m == 0:
        return 1.0, 1.0
    exact = sps.binomtest(b, m, 0.5).pvalue
    mid = 1.0 if b == c else min(1.0, exact - sps.binom.pmf(b, m, 0.5))
    return exact, mid


def holm_oracle(pvalues) -> list[float]:
    """Holm's step-down adjusted p-values by statsmodels (`multipletests(method="holm")`), without
    the full garbage collection statsmodels runs on every such call (its time grows with every
    object the test process holds; the result does not depend on it)."""
    import gc

    from statsmodels.stats.multitest import multipletests

    collect = gc.collect
    gc.collect = lambda *args: 0
    try:
        return [float(p) for p in multipletests(pvalues, method="holm")[1]]
    finally:
        gc.collect = collect
