"""One policy's success rate when marks have repeats: the mark as the unit.

Mark k has m_k trials of the policy with y_k successes; over the K marks N = sum m_k, Y = sum y_k,
p = Y / N. The repeats of a mark share its difficulty, so the binomial variance p (1 - p) / N
understates the variance of p. The ratio-estimator variance with the mark as the unit (Cochran
1977 section 6.3; the same estimator as the paired difference's in `stats.clustered`), with the
small-sample factor K / (K - 1), is

    V_c = K / (K - 1) * sum_k (y_k - p m_k)^2 / N^2,

and the design effect deff = max(1, V_c / (p (1 - p) / N)) (Kish 1965). The interval is Wilson's
on the effective counts (Y / deff successes of N / deff trials; Rao & Scott 1992) with the
Student t(K - 1) critical value in place of z, as the clustered difference interval does. With
one trial per mark it is Wilson's interval.

Few outcomes of one kind. When the rarer outcome occurs fewer times than a mark has repeats
(min(Y, N - Y) < max m_k; at 0 % and 100 % always), the data cannot tell whether those outcomes
came from one mark (repeats fully correlated) or from several (independent): V_c then rests on a
handful of marks and is near the binomial variance whatever the correlation, and at 0 or 1 it is
0. The interval then takes the conservative case, every mark counting once: deff = max(deff,
N / K) (Wilson on K effective trials with the t(K - 1) value: 100/100 on 20 marks of 5 repeats
gives [0.820, 1], not [0.958, 1]). Without it the interval covered 0.90 at 20 marks x 3 repeats,
rate 0.9, intra-mark correlation 0.6 (beta-binomial) and 0.84 at 20 x 5, rate 0.95.
Coverage is checked by seeded simulation in tests/test_stats_clustered_rate.py (>= 0.93 at 8-40
marks of 2-5 repeats with correlated repeats, and at the beta-binomial points above) and over a
grid by `bench/interval_coverage.py` (docs/statistics.md).

References: Wilson EB (1927) JASA 22:209-212. Rao JNK, Scott AJ (1992) Biometrics 48:577-585.
Kish L (1965) Survey Sampling. Wiley. Cochran WG (1977) Sampling Techniques, 3rd ed. Wiley.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from orchestrator.analysis.stats.proportion import wilson, wilson_bounds, z_for_level
from orchestrator.analysis.stats.types import Interval


def rate_design_effect(per_mark: Sequence[tuple[int, int]]) -> float:
    """deff of the pooled rate over marks of (successes, trials) (module docstring)."""
    y = np.array([s for s, m in per_mark if m], dtype=float)
    m = np.array([m for _, m in per_mark if m], dtype=float)
    k, n = len(m), float(m.sum())
    if k <= 1 or np.all(m == 1):
        return 1.0 if k != 1 or n <= 1 else n
    p = float(y.sum()) / n
    v0 = p * (1 - p) / n
    if v0 <= 0:
        return 1.0
    vc = k / (k - 1) * float(np.sum((y - p * m) ** 2)) / n ** 2
    return max(1.0, vc / v0)


def clustered_wilson(per_mark: Sequence[tuple[int, int]], level: float = 0.95) -> Interval:
    """Wilson's interval on the effective counts, t(K - 1) critical value (module docstring)."""
    marks = [(int(s), int(m)) for s, m in per_mark if m]
    y = sum(s for s, _ in marks)
    n = sum(m for _, m in marks)
    if n == 0:
        return Interval(float("nan"), 0.0, 1.0, "wilson-clustered", level)
    if all(m == 1 for _, m in marks):
        iv = wilson(y, n, level)
        return Interval(iv.estimate, iv.lo, iv.hi, "wilson", level)
    deff = rate_design_effect(marks)
    if min(y, n - y) < max(m for _, m in marks):     # too few of one outcome to estimate deff
        deff = max(deff, n / len(marks))
    crit = float(stats.t.ppf(1 - (1 - level) / 2, len(marks) - 1)) if len(marks) > 1 else z_for_level(level)
    lows, highs = wilson_bounds(y / deff, n / deff, crit)
    lo = 0.0 if y == 0 else float(lows)
    hi = 1.0 if y == n else float(highs)
    return Interval(y / n, lo, hi, "wilson-clustered", level)
