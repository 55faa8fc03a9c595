"""Repeats on one mark: the clustered matched-pair test and interval,
checked against brute-force sign enumeration, statsmodels (McNemar; cluster-robust variance)
and seeded simulations of the error rates, each with its standard error."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.regression.linear_model import OLS
from statsmodels.stats import contingency_tables as ct

from orchestrator.analysis import stats as S

T = S.PairedTable


def _signflip_brute(d):
    """Oracle: all 2^K sign patterns of the per-mark discordance d_k, each with probability
    2^-K; two-sided by doubling the upper tail of S = sum e_k d_k."""
    s_obs = abs(sum(d))
    above = at = 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        s = sum(e * x for e, x in zip(signs, d, strict=True))
        above += s > s_obs
        at += s == s_obs
    k = 2 ** len(d)
    return min(1.0, 2 * (above + at) / k), min(1.0, 2 * (above + at / 2) / k)


def test_issue_example_ten_marks_five_repeats():
    # A wins every repeat of 4 marks, both succeed on 3, both fail on 3: 4 marks to 0
    tables = [T(0, 5, 0, 0)] * 4 + [T(5, 0, 0, 0)] * 3 + [T(0, 0, 0, 5)] * 3
    r = S.clustered_mcnemar(tables)
    assert (r.exact_p, r.mid_p) == pytest.approx((2 / 16, 1 / 16), abs=1e-15)   # 4-0 sign test
    assert r.marks == 10 and r.pairs == 50 and r.discordant_marks == 4
    assert r.difference.lo < 0 < r.difference.hi          # nothing established
    naive = S.mcnemar(20, 0).mid_p
    assert naive < 1e-4                                   # what counting repeats as layouts said


@pytest.mark.parametrize("seed", range(6))
def test_signflip_matches_enumeration(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        k = int(rng.integers(1, 11))
        d = [int(x) for x in rng.integers(-4, 5, size=k)]
        want = _signflip_brute([x for x in d if x])
        assert S.clustered_p_values(d) == pytest.approx(want, abs=1e-12), d


def test_one_pair_per_mark_is_todays_mcnemar_and_newcombe():
    rng = np.random.default_rng(7)
    for _ in range(300):
        cells = rng.integers(0, 25, size=4)
        tables = ([T(1, 0, 0, 0)] * int(cells[0]) + [T(0, 1, 0, 0)] * int(cells[1])
                  + [T(0, 0, 1, 0)] * int(cells[2]) + [T(0, 0, 0, 1)] * int(cells[3]))
        if not tables:
            continue
        r = S.clustered_mcnemar(tables)
        b, c = int(cells[1]), int(cells[2])
        exact = ct.mcnemar([[cells[0], b], [c, cells[3]]], exact=True).pvalue
        midp = 1.0 if b == c else min(1.0, exact - sps.binom.pmf(b, b + c, 0.5))
        assert r.exact_p == pytest.approx(exact, rel=1e-12, abs=1e-15)
        assert r.mid_p == pytest.approx(midp, rel=1e-9, abs=1e-15)
        assert r.design_effect == 1.0
        pooled = T(*(int(x) for x in cells))
        assert r.difference == S.newcombe_paired(pooled)       # identical, not merely close
        if b + c:
            chi2 = ct.mcnemar([[cells[0], b], [c, cells[3]]], exact=False, correction=False).statistic
            assert r.durkalski_chi2 == pytest.approx(chi2, rel=1e-12)


def test_design_effect_is_the_cluster_robust_variance_ratio():
    """deff = V_c / V_0 with V_c the CR0 cluster-robust variance of the mean pair difference
    (statsmodels OLS on a constant, groups = marks) times K/(K-1), V_0 the HC0 variance."""
    rng = np.random.default_rng(3)
    for _ in range(30):
        k = int(rng.integers(3, 15))
        reps = rng.integers(1, 6, size=k)
        rates = rng.uniform(0.1, 0.9, size=(k, 2))
        y, groups, tables = [], [], []
        for m in range(k):
            a = rng.random(reps[m]) < rates[m, 0]
            b = rng.random(reps[m]) < rates[m, 1]
            y += list(a.astype(int) - b.astype(int))
            groups += [m] * int(reps[m])
            tables.append(S.paired_table(a, b))
        y = np.array(y, float)
        x = np.ones((len(y), 1))
        if not np.any(y - y.mean()):
            continue
        vc = OLS(y, x).fit(cov_type="cluster", cov_kwds={"groups": np.array(groups), "use_correction": False}).bse[0] ** 2
        v0 = OLS(y, x).fit(cov_type="HC0").bse[0] ** 2
        want = 1.0 if np.all(reps == 1) else max(1.0, k / (k - 1) * vc / v0)
        assert S.design_effect(tables) == pytest.approx(want, rel=1e-9)


def _campaigns(rng, marks, repeats, delta, sd, count):
    """Seeded campaigns: every mark has its own success rate (Beta(2, 2)) and its own A-B
    effect (normal, sd), A and B equal on average when delta = 0; repeats share the mark."""
    base = rng.beta(2.0, 2.0, (count, marks))
    eff = rng.normal(0.0, sd, (count, marks)) + delta
    pa = np.clip(base + eff / 2, 0, 1)[..., None]
    pb = np.clip(base - eff / 2, 0, 1)[..., None]
    u = rng.random((count, marks, repeats))
    a, b = u < pa, u < pb
    cells = [(a & b).sum(2), (a & ~b).sum(2), (~a & b).sum(2), (~a & ~b).sum(2)]
    return [[T(*(int(c[i, m]) for c in cells)) for m in range(marks)] for i in range(count)]


@pytest.mark.slow   # seconds of simulation or enumeration: the full run, not the fast lane
def test_repeats_campaign_keeps_false_positive_rate():
    """20 marks x 5 repeats, policies equal on average: the clustered mid-p and exact tests
    reject at most alpha = 0.05 of the time within 2 simulation SEs (SE = sqrt(0.05 * 0.95 /
    1500) = 0.0056); pooling the repeats as layouts rejects far more often (issue: 0.144)."""
    count = 1500
    rng = np.random.default_rng(20261130)
    campaigns = _campaigns(rng, 20, 5, 0.0, 0.25, count)
    se = math.sqrt(0.05 * 0.95 / count)
    clustered = [S.clustered_mcnemar(c) for c in campaigns]
    rate_mid = np.mean([r.mid_p <= 0.05 for r in clustered])
    rate_exact = np.mean([r.exact_p <= 0.05 for r in clustered])
    pooled = np.mean([S.mcnemar(sum(t.a_only for t in c), sum(t.b_only for t in c)).mid_p <= 0.05
                      for c in campaigns])
    assert rate_mid <= 0.05 + 2 * se, (rate_mid, se)
    assert rate_exact <= 0.05 + 2 * se, (rate_exact, se)
    assert pooled > 0.05 + 6 * se, pooled


@pytest.mark.parametrize("marks, repeats, delta, sd", [(20, 5, 0.0, 0.25), (10, 5, 0.3, 0.3), (40, 3, 0.1, 0.1)])
def test_clustered_interval_coverage(marks, repeats, delta, sd):
    """Coverage of the 95 % clustered interval for the mean difference over marks, by
    simulation: >= 0.95 - 3 SE with SE = sqrt(0.95 * 0.05 / 800) = 0.0077. The true value is
    the population mean of the clipped per-mark difference (Monte Carlo, 400 000 marks)."""
    rng = np.random.default_rng(11)
    base = rng.beta(2.0, 2.0, 400_000)
    eff = rng.normal(0.0, sd, 400_000) + delta
    truth = float(np.mean(np.clip(base + eff / 2, 0, 1) - np.clip(base - eff / 2, 0, 1)))
    count = 800
    campaigns = _campaigns(np.random.default_rng(5), marks, repeats, delta, sd, count)
    covered = np.mean([S.clustered_difference(c).contains(truth) for c in campaigns])
    assert covered >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / count), covered
