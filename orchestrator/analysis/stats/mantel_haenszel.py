"""The Cochran-Mantel-Haenszel test of no association in stratified 2x2 tables.

Each stratum k holds the table [[a_k, b_k], [c_k, d_k]] (rows: the two methods; columns:
success, failure) with n_k = a_k + b_k + c_k + d_k. Given the margins, a_k has the
hypergeometric mean E_k = (a_k + b_k)(a_k + c_k) / n_k and variance
V_k = (a_k + b_k)(c_k + d_k)(a_k + c_k)(b_k + d_k) / (n_k^2 (n_k - 1)); the statistic
X^2 = (sum_k (a_k - E_k))^2 / sum_k V_k is chi-squared with 1 df under H0 (no continuity
correction; strata with n_k < 2 carry nothing). With every matched pair its own stratum it is
McNemar's chi-squared (b - c)^2 / (b + c); with strata of several pairs (a mark with repeats,
seeds) it treats the trials of a stratum as independent given its margins, so it is quoted as a
reference beside the exact sign-flip test, not as the deciding test.

References: Mantel N, Haenszel W (1959). Statistical aspects of the analysis of data from
retrospective studies of disease. J Natl Cancer Inst 22:719-748. Cochran WG (1954).
Biometrics 10:417-451.
"""

from __future__ import annotations

from collections.abc import Sequence

from scipy import stats


def cmh_test(tables: Sequence[Sequence[Sequence[int]]]) -> tuple[float, float]:
    """(X^2, p) of the Cochran-Mantel-Haenszel test; (0, 1) when no stratum has variance."""
    diff = 0.0
    var = 0.0
    for (a, b), (c, d) in tables:
        n = a + b + c + d
        if n < 2:
            continue
        diff += a - (a + b) * (a + c) / n
        var += (a + b) * (c + d) * (a + c) * (b + d) / (n * n * (n - 1))
    if var <= 0:
        return 0.0, 1.0
    chi2 = diff * diff / var
    return float(chi2), float(stats.chi2.sf(chi2, 1))
