"""McNemar's test for the paired 2x2 table: exact, mid-p, asymptotic and continuity
corrected; the discordant-pair floor.

References: McNemar Q (1947) Psychometrika 12:153-157; Edwards AL (1948) Psychometrika
13:185-187; Fagerland MW, Lydersen S, Laake P (2013) BMC Med Res Methodol 13:91.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from scipy import stats

from orchestrator.analysis.stats.types import McNemarResult, PairedTable


def paired_table(a_ok: Iterable[bool], b_ok: Iterable[bool]) -> PairedTable:
    """Build the paired 2x2 from two aligned boolean sequences (one entry per layout)."""
    # counted in Python: the stopping rule builds thousands of these of a few layouts each, where
    # numpy's per-array set-up costs more than the counting
    a = [bool(x) for x in a_ok]
    b = [bool(x) for x in b_ok]
    if len(a) != len(b):
        raise ValueError("paired outcomes must have the same length")
    cells = [0, 0, 0, 0]                 # both, a only, b only, neither
    for x, y in zip(a, b, strict=True):
        cells[(not x) * 2 + (not y)] += 1
    return PairedTable(*cells)


def mcnemar_exact_p(b: int, c: int) -> float:
    """Exact (conditional) McNemar p: the two-sided binomial test of b in m = b + c at 1/2,
    p = min(1, 2 P(X <= min(b, c))), X ~ Bin(m, 1/2) (McNemar 1947; Fagerland et al. 2013).
    No discordant pairs gives p = 1."""
    m = b + c
    if m == 0:
        return 1.0
    return float(min(1.0, 2 * stats.binom.cdf(min(b, c), m, 0.5)))


def mcnemar_midp(b: int, c: int) -> float:
    """Mid-p McNemar: the exact p minus the probability of the observed count,
    mid-p = 2 [P(X <= min(b,c)) - P(X = min(b,c))/2] = exact - P(X = b), capped at 1
    (b = c gives 1). Fagerland, Lydersen & Laake (2013) recommend it as the primary test."""
    m = b + c
    if m == 0 or b == c:
        return 1.0
    k = min(b, c)
    return float(min(1.0, 2 * stats.binom.cdf(k, m, 0.5) - stats.binom.pmf(k, m, 0.5)))


def mcnemar(b: int, c: int) -> McNemarResult:
    """McNemar's test on the discordant pairs b (A only) and c (B only), all variants:

    - exact: two-sided binomial test of b in b + c at 1/2 (`mcnemar_exact_p`);
    - mid-p: exact minus P(X = b) (`mcnemar_midp`; Fagerland, Lydersen & Laake 2013);
    - asymptotic: chi2 = (b - c)^2 / (b + c), 1 df (McNemar 1947);
    - continuity corrected: chi2_cc = (max(|b - c| - 1, 0))^2 / (b + c) (Edwards 1948).
      When b = c the correction is floored at 0 (statsmodels would give 1/(b+c)).
    With b + c = 0 every statistic is 0 and every p is 1 (no evidence either way).
    """
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be non-negative")
    m = b + c
    if m == 0:
        return McNemarResult(b, c, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0)
    chi2 = (b - c) ** 2 / m
    chi2_cc = max(abs(b - c) - 1, 0) ** 2 / m
    return McNemarResult(b, c, mcnemar_exact_p(b, c), mcnemar_midp(b, c), float(chi2),
                         float(stats.chi2.sf(chi2, 1)), float(chi2_cc), float(stats.chi2.sf(chi2_cc, 1)))


def discordant_floor(k: int, test: str = "mcnemar_exact") -> float:
    """Smallest two-sided McNemar p with k discordant pairs (all k won by one policy), capped
    at 1: exact 2 * 0.5^k, mid-p 0.5^k (the exact floor minus P(X = 0) = 0.5^k). Five
    discordant pairs can never reach 0.05 with the exact test (0.0625); mid-p gives 0.031."""
    return float(min(1.0, (1 if test == "mcnemar_midp" else 2) * 0.5 ** k))


@lru_cache(maxsize=64)   # a report asks once per comparison; each answer costs a dozen scipy calls
def min_discordant_for_alpha(alpha: float, test: str = "mcnemar_midp") -> int:
    """Fewest discordant pairs for which the test can reach p <= alpha at all (a k-0 split).

    Exact: 2 * 0.5^k <= alpha. Mid-p: 0.5^k <= alpha (its floor is half the exact floor).
    """
    k = 1
    while True:
        p = mcnemar_exact_p(k, 0) if test == "mcnemar_exact" else mcnemar_midp(k, 0)
        if p <= alpha:
            return k
        k += 1
