"""The statistics of `orchestrator compare` against independent implementations: rliable 1.2
(IQM, mean, stratified bootstrap, performance profiles, probability of improvement), the
definitions computed by hand and the bootstrap's exact distribution by enumeration, choix and a
direct likelihood maximisation (Bradley-Terry), statsmodels (Cochran-Mantel-Haenszel) and
brute-force enumeration (the exact trend test)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from orchestrator.analysis import stats
from orchestrator.analysis.stats import aggregate, bradley_terry
from support.requires import require_module

require_module("rliable.library")   # the dev oracles (pyproject dev group): missing fails with the install line
require_module("choix")
import rliable.library as rly  # noqa: E402
import rliable.metrics as rmetrics  # noqa: E402


def _scores(rng, runs, tasks, n=20):
    return rng.integers(0, n + 1, size=(runs, tasks)) / n


def _bracket(reference: np.ndarray, q: float, b_mine: int) -> tuple[float, float]:
    """Where a percentile-bootstrap endpoint at quantile q from b_mine replicates may fall, given
    the reference distribution's replicates (or its exact support as equally likely values):
    the reference's quantiles at q -+ 4 Monte Carlo standard errors of a quantile's rank."""
    ref = np.sort(np.asarray(reference, dtype=float))
    b_ref = ref.size
    delta = 4 * np.sqrt(q * (1 - q) * (1 / b_mine + 1 / b_ref))
    lo = ref[max(0, int(np.floor((q - delta) * b_ref)) - 1)]
    hi = ref[min(b_ref - 1, int(np.ceil((q + delta) * b_ref)))]
    return float(lo), float(hi)


def _inside(value: float, bracket: tuple[float, float]) -> bool:
    return bracket[0] - 1e-12 <= value <= bracket[1] + 1e-12


# ------------------------------------------------------------------ point estimates


def test_mean_iqm_profile_and_improvement_equal_rliable_and_the_definitions():
    rng = np.random.default_rng(20261)
    checked = 0
    for runs, tasks in [(3, 1), (3, 3), (5, 4), (10, 2), (4, 7)]:
        x, y = _scores(rng, runs, tasks), _scores(rng, runs + 1, tasks)
        cols, ycols = list(x.T), list(y.T)
        assert stats.mean_of_tasks(cols) == pytest.approx(rmetrics.aggregate_mean(x), abs=1e-12)
        assert stats.iqm_of_runs(cols) == pytest.approx(rmetrics.aggregate_iqm(x), abs=1e-12)
        # by hand: sort the pooled runs, cut int(N/4) from each end, average the rest
        pooled = np.sort(x.ravel())
        g = pooled.size // 4
        assert stats.iqm_of_runs(cols) == pytest.approx(pooled[g:pooled.size - g].mean(), abs=1e-12)
        taus = np.linspace(0, 1, 21)
        assert np.allclose(stats.score_distribution(cols, taus), rly.score_distributions(x, taus))
        poi = stats.probability_of_improvement(cols, ycols)
        assert poi == pytest.approx(rmetrics.probability_of_improvement(x, y), abs=1e-12)
        by_hand = np.mean([np.mean([(a > b) + 0.5 * (a == b) for a in x[:, t] for b in y[:, t]])
                           for t in range(tasks)])
        assert poi == pytest.approx(by_hand, abs=1e-12)
        checked += 1
    assert checked == 5


def test_the_iqm_of_ten_runs_keeps_six_as_rliable_does():
    x = np.arange(10.0)
    assert stats.iqm_of_runs([x]) == pytest.approx(np.mean(x[2:8]))      # int(2.5) = 2 cut each end


# ------------------------------------------------------------------ bootstrap intervals


def _exact_bootstrap(tasks, statistic):
    """Every stratified resample (each task's n_t^n_t index tuples), equally likely."""
    choices = [list(itertools.product(range(len(t)), repeat=len(t))) for t in tasks]
    return np.array([statistic([np.asarray(t)[list(ix)] for t, ix in zip(tasks, combo, strict=True)])
                     for combo in itertools.product(*choices)])


def test_intervals_match_the_exact_bootstrap_distribution_ragged_tasks():
    tasks = [[0.2, 0.55, 0.9], [0.1, 0.4], [0.75, 0.8, 0.3]]     # 27 x 4 x 27 resamples
    reps = 40_000
    mean_iv, iqm_iv = stats.mean_and_iqm_intervals(tasks, reps=reps, rng=5)
    for iv, fn in ((mean_iv, stats.mean_of_tasks), (iqm_iv, stats.iqm_of_runs)):
        exact = _exact_bootstrap(tasks, fn)
        assert iv.estimate == pytest.approx(fn(tasks))
        assert _inside(iv.lo, _bracket(exact, 0.025, reps)), (iv, np.quantile(exact, 0.025))
        assert _inside(iv.hi, _bracket(exact, 0.975, reps)), (iv, np.quantile(exact, 0.975))
    # a positive control: a bootstrap that redraws the runs of the first task only gives a
    # narrower interval, and the check refuses its ends
    exact = _exact_bootstrap(tasks, stats.mean_of_tasks)
    wrong = _exact_bootstrap(tasks[:1], lambda r: stats.mean_of_tasks([r[0], *tasks[1:]]))
    assert not _inside(float(np.quantile(wrong, 0.025)), _bracket(exact, 0.025, reps))
    assert not _inside(float(np.quantile(wrong, 0.975)), _bracket(exact, 0.975, reps))


@pytest.mark.slow   # seconds of simulation or enumeration: the full run, not the fast lane
def test_intervals_agree_with_rliable_within_monte_carlo_error():
    rng = np.random.default_rng(7)
    x, y = _scores(rng, 5, 3), _scores(rng, 5, 3)
    reps = 20_000
    mean_iv, iqm_iv = stats.mean_and_iqm_intervals(list(x.T), reps=reps, rng=11)
    np.random.seed(3)     # rliable's bootstrap draws from numpy's global generator
    ref = rly.StratifiedBootstrap(x).apply(
        lambda s: np.array([rmetrics.aggregate_mean(s), rmetrics.aggregate_iqm(s)]), reps=5000)
    checked = 0
    for k, iv in enumerate((mean_iv, iqm_iv)):
        assert _inside(iv.lo, _bracket(ref[:, k], 0.025, reps))
        assert _inside(iv.hi, _bracket(ref[:, k], 0.975, reps))
        checked += 1
    poi = stats.improvement_interval(list(x.T), list(y.T), reps=reps, rng=12)
    # rliable's probability of improvement runs scipy's Mann-Whitney per replicate (2.4 ms each):
    # 2000 replicates, and _bracket widens by their Monte Carlo error
    ref_poi = rly.StratifiedIndependentBootstrap(x, y).apply(rmetrics.probability_of_improvement, reps=2000)
    assert _inside(poi.lo, _bracket(ref_poi[:, 0], 0.025, reps))
    assert _inside(poi.hi, _bracket(ref_poi[:, 0], 0.975, reps))
    taus = np.linspace(0, 1, 11)
    profile, lo, hi = stats.profile_intervals(list(x.T), taus, reps=reps, rng=13)
    ref_profile = rly.StratifiedBootstrap(x).apply(lambda s: rly.score_distributions(s, taus), reps=5000)
    for t in range(taus.size):
        assert _inside(lo[t], _bracket(ref_profile[:, t], 0.025, reps))
        assert _inside(hi[t], _bracket(ref_profile[:, t], 0.975, reps))
        checked += 1
    assert checked == 2 + taus.size


def test_the_bootstrap_is_seeded_and_resample_counts_are_multinomial():
    tasks = [list(np.random.default_rng(1).random(6)), list(np.random.default_rng(2).random(5))]
    assert stats.mean_and_iqm_intervals(tasks, reps=3000, rng=4) == stats.mean_and_iqm_intervals(tasks, reps=3000, rng=4)
    assert stats.mean_and_iqm_intervals(tasks, reps=3000, rng=4) != stats.mean_and_iqm_intervals(tasks, reps=3000, rng=5)
    counts = aggregate.resample_counts(np.random.default_rng(0), 100_000, 3)
    assert (counts.sum(axis=1) == 3).all()
    # P(a given item drawn k times) = Binomial(3, 1/3)
    freq = np.bincount(counts[:, 0].astype(int), minlength=4) / counts.shape[0]
    assert np.allclose(freq, sps.binom.pmf(range(4), 3, 1 / 3), atol=0.005)
    # one run per task: nothing to redraw, the interval is the point
    iv, _ = stats.mean_and_iqm_intervals([[0.4], [0.6]], reps=500)
    assert iv.lo == iv.hi == pytest.approx(0.5)


# ------------------------------------------------------------------ the exact trend test


def _trend_by_enumeration(blocks):
    """Exact and mid-p by enumerating every within-block arrangement of the successes."""
    observed = sum(s for block in blocks for s, y in block if y)
    options = []
    for block in blocks:
        scores = [s for s, _ in block]
        m = sum(1 for _, y in block if y)
        options.append([sum(c) for c in itertools.combinations(scores, m)])
    dist: dict[int, int] = {}
    total = 0
    for combo in itertools.product(*options):
        t = sum(combo)
        dist[t] = dist.get(t, 0) + 1
        total += 1
    upper = sum(v for t, v in dist.items() if t >= observed) / total
    lower = sum(v for t, v in dist.items() if t <= observed) / total
    at = dist.get(observed, 0) / total
    return min(1.0, 2 * min(upper, lower)), min(1.0, 2 * (min(upper, lower) - at / 2)), upper


def test_trend_test_equals_brute_force_enumeration():
    rng = np.random.default_rng(33)
    checked = 0
    for _ in range(60):
        k = int(rng.integers(2, 5))
        blocks = []
        for _ in range(int(rng.integers(1, 6))):
            present = sorted(rng.choice(k, size=int(rng.integers(2, k + 1)), replace=False))
            blocks.append([(int(s), bool(rng.random() < 0.2 + 0.15 * s)) for s in present])
        result = stats.trend_test(blocks)
        exact, mid, upper = _trend_by_enumeration(blocks)
        assert result.exact_p == pytest.approx(exact, abs=1e-12)
        assert result.mid_p == pytest.approx(mid, abs=1e-12)
        assert result.upper_p == pytest.approx(upper, abs=1e-12)
        checked += 1
    assert checked == 60


def test_trend_test_on_two_steps_is_mcnemar():
    checked = 0
    for b, c, both in [(5, 0, 3), (7, 2, 0), (3, 3, 4), (1, 0, 9)]:
        blocks = ([[(0, False), (1, True)]] * b + [[(0, True), (1, False)]] * c
                  + [[(0, True), (1, True)]] * both)
        result = stats.trend_test(blocks)
        assert result.exact_p == pytest.approx(stats.mcnemar_exact_p(b, c))
        assert result.mid_p == pytest.approx(stats.mcnemar_midp(b, c))
        checked += 1
    assert checked == 4


def _clustered_trend_by_enumeration(units):
    """Two-sided exact and mid-p of sum_k U_k over every sign pattern of the units' centred
    statistics U_k = sum over blocks of (score sum of successes - m_b mean score)."""
    u = []
    for unit in units:
        total = 0.0
        for block in unit:
            m = sum(1 for _, y in block if y)
            total += sum(s for s, y in block if y) - m * np.mean([s for s, _ in block])
        u.append(total)
    observed = abs(sum(u))
    sums = [sum(e * x for e, x in zip(signs, u, strict=True)) for signs in itertools.product((1, -1), repeat=len(u))]
    above = sum(1 for v in sums if v > observed + 1e-9) / len(sums)
    at = sum(1 for v in sums if abs(v - observed) <= 1e-9) / len(sums)
    return min(1.0, 2 * (above + at)), min(1.0, 2 * (above + at / 2))


def test_the_trend_over_marks_equals_enumeration_of_sign_flips():
    rng = np.random.default_rng(34)
    checked = 0
    for _ in range(40):
        k = int(rng.integers(2, 5))
        units = []
        for _ in range(int(rng.integers(1, 9))):
            unit = []
            for _ in range(int(rng.integers(1, 4))):             # repeats of the mark
                present = sorted(rng.choice(k, size=int(rng.integers(2, k + 1)), replace=False))
                unit.append([(int(s), bool(rng.random() < 0.2 + 0.15 * s)) for s in present])
            units.append(unit)
        result = stats.clustered_trend_test(units)
        exact, mid = _clustered_trend_by_enumeration(units)
        assert result.exact_p == pytest.approx(exact, abs=1e-12)
        assert result.mid_p == pytest.approx(mid, abs=1e-12)
        checked += 1
    assert checked == 40
    # one layout run a mark, two steps: McNemar's exact test (scipy's binomial test), 6 to 1
    units = [[[(0, False), (1, True)]]] * 6 + [[[(0, True), (1, False)]]] + [[[(0, True), (1, True)]]] * 3
    assert stats.clustered_trend_test(units).exact_p == pytest.approx(sps.binomtest(6, 7).pvalue)
    # five repeats of one mark all rising count once: 1 unit, exact p 1, mid-p 1/2 (the pooled test: 5 to 0)
    one = stats.clustered_trend_test([[[(0, False), (1, True)]] * 5])
    assert (one.exact_p, one.mid_p, one.units) == (1.0, 0.5, 1)
    assert stats.trend_test([[(0, False), (1, True)]] * 5).mid_p == pytest.approx(0.5 ** 5)


# ------------------------------------------------------------------ Bradley-Terry


def test_bradley_terry_equals_choix_and_a_direct_maximisation():
    import choix
    from scipy.optimize import minimize

    rng = np.random.default_rng(9)
    checked = 0
    for size in (2, 3, 5, 8):
        wins = rng.integers(0, 5, size=(size, size))
        np.fill_diagonal(wins, 0)
        wins[0, 1:] += 3
        wins[1:, 0] = 0                        # policy 0 never loses: no plain MLE exists
        theta = bradley_terry.fit(wins)
        data = [(i, j) for i in range(size) for j in range(size) for _ in range(wins[i, j])]
        assert np.allclose(theta, choix.opt_pairwise(size, data, alpha=bradley_terry.ALPHA), atol=1e-4)

        def objective(t, wins=wins):
            d = t[:, None] - t[None, :]
            return float((wins * np.logaddexp(0, -d)).sum() + bradley_terry.ALPHA * (t ** 2).sum())

        direct = minimize(objective, np.zeros(size), method="BFGS", options={"gtol": 1e-10}).x
        assert np.allclose(theta, direct, atol=1e-5)
        assert abs(theta.sum()) < 1e-8 and theta[0] == theta.max()
        checked += 1
    assert checked == 4


def test_bradley_terry_bootstrap_redraws_units_within_strata():
    # one unit per stratum: every replicate redraws the same units, so the interval is the point
    units = np.zeros((3, 3, 3))
    units[0, 0, 1] = 2
    units[1, 1, 2] = 1
    units[2, 2, 0] = 1
    units[2, 0, 2] = 3
    r = bradley_terry.rate(units, ["a", "b", "c"], reps=300)
    assert np.allclose(r.lo, r.theta) and np.allclose(r.hi, r.theta)
    assert r.comparisons.tolist() == [6, 3, 5]
    # the same units in one stratum vary
    pooled = bradley_terry.rate(units, ["a", "a", "a"], reps=300)
    assert (pooled.hi - pooled.lo).min() > 0.1
    assert bradley_terry.components(units.sum(axis=0)) == [[0, 1, 2]]
    assert bradley_terry.components(units[0]) == [[0, 1], [2]]


# ------------------------------------------------------------------ Cochran-Mantel-Haenszel


def test_cmh_equals_statsmodels_and_mcnemar_on_pair_strata():
    from statsmodels.stats.contingency_tables import StratifiedTable

    rng = np.random.default_rng(4)
    checked = 0
    for _ in range(20):
        tables = rng.integers(0, 6, size=(int(rng.integers(2, 6)), 2, 2))
        tables[:, 0, 0] += 1
        tables[:, 1, 1] += 1
        chi2, p = stats.cmh_test(tables.tolist())
        ref = StratifiedTable(tables.transpose(1, 2, 0).astype(float)).test_null_odds(correction=False)
        assert chi2 == pytest.approx(ref.statistic) and p == pytest.approx(ref.pvalue)
        checked += 1
    assert checked == 20
    # every pair its own stratum (rows: method X, Y; columns: success, failure) -> McNemar's chi2
    b, c, both, neither = 7, 2, 5, 4
    strata = ([[[1, 0], [0, 1]]] * b + [[[0, 1], [1, 0]]] * c + [[[1, 0], [1, 0]]] * both
              + [[[0, 1], [0, 1]]] * neither)
    assert stats.cmh_test(strata)[0] == pytest.approx(stats.mcnemar(b, c).chi2)


# ------------------------------------------------------------------ methods: the training seed the unit


def _permutation_by_enumeration(x_tasks, y_tasks):
    """Two-sided p of sum_t (mean x_t - mean y_t) over every relabelling within every task."""
    def stat(xs, ys):
        return sum(sum(x) / len(x) - sum(y) / len(y) for x, y in zip(xs, ys, strict=True))

    observed = abs(stat(x_tasks, y_tasks))
    options = []
    for x, y in zip(x_tasks, y_tasks, strict=True):
        pooled = list(x) + list(y)
        splits = []
        for pick in itertools.combinations(range(len(pooled)), len(x)):
            splits.append(([pooled[i] for i in pick], [pooled[i] for i in range(len(pooled)) if i not in pick]))
        options.append(splits)
    hits = total = 0
    for combo in itertools.product(*options):
        total += 1
        hits += abs(stat([c[0] for c in combo], [c[1] for c in combo])) >= observed - 1e-9
    return hits / total, total


def test_seed_permutation_test_equals_enumeration_and_welch_equals_scipy():
    rng = np.random.default_rng(48)
    checked = 0
    for tasks, nx, ny in [(1, 3, 3), (2, 3, 2), (3, 3, 3), (2, 4, 1), (1, 5, 5)]:
        x = [list(rng.integers(0, 11, size=nx) / 10) for _ in range(tasks)]
        y = [list(rng.integers(0, 11, size=ny) / 10) for _ in range(tasks)]
        result = stats.seed_permutation_test(x, y)
        p, total = _permutation_by_enumeration(x, y)
        assert result.exact and result.arrangements == total
        assert result.p == pytest.approx(p, abs=1e-12)
        assert result.difference == pytest.approx(np.mean([np.mean(a) - np.mean(b) for a, b in zip(x, y, strict=True)]))
        if ny >= 2 and tasks == 1:        # one task: Welch's interval is scipy's unequal-variance t
            ci = sps.ttest_ind(x[0], y[0], equal_var=False).confidence_interval(0.95)
            assert (result.interval.lo, result.interval.hi) == pytest.approx((max(-1, ci.low), min(1, ci.high)))
        checked += 1
    assert checked == 5
    # one task with 3 seeds of each: 20 arrangements, the two extremes: p never below 0.1
    far = stats.seed_permutation_test([[0.9, 0.95, 1.0]], [[0.1, 0.0, 0.05]])
    assert far.p == pytest.approx(0.1) and far.floor == pytest.approx(0.1)


def test_seed_permutation_test_by_monte_carlo_agrees_with_the_exact(monkeypatch):
    from orchestrator.analysis.stats import seeds

    rng = np.random.default_rng(49)
    x = [list(rng.random(4)) for _ in range(3)]
    y = [list(rng.random(4) - 0.15) for _ in range(3)]
    exact = seeds.seed_permutation_test(x, y)
    monkeypatch.setattr(seeds, "EXACT_LIMIT", 10)
    drawn = seeds.seed_permutation_test(x, y, rng=1)
    assert exact.exact and not drawn.exact and drawn.arrangements == seeds.MONTE_CARLO
    se = np.sqrt(exact.p * (1 - exact.p) / seeds.MONTE_CARLO)
    assert abs(drawn.p - exact.p) <= 4 * se + 1e-5, (drawn.p, exact.p)


def test_head_to_head_is_clopper_pearson_with_the_mark_as_the_unit():
    # one discordant layout a mark: scipy's exact (Clopper-Pearson) interval
    for wins, total in ((34, 35), (5, 5), (0, 4), (7, 12)):
        share, lo, hi = bradley_terry.head_to_head([(1, 1)] * wins + [(0, 1)] * (total - wins))
        ci = sps.binomtest(wins, total).proportion_ci(0.95, method="exact")
        assert (share, lo, hi) == pytest.approx((wins / total, ci.low, ci.high))
    # ten wins on each of 2 marks, none on 2 others (10 layouts each): the marks decide, the
    # interval is far wider than the 20-of-40 binomial one
    _, lo, hi = bradley_terry.head_to_head([(10, 10), (10, 10), (0, 10), (0, 10)])
    plain = sps.binomtest(20, 40).proportion_ci(0.95, method="exact")
    assert lo < plain.low - 0.1 and hi > plain.high + 0.1
