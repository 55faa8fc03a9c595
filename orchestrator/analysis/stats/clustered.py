"""Repeats on one mark: the mark (layout) is the unit of analysis.

With `trials_per_layout: r > 1` every mark contributes r pairs. Pairs on one mark share its
difficulty, so they are not independent, and counting them as r independent layouts overstates
the evidence (for example: 10 marks x 5 repeats, A winning every repeat of 4 marks, gave
mid-p < 0.0001; with the mark as the unit it is 4 marks to 0, mid-p 0.0625).

Notation. Mark k has n_k pairs, b_k where only A succeeded, c_k where only B did, and
d_k = b_k - c_k; over the K marks B = sum b_k, C = sum c_k, N = sum n_k, and the paired
difference is D = rate(A) - rate(B) = (B - C) / N.

Test: the clustered McNemar statistic of Durkalski, Palesch, Lipsitz & Rust (2003) replaces
McNemar's variance B + C by the between-mark variance of the discordance,

    X^2 = (B - C)^2 / sum_k d_k^2,   asymptotically chi2(1) as the number of marks grows.

With a few marks the chi-square is unreliable, so the reported p-values use the exact
randomisation distribution of the same statistic: under H0 the two policies are exchangeable
within every mark, so each d_k is symmetric about 0 and independent across marks, and all 2^K
sign patterns of (+-d_k) are equally likely (a cluster-level sign-flip test; Fisher 1935,
Pitman 1937). sum d_k^2 is the same for every pattern, so the test on X^2 is the test on |S|,
S = sum_k d_k; two-sided by doubling the upper tail (the distribution is symmetric):

    exact = min(1, 2 P(S >= |s|)),   mid-p = min(1, 2 [P(S > |s|) + P(S = |s|) / 2]).

With one pair per mark d_k is -1, 0 or 1, S = B - C with B ~ Bin(B + C, 1/2), and these are
McNemar's exact and mid-p exactly (the same functions are called). Four marks won 5-0 by A
give exact 2/16 = 0.125 and mid-p 1/16 = 0.0625: the sign test on the marks.

Interval: the variance of D with the mark as the unit is the ratio-estimator variance of
Obuchowski (1998), with the small-sample factor K / (K - 1):

    V_c = K / (K - 1) * sum_k (d_k - D n_k)^2 / N^2;

the variance that treats the N pairs as independent is V_0 = (B + C - (B - C)^2 / N) / N^2.
The design effect deff = max(1, V_c / V_0) (Kish 1965) divides every count of the pooled
table (Rao & Scott 1992), and Newcombe's method 10 interval is computed on that effective
table with the Student t(K - 1) critical value in place of z (few marks give a noisy variance;
the usual small-sample step for cluster-robust intervals). With one pair per mark nothing is
changed: it is today's Newcombe interval. Coverage checked by simulation in the tests
(0.94-0.96 at 10-40 marks of 3-5 repeats).

References: Durkalski VL, Palesch YY, Lipsitz SR, Rust PF (2003). Analysis of clustered
matched-pair data. Statistics in Medicine 22:2417-2428. Obuchowski NA (1998). On the
comparison of correlated proportions for clustered data. Statistics in Medicine 17:1495-1507.
Rao JNK, Scott AJ (1992). A simple method for the analysis of clustered binary data.
Biometrics 48:577-585. Kish L (1965). Survey Sampling. Wiley. Pitman EJG (1937). Significance
tests which may be applied to samples from any populations. JRSS Suppl 4:119-130.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from orchestrator.analysis.stats.mcnemar import mcnemar_exact_p, mcnemar_midp
from orchestrator.analysis.stats.paired_ci import newcombe_cells, newcombe_paired
from orchestrator.analysis.stats.proportion import z_for_level
from orchestrator.analysis.stats.types import ClusteredResult, Interval, PairedTable


def _pooled(tables: Sequence[PairedTable]) -> PairedTable:
    return PairedTable(sum(t.both for t in tables), sum(t.a_only for t in tables),
                       sum(t.b_only for t in tables), sum(t.neither for t in tables))


def signflip_tails(weights: Sequence[int], s_obs: int) -> tuple[float, float]:
    """(P(S > s_obs), P(S = s_obs)) for S = sum_k e_k w_k with independent signs e_k = +-1 of
    probability 1/2 and integer weights w_k >= 0. Exact, by convolution: with W = sum w_k and
    T = the total weight of the + signs, S = 2T - W and T has the subset-sum distribution
    prod_k (1 + x^{w_k}) / 2."""
    w = [int(x) for x in weights if x]
    total = sum(w)
    dist: np.ndarray = np.zeros(total + 1)
    dist[0] = 1.0
    for wk in w:
        shifted = np.zeros_like(dist)
        shifted[wk:] = dist[:-wk]
        dist = 0.5 * (dist + shifted)
    s_values = 2 * np.arange(total + 1) - total
    return float(dist[s_values > s_obs].sum()), float(dist[s_values == s_obs].sum())


def clustered_p_values(d: Sequence[int]) -> tuple[float, float]:
    """(exact, mid-p) of the cluster-level sign-flip test on the per-mark discordance
    d_k = b_k - c_k (see the module docstring). When every non-zero |d_k| is 1 the null
    distribution is binomial and McNemar's own functions give the answer."""
    nonzero = [int(x) for x in d if x]
    if all(abs(x) == 1 for x in nonzero):
        b = sum(1 for x in nonzero if x > 0)
        c = len(nonzero) - b
        return mcnemar_exact_p(b, c), mcnemar_midp(b, c)
    s = abs(sum(nonzero))
    if s == 0:
        return 1.0, 1.0
    above, at = signflip_tails([abs(x) for x in nonzero], s)
    return min(1.0, 2 * (above + at)), min(1.0, 2 * (above + at / 2))


