"""An exact test for a trend in success over ordered conditions (the checkpoints of one
training run), paired within blocks (a block: one layout run, every checkpoint on it).

Block b holds the conditions K_b it ran (a subset of the ladder), each with an integer score
s_k (its rank on the ladder: 0 for the earliest step) and an outcome y_bk in {0, 1}. The
statistic is T = sum_b sum_k s_k y_bk. Under H0 (within every block the checkpoints are
exchangeable: success does not depend on the step) and given each block's number of successes
m_b, the successes of block b fall on a uniformly random m_b-subset of K_b, independently across
blocks; T's exact null distribution is the convolution of the blocks' distributions of the
score sum of a random m_b-subset (a block with m_b = 0 or m_b = |K_b| is constant). This is the
exact conditional form of the Cochran-Armitage trend test for matched sets (Cochran 1954;
Armitage 1955; Mantel 1963), a permutation test within blocks (Fisher 1935); with two
conditions it is the sign test on the discordant blocks, McNemar's exact test.

Two-sided, as the clustered sign-flip: exact = min(1, 2 min(P(T >= t), P(T <= t))), mid-p the
same with half the probability of t itself in each tail.

References: Cochran WG (1954). Some methods for strengthening the common chi-square tests.
Biometrics 10:417-451. Armitage P (1955). Tests for linear trends in proportions and
frequencies. Biometrics 11:375-386. Mantel N (1963). Chi-square tests with one degree of
freedom; extensions of the Mantel-Haenszel procedure. JASA 58:690-700.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb, lcm

import numpy as np

from orchestrator.analysis.stats.clustered import clustered_p_values, signflip_tails


@dataclass(frozen=True)
class TrendResult:
    statistic: int            # T
    expected: float           # E[T] under H0
    exact_p: float
    mid_p: float
    upper_p: float            # P(T >= t): evidence that success rises with the step
    blocks: int               # blocks that carry information (0 < m_b < |K_b|)
    units: int = 0            # `clustered_trend_test`: units whose centred statistic is not 0


def _subset_sum_distribution(scores: tuple[int, ...], m: int) -> np.ndarray:
    """P(sum of the scores of a uniformly random m-subset = s), s = 0 .. sum(scores)."""
    total = sum(scores)
    ways = np.zeros((m + 1, total + 1))
    ways[0, 0] = 1.0
    for s in scores:            # subsets by size and score sum, one score at a time
        if s:
            ways[1:, s:] = ways[1:, s:] + ways[:-1, :total + 1 - s]
        else:
            ways[1:] = ways[1:] + ways[:-1]
    return ways[m] / comb(len(scores), m)


def trend_test(blocks: Sequence[Sequence[tuple[int, bool]]]) -> TrendResult:
    """The exact trend test on blocks, each a list of (score, success) for the conditions it
    ran; scores are non-negative integers (ranks)."""
    dist = np.ones(1)
    observed = 0
    expected = 0.0
    informative: Counter = Counter()
    for block in blocks:
        scores = tuple(sorted(int(s) for s, _ in block))
        if len(set(scores)) != len(scores) or any(s < 0 for s in scores):
            raise ValueError("a block holds each condition once, with a score >= 0")
        m = sum(1 for _, y in block if y)
        observed += sum(int(s) for s, y in block if y)
        expected += m * sum(scores) / len(scores) if scores else 0.0
        if 0 < m < len(scores):
            informative[(scores, m)] += 1
    offset = 0          # constant blocks add to T and E[T] alike: T - offset has the convolved law
    for (scores, m), count in informative.items():
        step = _subset_sum_distribution(scores, m)
        for _ in range(count):
            dist = np.convolve(dist, step)
    for block in blocks:
        ranks = [int(s) for s, _ in block]
        m = sum(1 for _, y in block if y)
        if m == len(ranks):
            offset += sum(ranks)
    t = observed - offset
    values = np.arange(dist.size)
    at = float(dist[values == t].sum()) if 0 <= t < dist.size else 0.0
    upper = float(dist[values >= t].sum())
    lower = float(dist[values <= t].sum())
    exact = min(1.0, 2 * min(upper, lower))
    mid = min(1.0, 2 * (min(upper, lower) - at / 2))
    return TrendResult(statistic=observed, expected=expected, exact_p=exact, mid_p=mid, upper_p=upper,
                       blocks=sum(informative.values()))


def clustered_trend_test(units: Sequence[Sequence[Sequence[tuple[int, bool]]]]) -> TrendResult:
    """The trend test with the mark as the unit: `units` holds, per (campaign, mark), its blocks
    (its layout runs, one per repeat), each a list of (score, success) as in `trend_test`.

    The repeats of a mark share its difficulty and its own response to the step, so its blocks
    are not independent and `trend_test`, which counts every block, overstates the evidence (with
    per-mark step effects and no trend on average it found a trend in 14 % (3 repeats) and 21 %
    (5 repeats) of ladders). Here each block contributes its centred statistic
    T_b - m_b mean(s_b) (the score sum of its successes minus its expectation under H0), and a
    unit the sum U_k over its blocks. H0: no trend on average over marks, each U_k symmetric
    about 0 and independent across marks (each mark's own step effects drawn from a symmetric
    law; it holds in particular when the steps are exchangeable within every block). The test is
    the cluster sign-flip over units of `stats.clustered` (Fisher 1935; Pitman 1937), exact by
    convolution on U_k scaled by the lcm of the block sizes (integers), two-sided by doubling the
    upper tail. With one block per unit and two steps it is McNemar's exact and mid-p."""
    sizes = [len(block) for unit in units for block in unit if block]
    scale = lcm(*sizes) if sizes else 1
    d: list[int] = []
    observed, expected, informative = 0, 0.0, 0
    for unit in units:
        u = 0
        for block in unit:
            scores = [int(s) for s, _ in block]
            if len(set(scores)) != len(scores) or any(s < 0 for s in scores):
                raise ValueError("a block holds each condition once, with a score >= 0")
            if not scores:
                continue
            m = sum(1 for _, y in block if y)
            t = sum(int(s) for s, y in block if y)
            observed += t
            expected += m * sum(scores) / len(scores)
            informative += 0 < m < len(scores)
            u += scale * t - m * sum(scores) * (scale // len(scores))
        d.append(u)
    exact, mid = clustered_p_values(d)
    total = sum(d)
    above, at = signflip_tails([abs(x) for x in d if x], total)
    return TrendResult(statistic=observed, expected=expected, exact_p=exact, mid_p=mid, upper_p=above + at,
                       blocks=informative, units=sum(1 for x in d if x))
