"""The corrected rates and paired difference (`stats.ppi`): against a from-scratch numpy oracle,
against PPI's closed form on a hand-computed example, and the coverage simulation's code path
with a positive control (tests/support/ppi_sim.py; the grid: bench/ppi_coverage.py)."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from scipy import stats as sps

from orchestrator.analysis import stats
from support.ppi_sim import Scenario, coverage, simulate, uncorrected_rate
from support.repo import REPO as ROOT


def _oracle_difference(marks, fa, ya, xa, fb, yb, xb, pi, c, level=0.95):
    """From scratch: z = f + xi (y - f) / pi, per-mark sums, ratio variance with K/(K-1) plus
    c (1 - pi) / (pi n)^2 per policy, t(K-1) Wald interval."""
    za = np.array([f + (x and (y - f) / pi) for f, y, x in zip(fa, ya, xa, strict=True)])
    zb = np.array([f + (x and (y - f) / pi) for f, y, x in zip(fb, yb, xb, strict=True)])
    ids = sorted(set(marks))
    d = np.array([sum(za[i] - zb[i] for i in range(len(marks)) if marks[i] == m) for m in ids])
    n = np.array([sum(1 for x in marks if x == m) for m in ids], dtype=float)
    est = d.sum() / n.sum()
    k = len(ids)
    var = k / (k - 1) * np.sum((d - est * n) ** 2) / n.sum() ** 2 + 2 * c * (1 - pi) / (pi * n.sum()) ** 2
    t = sps.t.ppf(1 - (1 - level) / 2, k - 1)
    return est, est - t * math.sqrt(var), est + t * math.sqrt(var), 2 * sps.t.sf(abs(est) / math.sqrt(var), k - 1)


def test_difference_matches_a_from_scratch_oracle():
    rng = np.random.default_rng(7)
    cases = 0
    for _ in range(20):
        pairs = 40
        marks = list(rng.integers(0, 12, pairs))
        fa, fb = rng.integers(0, 2, pairs), rng.integers(0, 2, pairs)
        ya = np.where(rng.random(pairs) < 0.15, 1 - fa, fa)
        yb = np.where(rng.random(pairs) < 0.15, 1 - fb, fb)
        xa, xb = rng.random(pairs) < 0.25, rng.random(pairs) < 0.25
        pi = 0.25
        got = stats.ppi_difference(marks, fa, [int(v) if x else None for v, x in zip(ya, xa, strict=True)], xa,
                                   fb, [int(v) if x else None for v, x in zip(yb, xb, strict=True)], xb, pi)
        est, lo, hi, p = _oracle_difference(marks, fa, ya, xa, fb, yb, xb, pi, stats.ppi.PSEUDO_DISAGREEMENTS)
        assert got.estimate == pytest.approx(est, abs=1e-12)
        assert (got.lo, got.hi) == pytest.approx((max(-1, lo), min(1, hi)), abs=1e-12)
        assert got.p_value == pytest.approx(p, abs=1e-12)
        assert got.marks == len(set(marks)) and got.items == pairs
        cases += 1
    assert cases == 20


def test_rate_matches_a_from_scratch_oracle():
    """The estimate and its variance; the interval is Wilson's on n_eff = p (1 - p) / V with t(K-1)."""
    rng = np.random.default_rng(11)
    trials = 60
    marks = list(np.repeat(np.arange(20), 3))
    f = rng.integers(0, 2, trials)
    y = np.where(rng.random(trials) < 0.2, 1 - f, f)
    x = np.zeros(trials, dtype=bool)
    x[rng.choice(trials, 12, replace=False)] = True
    pi = 12 / trials
    got = stats.ppi_rate(marks, f, [int(v) if a else None for v, a in zip(y, x, strict=True)], x, pi)
    z = f + x * (y - f) / pi
    t = np.array([z[3 * m:3 * m + 3].sum() for m in range(20)])
    est = z.sum() / trials
    var = 20 / 19 * np.sum((t - est * 3) ** 2) / trials ** 2 + 0.15 * (1 - pi) / (pi * trials) ** 2
    assert got.estimate == pytest.approx(est) and got.se == pytest.approx(math.sqrt(var))
    n_eff = min(trials, est * (1 - est) / var)
    crit = sps.t.ppf(0.975, 19)
    centre = (est + crit ** 2 / (2 * n_eff)) / (1 + crit ** 2 / n_eff)
    half = crit / (1 + crit ** 2 / n_eff) * math.sqrt(est * (1 - est) / n_eff + crit ** 2 / (4 * n_eff ** 2))
    assert (got.lo, got.hi) == pytest.approx((centre - half, centre + half))


def test_ppi_closed_form_on_a_hand_computed_example():
    """PPI's mean estimator (Angelopoulos et al. 2023): mean of f over all N trials minus the
    mean of (f - Y) over the n labelled, which the inverse-probability form equals at pi = n / N.
    Ten trials on ten marks, f = six successes; audited trials 0 (f 1, Y 0) and 9 (f 0, Y 1):
    0.6 - ((1 - 0) + (0 - 1)) / 2 = 0.6; with trial 9's Y = 0: 0.6 - 1/2 = 0.1."""
    f = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    audited = [True] + [False] * 8 + [True]
    human = [0] + [None] * 8 + [1]
    assert stats.ppi_rate(range(10), f, human, audited, 0.2).estimate == pytest.approx(0.6)
    human[9] = 0
    assert stats.ppi_rate(range(10), f, human, audited, 0.2).estimate == pytest.approx(0.1)
    # lam = 0: people's labels only, weighted by 1/pi (Horvitz-Thompson): (0 + 0) / 0.2 / 10 = 0
    assert stats.ppi_rate(range(10), f, human, audited, 0.2, lam=0.0).estimate == pytest.approx(0.0)
    # the paired difference: A as above (0.1), B all failures with no audited trial: 0.1 - 0
    d = stats.ppi_difference(range(10), f, human, audited, [0] * 10, [None] * 10, [False] * 10, 0.2)
    assert d.estimate == pytest.approx(0.1)


def test_an_audited_trial_without_a_human_label_is_refused():
    with pytest.raises(ValueError, match="audited trial needs a human label"):
        stats.ppi_rate([0, 1], [1, 0], [None, 0], [True, False], 0.5)
    with pytest.raises(ValueError, match="inclusion probability"):
        stats.ppi_rate([0, 1], [1, 0], [1, 0], [True, False], 0.0)


def test_coverage_simulation_path_and_its_positive_control():
    """A few replicates of the bench's simulation: the corrected intervals cover; the rater's
    own labels with a biased rater (calling near-threshold failures successes) do not: the
    simulation can fail an interval."""
    biased = Scenario(marks=20, repeats=3, rater_bias=1.5, audit=0.2)
    out = coverage(biased, runs=80, seed=5)
    assert out["uncorrected_a"] < 0.6, out           # the positive control fails
    assert out["rate_a"] >= 0.85 and out["rate_b"] >= 0.85 and out["difference"] >= 0.85, out
    assert 0.2 <= out["human_per_episode"] < 0.6
    rep = simulate(biased, np.random.default_rng(1))
    assert rep.audited.sum() == 24 == 0.2 * rep.truth.size       # exactly k of N
    assert not uncorrected_rate(rep).contains(1.0)


def test_the_ppi_bench_runs():
    spec = importlib.util.spec_from_file_location("ppi_coverage", ROOT / "bench" / "ppi_coverage.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = bench.grid(runs=3, marks=(20,), audits=(0.1,))
    assert len(rows) == len(bench.SCENARIOS) and all(0 <= r["rate_a"] <= 1 for r in rows)