def design_effect(tables: Sequence[PairedTable]) -> float:
    """deff = max(1, V_c / V_0) for D = (B - C)/N (module docstring): 1 with one pair per mark
    or when V_0 = 0; N (one effective pair) when all pairs come from a single mark."""
    n_k = np.array([t.n for t in tables if t.n], dtype=float)
    d_k = np.array([t.a_only - t.b_only for t in tables if t.n], dtype=float)
    big_k, big_n = len(n_k), float(n_k.sum())
    if big_k == 0 or np.all(n_k == 1):
        return 1.0
    b = sum(t.a_only for t in tables)
    c = sum(t.b_only for t in tables)
    v0 = (b + c - (b - c) ** 2 / big_n) / big_n ** 2
    if v0 <= 0:
        return 1.0
    if big_k == 1:
        return big_n
    diff = (b - c) / big_n
    vc = big_k / (big_k - 1) * float(np.sum((d_k - diff * n_k) ** 2)) / big_n ** 2
    return max(1.0, vc / v0)


def clustered_difference(tables: Sequence[PairedTable], level: float = 0.95) -> Interval:
    """Newcombe method 10 on the pooled table divided by the design effect (Rao & Scott 1992),
    critical value t(K - 1): an interval for D that respects the marks. With one pair per mark
    it is `newcombe_paired` of the pooled table."""
    pooled = _pooled(tables)
    if pooled.n == 0:
        return Interval(0.0, -1.0, 1.0, "newcombe-clustered", level)
    marks = [t for t in tables if t.n]
    if all(t.n == 1 for t in marks):
        return newcombe_paired(pooled, level)
    deff = design_effect(marks)
    a, b, c, d = (x / deff for x in (pooled.both, pooled.a_only, pooled.b_only, pooled.neither))
    crit = float(stats.t.ppf(1 - (1 - level) / 2, len(marks) - 1)) if len(marks) > 1 else z_for_level(level)
    diff, lo, hi = newcombe_cells(a, b, c, d, crit)
    return Interval(diff, lo, hi, "newcombe-clustered", level)


def mark_split(tables: Sequence[PairedTable]) -> tuple[int, int]:
    """(marks with b_k > c_k, marks with c_k > b_k): the discordant marks of the sign test.
    Under H0 each discordant mark favours A with probability 1/2 independently of the others,
    so the e-value of `stats.evalue_discordant` on this split stays a test martingale over
    marks with repeats (with one pair per mark it is the split of the discordant pairs)."""
    return (sum(1 for t in tables if t.a_only > t.b_only), sum(1 for t in tables if t.b_only > t.a_only))


def clustered_mcnemar(tables: Sequence[PairedTable], level: float = 0.95) -> ClusteredResult:
    """The clustered matched-pair analysis of one comparison, one `PairedTable` per mark:
    sign-flip exact and mid-p, Durkalski's X^2 with its chi2(1) p (for reference), the design
    effect and the clustered interval for D."""
    used = [t for t in tables if t.n]
    d = [t.a_only - t.b_only for t in used]
    exact, mid = clustered_p_values(d)
    ss = float(sum(x * x for x in d))
    chi2 = (sum(d) ** 2 / ss) if ss else 0.0
    return ClusteredResult(
        marks=len(used), pairs=sum(t.n for t in used), discordant_marks=sum(1 for x in d if x),
        exact_p=exact, mid_p=mid, durkalski_chi2=chi2, durkalski_p=float(stats.chi2.sf(chi2, 1)) if ss else 1.0,
        design_effect=design_effect(used), difference=clustered_difference(used, level))
