"""The kappa interval of `stats.binary_agreement` (issue 27 item 9): its coverage measured by
seeded simulation at n = 20-1000, with the standard error of each estimate; kappa itself
against statsmodels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.inter_rater import cohens_kappa

from orchestrator.analysis import stats


def _kappa(p11, p10, p01, p00) -> float:
    p1, q1 = p11 + p10, p11 + p01
    pe = p1 * q1 + (1 - p1) * (1 - q1)
    return (p11 + p00 - pe) / (1 - pe)


@pytest.mark.parametrize("cells", [(0.45, 0.05, 0.05, 0.45), (0.6, 0.1, 0.05, 0.25), (0.48, 0.01, 0.01, 0.5)])
def test_kappa_interval_coverage_from_20_to_1000_items(cells):
    truth = _kappa(*cells)
    rng = np.random.default_rng(int(1000 * cells[0]))
    checked = 0
    for n in (20, 50, 200, 1000):
        reps, covered, defined = 400, 0, 0
        for _ in range(reps):
            x = rng.multinomial(n, cells)
            rater = [True] * (x[0] + x[1]) + [False] * (x[2] + x[3])
            reference = [True] * x[0] + [False] * x[1] + [True] * x[2] + [False] * x[3]
            lo, hi = stats.binary_agreement(rater, reference)["kappa_ci95"]
            if lo == lo:
                defined += 1
                covered += lo <= truth <= hi
        rate = covered / defined
        se = math.sqrt(rate * (1 - rate) / defined)
        assert rate >= 0.90, (n, rate, se)
        checked += 1
    assert checked == 4


def test_kappa_equals_statsmodels():
    table = np.array([[23, 4], [6, 47]])
    rater = [True] * 27 + [False] * 53
    reference = [True] * 23 + [False] * 4 + [True] * 6 + [False] * 47
    assert stats.binary_agreement(rater, reference)["kappa"] == pytest.approx(cohens_kappa(table).kappa, abs=1e-12)
