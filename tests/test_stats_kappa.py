"""The kappa interval of `stats.binary_agreement`: its coverage measured by seeded simulation at
n = 20-1000, with the standard error of each estimate, and that it is informative (a value 0.3
away from the truth is covered rarely, so an interval of [-1, 1] fails); its bounds against an
independent construction (statsmodels' Wilson interval mapped through kappa's formula); kappa
itself against statsmodels."""

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
    wrong = truth - 0.3                       # a value the interval should exclude at n >= 200
    for n in (20, 50, 200, 1000):
        reps, covered, defined, covers_wrong = 400, 0, 0, 0
        for _ in range(reps):
            x = rng.multinomial(n, cells)
            rater = [True] * (x[0] + x[1]) + [False] * (x[2] + x[3])
            reference = [True] * x[0] + [False] * x[1] + [True] * x[2] + [False] * x[3]
            lo, hi = stats.binary_agreement(rater, reference)["kappa_ci95"]
            if lo == lo:
                defined += 1
                covered += lo <= truth <= hi
                covers_wrong += lo <= wrong <= hi
        rate = covered / defined
        se = math.sqrt(rate * (1 - rate) / defined)
        assert rate >= 0.90, (n, rate, se)
        if n >= 200:
            assert covers_wrong / defined <= 0.05, (n, covers_wrong / defined)
        checked += 1
    assert checked == 4


@pytest.mark.parametrize("cells", [(23, 4, 6, 47), (40, 0, 0, 0), (5, 5, 5, 5), (30, 2, 9, 1), (0, 3, 4, 13)])
def test_kappa_interval_bounds_equal_an_independent_construction(cells):
    """The bounds are statsmodels' Wilson interval of the observed agreement, mapped through
    kappa = (p_o - p_e) / (1 - p_e) at the estimated chance agreement, clipped to [-1, 1]."""
    from statsmodels.stats.proportion import proportion_confint

    ss, sf, fs, ff = cells
    n = sum(cells)
    rater = [True] * (ss + sf) + [False] * (fs + ff)
    reference = [True] * ss + [False] * sf + [True] * fs + [False] * ff
    p1, q1 = (ss + sf) / n, (ss + fs) / n
    pe = p1 * q1 + (1 - p1) * (1 - q1)
    lo, hi = stats.binary_agreement(rater, reference)["kappa_ci95"]
    if pe >= 1:
        assert lo != lo and hi != hi
        return
    wlo, whi = proportion_confint(ss + ff, n, alpha=0.05, method="wilson")
    assert lo == pytest.approx(max(-1.0, (wlo - pe) / (1 - pe)), abs=1e-9)
    assert hi == pytest.approx(min(1.0, (whi - pe) / (1 - pe)), abs=1e-9)


def test_kappa_equals_statsmodels():
    table = np.array([[23, 4], [6, 47]])
    rater = [True] * 27 + [False] * 53
    reference = [True] * 23 + [False] * 4 + [True] * 6 + [False] * 47
    assert stats.binary_agreement(rater, reference)["kappa"] == pytest.approx(cohens_kappa(table).kappa, abs=1e-12)
