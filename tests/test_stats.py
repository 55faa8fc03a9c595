"""orchestrator.analysis.stats against the reference vectors (tests/data/stats_vectors.json),
published values and statsmodels/scipy as oracles on thousands of random tables."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps
from statsmodels.stats import contingency_tables as ct
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from orchestrator.analysis import stats as S
from orchestrator.analysis.stats.paired_ci import _tango_p01
from support import stats_checks as C
from support.oracles import newcombe_transcribed

# Worked examples of the statistics this package implements, each recomputed with
# scipy/statsmodels (the "note" in the file says how).
VECTORS = Path(__file__).resolve().parent / "data" / "stats_vectors.json"
V = json.loads(VECTORS.read_text())
VECTOR_COUNTS = {"wilson": 6, "mcnemar": 2, "fisher": 3, "n_independent_groups": 2,
                 "trials_needed_wilson_z1.96": 12}


def test_every_reference_vector_is_there():
    """Count guard: the parametrized tests below run one case per vector; an emptied or truncated
    file would otherwise pass with fewer (or no) cases."""
    assert {name: len(V[name]) for name in VECTOR_COUNTS} == VECTOR_COUNTS
    assert set(V["t_interval"]) >= {"scores", "mean", "sd", "lo", "hi"}


# ------------------------------------------------------------------ reference vectors


@pytest.mark.parametrize("case", V["wilson"], ids=lambda c: f"{c['k']}/{c['n']}")
def test_wilson_vectors(case):
    iv = S.wilson(case["k"], case["n"])
    assert iv.lo == pytest.approx(case["lo"], abs=1e-12)
    assert iv.hi == pytest.approx(case["hi"], abs=1e-12)


@pytest.mark.parametrize("case", V["mcnemar"], ids=lambda c: str(c["table"]))
def test_mcnemar_vectors(case):
    t = S.PairedTable.from_matrix(case["table"])
    r = S.mcnemar(t.a_only, t.b_only)
    assert r.exact_p == pytest.approx(case["exact_p"], rel=1e-12)
    assert r.mid_p == pytest.approx(case["midp"], rel=1e-12)
    assert r.chi2 == pytest.approx(case["chi2"], rel=1e-12)
    assert r.chi2_p == pytest.approx(case["p_chi2"], rel=1e-10)
    assert r.chi2_cc == pytest.approx(case["chi2_cc"], rel=1e-12)
    assert r.chi2_cc_p == pytest.approx(case["p_cc"], rel=1e-10)


@pytest.mark.parametrize("case", V["fisher"], ids=lambda c: f"{c['k1']}/{c['n1']}-{c['k2']}/{c['n2']}")
def test_fisher_vectors(case):
    assert S.fisher_exact(case["k1"], case["n1"], case["k2"], case["n2"]) == pytest.approx(case["p"], rel=1e-9)


@pytest.mark.parametrize("case", V["n_independent_groups"], ids=lambda c: f"{c['p1']}v{c['p2']}")
def test_independent_groups_vectors(case):
    assert S.independent_groups_n(case["p1"], case["p2"]) == case["n"]


def test_t_interval_vector():
    c = V["t_interval"]
    r = S.t_interval(c["scores"])
    assert r.mean == pytest.approx(c["mean"], abs=1e-12)
    assert r.sd == pytest.approx(c["sd"], rel=1e-12)
    assert r.lo == pytest.approx(c["lo"], rel=1e-12)
    assert r.hi == pytest.approx(c["hi"], rel=1e-12)
    assert round(r.half_width, 3) == 0.020            # the worked example: 0.434 +- 0.020
    assert r.t_crit == pytest.approx(2.262, abs=5e-4)


@pytest.mark.parametrize("case", V["trials_needed_wilson_z1.96"], ids=lambda c: f"{c['p']}-{c['hw']}")
def test_trials_needed_vectors(case):
    assert C.wilson_trials_needed(case["p"], case["hw"], z=1.96) == case["n"]


# ------------------------------------------------------------------ reference values quoted in the source documents


def test_wilson_t_wald_and_the_sign_test_give_the_published_reference_values():
    assert _r3(S.wilson(18, 20)) == (0.699, 0.972)
    assert _r3(S.wilson(180, 200)) == (0.851, 0.934)
    assert _r3(S.wilson(100, 100)) == (0.963, 1.0)
    assert _r3(S.wilson(45, 100)) == (0.356, 0.548)
    # Q3: 0.80 +- 2.262 * 0.05 / sqrt(10) = 0.80 +- 0.036
    r = S.t_interval_from_summary(0.80, 0.05, 10)
    assert (round(r.lo, 3), round(r.hi, 3)) == (0.764, 0.836)
    # half-width of a 90 % estimate from 100 trials, about 0.059 (normal approximation)
    w = S.wald(90, 100)
    assert round((w.hi - w.lo) / 2, 3) == 0.059
    # paired table 45 / 0 / 55 / 0: pillar won all 55 discordant starts
    r = S.mcnemar(0, 55)
    assert r.exact_p == pytest.approx(2 * 0.5 ** 55)
    # sign test on 12 vs 3
    assert S.mcnemar(12, 3).exact_p == pytest.approx(sps.binomtest(12, 15, 0.5).pvalue)


def test_mcnemar_discordant_floor_paired_wald_and_fisher_give_the_published_reference_values():
    assert round(S.mcnemar(9, 1).exact_p, 3) == 0.021 and round(22 / 1024, 4) == round(S.mcnemar(9, 1).exact_p, 4)
    assert round(S.mcnemar(9, 1).mid_p, 3) == 0.012
    assert round(S.mcnemar(14, 6).exact_p, 3) == 0.115
    # discordant floor: 5 pairs all one way -> 0.0625; six are needed for 0.05
    assert S.discordant_floor(5) == 0.0625
    assert S.min_discordant_for_alpha(0.05, "mcnemar_exact") == 6
    # the quoted Wald intervals: roughly +4 to +28 and -1 to +33
    w1 = C.wald_paired(S.PairedTable(33, 9, 1, 7))
    w2 = C.wald_paired(S.PairedTable(30, 14, 6, 0))
    assert (round(100 * w1.lo), round(100 * w1.hi)) == (4, 28)
    assert (round(100 * w2.lo), round(100 * w2.hi)) == (-1, 33)
    # Fisher on the marginals: 42/50 vs 34/50 -> 0.10
    assert round(S.fisher_exact(42, 50, 34, 50), 2) == 0.10


def test_wilson_and_newcombe_independent_give_the_published_reference_values():
    z = 1.959963985
    assert _r3(S.wilson(0, 10, z=z)) == (0.0, 0.278) and abs(S.wilson(0, 10).hi - 0.2775) < 1e-3
    assert _r3(S.wilson(45, 200)) == (0.173, 0.288)       # pooled strong policy 0.225
    assert _r2(S.wilson(16, 200)) == (0.05, 0.13)         # held out 0.08
    gap = S.newcombe_independent(45, 200, 16, 200)
    assert (round(gap.lo, 2), round(gap.hi, 2)) == (0.08, 0.21)


def test_wilson_wald_fisher_power_and_exact_coverage_give_the_published_reference_values():
    assert _r3(S.wilson(9, 10)) == (0.596, 0.982)
    assert _r3(S.wilson(10, 10)) == (0.722, 1.0)
    assert _r3(S.wilson(221, 300)) == (0.684, 0.783)
    assert _r3(S.wilson(263, 300)) == (0.835, 0.909)
    assert (round(S.wald(10, 10).lo, 3), round(S.wald(10, 10).hi, 3)) == (1.0, 1.0)
    assert _r3(S.wald(9, 10, z=1.96)) == (0.714, 1.0)
    assert _r3(S.wald(221, 300, z=1.96)) == (0.687, 0.787)
    assert round(C.prob_at_least(9, 10, 221 / 300), 3) == 0.215
    assert round(C.prob_at_least(9, 10, 263 / 300), 3) == 0.645
    assert round(S.fisher_exact(14, 20, 18, 20), 3) == 0.235
    assert round(S.fisher_exact(74, 100, 88, 100), 3) == 0.018
    # exact power of Fisher's test, A 221/300 vs B 263/300
    for n, want in [(10, 0.028), (20, 0.119), (50, 0.337), (100, 0.656)]:
        assert round(S.fisher_power(221 / 300, 263 / 300, n), 3) == want
    # exact coverage at p = 221/300 (table B "exact" columns), z = 1.96
    p = 221 / 300
    want_wilson = {5: 0.981, 10: 0.975, 20: 0.962, 50: 0.947, 100: 0.946}
    want_wald = {5: 0.764, 10: 0.927, 20: 0.908, 50: 0.914, 100: 0.945}
    for n in want_wilson:
        assert round(C.exact_coverage(lambda k, m: S.wilson(k, m, z=1.96), n, p), 3) == want_wilson[n]
        assert round(C.exact_coverage(lambda k, m: S.wald(k, m, z=1.96), n, p), 3) == want_wald[n]


def test_the_interquartile_mean_keeps_what_scipy_trim_mean_keeps():
    # scipy trim_mean (as rliable) keeps n - 2 floor(n/4): for 10 values 6 are kept
    x = np.arange(10.0) ** 2
    assert S.interquartile_mean(x) == pytest.approx(np.mean(np.sort(x)[2:8]))
    x = np.random.default_rng(3).normal(size=(7, 4))
    assert S.interquartile_mean(x) == pytest.approx(sps.trim_mean(x.ravel(), 0.25))


def test_wilson_exact_coverage_n5_to_100():
    """Seed 004: Wilson's exact coverage stays near 95 % for every n; Wald's does not."""
    p = 221 / 300
    wilson_cov = [C.wilson_coverage(n, p) for n in range(5, 101)]
    for n in (5, 17, 50, 100):   # the vectorised path equals the generic one
        assert wilson_cov[n - 5] == pytest.approx(C.exact_coverage(S.wilson, n, p), abs=1e-14)
    wald_cov = [C.exact_coverage(S.wald, n, p) for n in range(5, 101, 5)]
    # Wilson oscillates around 95 % (Brown, Cai & DasGupta 2001) but never far below it here
    assert min(wilson_cov) > 0.92 and max(wilson_cov) < 0.99
    assert np.mean(wilson_cov) == pytest.approx(0.95, abs=0.01)
    assert min(wald_cov) < 0.80
    # averaged over a grid of true rates, Wilson's coverage is close to nominal at every n
    grid = np.linspace(0.05, 0.95, 19)
    for n in range(5, 101):
        mean_cov = np.mean([C.wilson_coverage(n, q) for q in grid])
        assert 0.93 < mean_cov < 0.975, (n, mean_cov)
    # and the coverage sum is a probability computed independently with binom.pmf
    n = 37
    ks = [k for k in range(n + 1) if S.wilson(k, n).contains(p)]
    assert C.exact_coverage(S.wilson, n, p) == pytest.approx(sum(sps.binom.pmf(k, n, p) for k in ks))


# ------------------------------------------------------------------ published paired intervals


def test_cavo_2012_published_values():
    """Fagerland, Lydersen & Laake (2014, and the contingencytables R package) on the Cavo et al.
    table [[59, 6], [16, 80]]: four decimals as published."""
    t = S.PairedTable(59, 6, 16, 80)
    expect = {"newcombe": (-0.1186, -0.0046), "tango": (-0.1240, -0.0054),
              "bonett-price": (-0.1195, -0.0032), "wald": (-0.1184, -0.0058)}
    for method, (lo, hi) in expect.items():
        iv = C.paired_difference(t, method)
        assert (round(iv.lo, 4), round(iv.hi, 4)) == (lo, hi), method
        assert round(iv.estimate, 4) == -0.0621
    r = S.mcnemar(6, 16)
    assert round(r.chi2_p, 6) == 0.033006
    assert round(r.chi2_cc_p, 6) == 0.055009
    assert round(r.exact_p, 6) == 0.052479
    assert round(r.mid_p, 6) == 0.034690
    cp = C.clopper_pearson(13, 16)
    assert (round(cp.lo, 4), round(cp.hi, 4)) == (0.5435, 0.9595)
    assert round(C.clopper_pearson(0, 10).hi, 4) == 0.3085


def test_newcombe_paired_transcription_random_tables():
    rng = np.random.default_rng(10)
    for _ in range(1000):
        a, b, c, d = rng.integers(0, 40, size=4)
        if a + b + c + d == 0:
            continue
        iv = S.newcombe_paired(S.PairedTable(int(a), int(b), int(c), int(d)))
        lo, hi = newcombe_transcribed(int(a), int(b), int(c), int(d))
        assert iv.lo == pytest.approx(max(lo, -1), abs=1e-9)
        assert iv.hi == pytest.approx(min(hi, 1), abs=1e-9)
        assert iv.lo <= iv.estimate <= iv.hi


def test_tango_matches_numeric_constrained_mle_and_mcnemar():
    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(11)
    for _ in range(150):
        a, b, c, d = (int(v) for v in rng.integers(0, 30, size=4))
        n = a + b + c + d
        if n == 0 or b + c == 0:
            continue
        delta = float(rng.uniform(-0.9, 0.9))
        # the closed-form constrained MLE of p01 against a numerical maximisation
        lo_x, hi_x = max(0.0, -delta) + 1e-12, (1 - delta) / 2 - 1e-12
        if hi_x <= lo_x:
            continue

        def nll(x, b=b, c=c, n=n, delta=delta):
            p10, p01 = x + delta, x
            rest = 1 - p10 - p01
            return -(b * math.log(p10) + c * math.log(p01) + (n - b - c) * math.log(max(rest, 1e-300)))

        best = minimize_scalar(nll, bounds=(lo_x, hi_x), method="bounded", options={"xatol": 1e-12})
        assert _tango_p01(b, c, n, delta) == pytest.approx(best.x, abs=2e-5)
        # the Tango interval excludes 0 exactly when the uncorrected McNemar test rejects
        iv = S.tango_paired(S.PairedTable(a, b, c, d))
        p = S.mcnemar(b, c).chi2_p
        if abs(p - 0.05) > 1e-6:
            assert (not iv.contains(0.0)) == (p < 0.05)


# ------------------------------------------------------------------ oracles on random tables


@pytest.mark.slow   # seconds of simulation or enumeration: the full run, not the fast lane
def test_mcnemar_against_statsmodels_random_tables():
    rng = np.random.default_rng(1)
    tables = rng.integers(0, 60, size=(1500, 4))
    tables = tables[tables[:, 1] + tables[:, 2] > 0]
    for a, b, c, d in tables[:500].tolist():
        table = [[a, b], [c, d]]
        r = S.mcnemar(b, c)
        ex = ct.mcnemar(table, exact=True)
        assert r.exact_p == pytest.approx(ex.pvalue, rel=1e-10, abs=1e-15)
        chi = ct.mcnemar(table, exact=False, correction=False)
        assert r.chi2 == pytest.approx(chi.statistic, rel=1e-12)
        assert r.chi2_p == pytest.approx(chi.pvalue, rel=1e-9, abs=1e-300)
        if b != c:  # statsmodels does not floor the corrected statistic at 0 when b == c
            cc = ct.mcnemar(table, exact=False, correction=True)
            assert r.chi2_cc == pytest.approx(cc.statistic, rel=1e-12)
            assert r.chi2_cc_p == pytest.approx(cc.pvalue, rel=1e-9, abs=1e-300)
            # mid-p: exact minus the point probability of the observed count (Fagerland et al. 2013)
            assert r.mid_p == pytest.approx(ex.pvalue - sps.binom.pmf(b, b + c, 0.5), rel=1e-9, abs=1e-15)
        assert 0 < r.mid_p <= r.exact_p <= 1
    # and 5000 more against scipy's binomial test, vectorised
    bc = rng.integers(0, 200, size=(5000, 2))
    bc = bc[bc.sum(axis=1) > 0]
    m, lo = bc.sum(axis=1), bc.min(axis=1)
    want = np.minimum(1, 2 * sps.binom.cdf(lo, m, 0.5))
    got = np.array([S.mcnemar_exact_p(int(b), int(c)) for b, c in bc])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    for b, c in bc[:200].tolist():
        assert S.mcnemar_exact_p(b, c) == pytest.approx(sps.binomtest(b, b + c, 0.5).pvalue, rel=1e-9, abs=1e-15)


def test_wilson_against_statsmodels_random():
    rng = np.random.default_rng(2)
    n = rng.integers(1, 500, size=3000)
    k = (rng.uniform(size=3000) * (n + 1)).astype(int).clip(0, n)
    for level in (0.8, 0.9, 0.95, 0.99):
        lo, hi = proportion_confint(k, n, alpha=1 - level, method="wilson")
        blo, bhi = proportion_confint(k, n, alpha=1 - level, method="beta")
        for i in range(0, 3000, 4 if level == 0.95 else 20):
            iv = S.wilson(int(k[i]), int(n[i]), level=level)
            assert iv.lo == pytest.approx(lo[i], abs=1e-12) and iv.hi == pytest.approx(hi[i], abs=1e-12)
            cp = C.clopper_pearson(int(k[i]), int(n[i]), level)
            assert cp.lo == pytest.approx(blo[i], abs=1e-9) and cp.hi == pytest.approx(bhi[i], abs=1e-9)
    # the vectorised bounds agree with statsmodels on all 3000 at once (one n per call)
    for nn in (7, 50, 333):
        ks = np.arange(nn + 1)
        lo, hi = proportion_confint(ks, nn, alpha=0.05, method="wilson")
        wl, wh = S.wilson_bounds(ks, nn)
        np.testing.assert_allclose(wl, lo, atol=1e-12)
        np.testing.assert_allclose(wh, hi, atol=1e-12)


def test_newcombe_independent_against_statsmodels():
    rng = np.random.default_rng(3)
    for _ in range(600):
        n1, n2 = (int(v) for v in rng.integers(1, 200, size=2))
        k1, k2 = int(rng.integers(0, n1 + 1)), int(rng.integers(0, n2 + 1))
        lo, hi = confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff")
        iv = S.newcombe_independent(k1, n1, k2, n2)
        assert iv.lo == pytest.approx(lo, abs=1e-10) and iv.hi == pytest.approx(hi, abs=1e-10)


def test_fisher_against_scipy_random():
    rng = np.random.default_rng(4)
    for _ in range(200):
        n1, n2 = (int(v) for v in rng.integers(1, 80, size=2))
        k1, k2 = int(rng.integers(0, n1 + 1)), int(rng.integers(0, n2 + 1))
        assert S.fisher_exact(k1, n1, k2, n2) == pytest.approx(
            sps.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue, rel=1e-12)


def test_cochran_q_against_statsmodels_random():
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(1000):
        k = int(rng.integers(2, 6))
        n = int(rng.integers(3, 60))
        probs = rng.uniform(0.1, 0.9, size=k)
        base = rng.uniform(-1, 1, size=(n, 1))
        x = (rng.uniform(size=(n, k)) < np.clip(probs + 0.3 * base, 0, 1)).astype(int)
        row = x.sum(axis=1)
        if np.all((row == 0) | (row == k)):
            continue
        ours = S.cochran_q(x)
        ref = ct.cochrans_q(x)
        assert ours.q == pytest.approx(ref.statistic, rel=1e-10)
        assert ours.p == pytest.approx(ref.pvalue, rel=1e-8, abs=1e-300)
        assert ours.df == ref.df
        if k == 2:  # reduces to McNemar's uncorrected chi2
            b = int(np.sum((x[:, 0] == 1) & (x[:, 1] == 0)))
            c = int(np.sum((x[:, 0] == 0) & (x[:, 1] == 1)))
            assert ours.q == pytest.approx(S.mcnemar(b, c).chi2, rel=1e-10)
        checked += 1
    assert checked > 700


def test_holm_against_statsmodels_random(monkeypatch):
    import gc

    # statsmodels' multipletests runs gc.collect() on every call, which dominates the time;
    # skipping it changes nothing in the result
    monkeypatch.setattr(gc, "collect", lambda *a: 0)
    rng = np.random.default_rng(6)
    for _ in range(3000):
        m = int(rng.integers(1, 12))
        p = rng.uniform(0, 0.2, size=m) ** rng.uniform(0.5, 2)
        if rng.uniform() < 0.3:
            p[rng.integers(0, m)] = p[0]  # ties
        ref = multipletests(p, alpha=0.05, method="holm")[1]
        ours = S.holm(list(p))
        assert ours == pytest.approx(list(ref), rel=1e-12, abs=1e-15)
        # and the step-down procedure itself: reject H_(1..k-1), k the first p_(k) > alpha/(m-k+1)
        alpha = float(rng.uniform(0.01, 0.2))
        order = np.argsort(p, kind="stable")
        rejected = np.zeros(m, dtype=bool)
        for rank, idx in enumerate(order):
            if p[idx] > alpha / (m - rank):
                break
            rejected[idx] = True
        assert list(np.array(ours) <= alpha) == list(rejected)


def test_kappas_against_statsmodels_random():
    rng = np.random.default_rng(7)
    cats = ["success", "failure", "unsure"]
    compared = {"cohen": 0, "fleiss": 0}
    for _ in range(500):
        n = int(rng.integers(5, 80))
        truth = rng.integers(0, 3, size=n)
        j1 = np.where(rng.uniform(size=n) < 0.8, truth, rng.integers(0, 3, size=n))
        j2 = np.where(rng.uniform(size=n) < 0.7, truth, rng.integers(0, 3, size=n))
        table = np.zeros((3, 3))
        for x, y in zip(j1, j2, strict=True):
            table[x, y] += 1
        ref = sm_cohens_kappa(table, return_results=False)
        ours = S.cohen_kappa([cats[i] for i in j1], [cats[i] for i in j2])
        if np.isfinite(ref):
            assert ours == pytest.approx(ref, abs=1e-10)
            compared["cohen"] += 1
        else:   # statsmodels gives nan when chance agreement is 1; ours is defined there
            assert ours in (0.0, 1.0)
        raters = int(rng.integers(2, 6))
        labels = np.stack([np.where(rng.uniform(size=n) < 0.75, truth, rng.integers(0, 3, size=n))
                           for _ in range(raters)], axis=1)
        counts = np.stack([(labels == c).sum(axis=1) for c in range(3)], axis=1)
        ref_f = sm_fleiss_kappa(counts, method="fleiss")
        if np.isfinite(ref_f):
            assert S.fleiss_kappa(counts) == pytest.approx(ref_f, abs=1e-10)
            compared["fleiss"] += 1
    # Count guard: the comparisons above are conditional; nearly every random table is regular.
    assert compared["cohen"] >= 450 and compared["fleiss"] >= 450, compared


# ------------------------------------------------------------------ planning


def _power_brute(n, p10, p01, alpha, test):
    """Power by enumerating every (b, c) of the trinomial (independent of the fast path)."""
    p_rest = 1 - p10 - p01
    total = 0.0
    for b in range(n + 1):
        for c in range(n - b + 1):
            pv = S.mcnemar_midp(b, c) if test == "mcnemar_midp" else S.mcnemar_exact_p(b, c)
            if pv <= alpha:
                total += sps.multinomial.pmf([b, c, n - b - c], n, [p10, p01, p_rest])
    return total


@pytest.mark.parametrize("test", ["mcnemar_midp", "mcnemar_exact"])
def test_paired_power_against_brute_enumeration(test):
    for n, p10, p01 in [(20, 0.2, 0.05), (30, 0.15, 0.1), (12, 0.4, 0.1), (25, 0.05, 0.3)]:
        assert S.paired_power(n, p10, p01, 0.05, test).power == pytest.approx(
            _power_brute(n, p10, p01, 0.05, test), abs=1e-10)


def test_paired_power_monte_carlo():
    rng = np.random.default_rng(12)
    n, p10, p01 = 60, 0.2, 0.06
    draws = rng.multinomial(n, [p10, p01, 1 - p10 - p01], size=4000)
    b, c = draws[:, 0], draws[:, 1]
    lo, m = np.minimum(b, c), b + c
    midp = np.where(b == c, 1.0, np.minimum(1, 2 * sps.binom.cdf(lo, m, 0.5) - sps.binom.pmf(lo, m, 0.5)))
    for i in range(0, 4000, 97):   # the vectorised mid-p is the library's
        assert midp[i] == pytest.approx(S.mcnemar_midp(int(b[i]), int(c[i])))
    rej = np.mean(midp <= 0.05)
    assert S.paired_power(n, p10, p01).power == pytest.approx(rej, abs=0.025)


def test_layouts_needed_is_smallest_reaching_power():
    for p_a, p_b, agree in [(0.9, 0.8, None), (0.8, 0.6, 0.8), (0.7, 0.5, 0.7), (0.95, 0.85, 0.9)]:
        _, p10, p01, _ = S.cell_probabilities(p_a, p_b, agree)
        n = S.layouts_needed(p10, p01, 0.8)
        assert n is not None
        assert S.paired_power(n, p10, p01).power >= 0.8
        assert all(S.paired_power(m, p10, p01).power < 0.8 for m in range(max(1, n - 60), n))
    # more agreement (fewer discordant pairs at the same difference) needs fewer layouts
    _, a10, a01, _ = S.cell_probabilities(0.9, 0.8, 0.88)
    _, b10, b01, _ = S.cell_probabilities(0.9, 0.8, 0.74)
    assert S.layouts_needed(a10, a01) < S.layouts_needed(b10, b01)


def test_cell_probabilities_validation():
    p11, p10, p01, p00 = S.cell_probabilities(0.9, 0.8, 0.85)
    assert (p11 + p10, p11 + p01, p11 + p10 + p01 + p00) == pytest.approx((0.9, 0.8, 1.0))
    with pytest.raises(ValueError, match="impossible"):
        S.cell_probabilities(0.9, 0.8, agreement=0.95)      # discordance below |difference|
    with pytest.raises(ValueError, match="impossible"):
        S.cell_probabilities(0.9, 0.8, discordance=0.5)     # above 2 - p_a - p_b
    with pytest.raises(ValueError):
        S.cell_probabilities(1.1, 0.5)


def test_discordant_floor_is_the_best_exact_p():
    for k in range(1, 30):
        assert S.discordant_floor(k) == pytest.approx(S.mcnemar_exact_p(k, 0))
        assert all(S.mcnemar_exact_p(b, k - b) >= S.discordant_floor(k) - 1e-15 for b in range(k + 1))


# ------------------------------------------------------------------ e-value and anytime validity


def test_evalue_is_a_fair_bet_under_the_null():
    # E[E_n] = 1 under theta = 1/2 for every n: the defining property of an e-variable
    for n in (1, 5, 20, 60):
        ks = np.arange(n + 1)
        e = np.array([S.evalue_discordant(int(k), n - int(k)).e_value for k in ks])
        assert float(np.dot(sps.binom.pmf(ks, n, 0.5), e)) == pytest.approx(1.0, rel=1e-9)
    assert S.evalue_discordant(0, 0).e_value == pytest.approx(1.0)
    assert S.evalue_discordant(20, 0).reject and not S.evalue_discordant(5, 0).reject


def test_evalue_stopping_keeps_type_one_error_while_naive_peeking_does_not():
    """Monte Carlo under a true null (A and B equally good, 30 % discordant layouts), 3000
    campaigns of up to 200 layouts, a look after every layout."""
    rng = np.random.default_rng(20261129)
    runs, layouts, alpha = 3000, 200, 0.05
    disc = rng.uniform(size=(runs, layouts)) < 0.3
    a_wins = rng.uniform(size=(runs, layouts)) < 0.5
    b = np.cumsum(disc & a_wins, axis=1)
    c = np.cumsum(disc & ~a_wins, axis=1)
    # vectorised e-value and mid-p McNemar on every prefix
    log_e = (special.betaln(1 + b, 1 + c) - special.betaln(1, 1) + (b + c) * math.log(2))
    e_reject = np.any(log_e >= math.log(1 / alpha), axis=1).mean()
    m = b + c
    lo = np.minimum(b, c)
    with np.errstate(invalid="ignore"):
        midp = np.where(m > 0, np.minimum(1, 2 * sps.binom.cdf(lo, m, 0.5) - sps.binom.pmf(lo, m, 0.5)), 1.0)
    midp = np.where(b == c, 1.0, midp)
    naive_reject = np.any(midp <= alpha, axis=1).mean()
    se = math.sqrt(alpha * (1 - alpha) / runs)
    assert e_reject <= alpha + 2 * se, e_reject
    assert naive_reject > alpha + 4 * se, naive_reject
    # spot-check the vectorised e-value against the library function
    i, j = 7, 120
    assert math.exp(log_e[i, j]) == pytest.approx(S.evalue_discordant(int(b[i, j]), int(c[i, j])).e_value)


def test_evalue_has_power_under_an_alternative():
    rng = np.random.default_rng(5)
    hits = 0
    for _ in range(300):
        wins = rng.uniform(size=150) < 0.8     # A wins 80 % of discordant layouts
        b = np.cumsum(wins)
        c = np.cumsum(~wins)
        hits += any(S.evalue_discordant(int(x), int(y)).reject for x, y in zip(b, c, strict=True))
    assert hits / 300 > 0.9


# ------------------------------------------------------------------ bootstrap


def test_stratified_bootstrap_is_seeded_and_stratified():
    rng = np.random.default_rng(0)
    scores = rng.normal(loc=[0.2, 0.5, 0.9], scale=0.1, size=(10, 3))
    a = S.stratified_bootstrap_ci(scores, reps=300, rng=42)
    b = S.stratified_bootstrap_ci(scores, reps=300, rng=np.random.default_rng(42))
    c = S.stratified_bootstrap_ci(scores, reps=300, rng=43)
    assert (a.lo, a.hi) == (b.lo, b.hi)
    assert (a.lo, a.hi) != (c.lo, c.hi)
    assert a.lo <= a.estimate <= a.hi
    # every resample keeps N runs per task: the per-task mean metric can never mix tasks
    task_means = S.stratified_bootstrap_ci(scores, metric=lambda x: float(x[:, 2].mean()), reps=200, rng=1)
    assert scores[:, 2].min() <= task_means.lo <= task_means.hi <= scores[:, 2].max()


def _r3(iv):
    return (round(iv.lo, 3), round(iv.hi, 3))


def _r2(iv):
    return (round(iv.lo, 2), round(iv.hi, 2))


# ------------------------------------------------------------------ properties (hypothesis)

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

counts = st.integers(0, 120)


@settings(max_examples=150, deadline=None)
@given(a=counts, b=counts, c=counts, d=counts)
def test_paired_interval_properties(a, b, c, d):
    t = S.PairedTable(a, b, c, d)
    if t.n == 0:
        return
    for method in ("newcombe", "tango", "bonett-price", "wald"):
        iv = C.paired_difference(t, method)
        assert -1.0 <= iv.lo <= iv.hi <= 1.0, method
        assert iv.estimate == pytest.approx((b - c) / t.n)
        if method in ("newcombe", "tango"):
            assert iv.lo <= iv.estimate + 1e-12 and iv.estimate <= iv.hi + 1e-12, method
    # swapping the policies mirrors every interval
    sw = S.PairedTable(a, c, b, d)
    for method in ("newcombe", "tango", "bonett-price"):
        x, y = C.paired_difference(t, method), C.paired_difference(sw, method)
        assert x.lo == pytest.approx(-y.hi, abs=1e-7) and x.hi == pytest.approx(-y.lo, abs=1e-7)


@settings(max_examples=150, deadline=None)
@given(b=counts, c=counts)
def test_mcnemar_and_evalue_properties(b, c):
    r = S.mcnemar(b, c)
    assert 0 < r.mid_p <= r.exact_p <= 1
    assert r.exact_p >= S.discordant_floor(b + c) - 1e-15
    assert S.mcnemar(c, b) == S.McNemarResult(c, b, r.exact_p, r.mid_p, r.chi2, r.chi2_p, r.chi2_cc, r.chi2_cc_p)
    e = S.evalue_discordant(b, c).e_value
    assert e == pytest.approx(S.evalue_discordant(c, b).e_value) and e > 0
    # one more win for the side already ahead never lowers the evidence
    if b >= c:
        assert S.evalue_discordant(b + 1, c).e_value >= e * (1 - 1e-12)
