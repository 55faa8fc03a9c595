"""Three or more policies: Cochran's Q, and Holm's step-down adjustment of the pairwise tests.

References: Cochran WG (1950) Biometrika 37:256-266; Holm S (1979) Scand J Stat 6:65-70.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from orchestrator.analysis.stats.types import CochranQResult


def cochran_q(x: np.ndarray | Sequence[Sequence[int]]) -> CochranQResult:
    """Cochran's Q (Cochran 1950) for k >= 2 related binary samples; x is blocks x treatments
    (layouts x policies) of 0/1. With column totals C_j, row totals R_i and N = sum:
        Q = (k - 1) (k sum C_j^2 - N^2) / (k N - sum R_i^2),  Q ~ chi2(k - 1) under H0.
    Rows where every policy agrees add nothing. A zero denominator (no row varies) gives
    Q = 0, p = 1. With k = 2 it equals the uncorrected McNemar chi2."""
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise ValueError("Cochran's Q needs a blocks x treatments array with >= 2 treatments")
    k = arr.shape[1]
    col = arr.sum(axis=0)
    row = arr.sum(axis=1)
    total = arr.sum()
    den = k * total - np.sum(row ** 2)
    if den <= 0:
        return CochranQResult(0.0, k - 1, 1.0, arr.shape[0])
    q = (k - 1) * (k * np.sum(col ** 2) - total ** 2) / den
    return CochranQResult(float(q), k - 1, float(stats.chi2.sf(q, k - 1)), arr.shape[0])


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm (1979) step-down adjusted p-values: sort p ascending, p~_(i) = max_{j<=i}
    min(1, (m - j + 1) p_(j)), returned in the input order. Controls the family-wise error."""
    p = np.asarray(pvalues, dtype=float)
    m = len(p)
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adj = np.maximum.accumulate(adj)
    out = np.empty(m)
    out[order] = adj
    return [float(v) for v in out]
